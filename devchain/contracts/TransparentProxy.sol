// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

interface ITransparentProxy {
    function upgradeToAndCall(address newImplementation, bytes calldata data) external payable;
}

/// @notice A minimal transparent proxy (the OpenZeppelin 5 pattern): the implementation lives in
/// the EIP-1967 slot and every call is delegated to it, except calls from the admin, which may
/// only `upgradeToAndCall`. `data`, when not empty, is delegated once at construction (e.g. an
/// `initialize(...)` call); it may also be left empty and `initialize` called afterwards.
contract TransparentProxy {
    /// bytes32(uint256(keccak256("eip1967.proxy.implementation")) - 1)
    bytes32 internal constant IMPLEMENTATION_SLOT =
        0x360894a13ba1a3210667c828492db98dca3e2076cc3735a920a3ca505d382bbc;
    /// bytes32(uint256(keccak256("eip1967.proxy.admin")) - 1)
    bytes32 internal constant ADMIN_SLOT =
        0xb53127684a568b3173ae13b9f8a6016e243e63b6e8ee1178d6a717850b5d6103;

    event Upgraded(address indexed implementation);
    event AdminChanged(address previousAdmin, address newAdmin);

    error ERC1967InvalidImplementation(address implementation);
    error ProxyDeniedAdminAccess();

    constructor(address implementation, address admin, bytes memory data) payable {
        _upgradeToAndCall(implementation, data);
        emit AdminChanged(address(0), admin);
        assembly {
            sstore(ADMIN_SLOT, admin)
        }
    }

    fallback() external payable {
        address admin;
        assembly {
            admin := sload(ADMIN_SLOT)
        }
        if (msg.sender == admin) {
            if (msg.sig != ITransparentProxy.upgradeToAndCall.selector) revert ProxyDeniedAdminAccess();
            (address implementation, bytes memory data) = abi.decode(msg.data[4:], (address, bytes));
            _upgradeToAndCall(implementation, data);
            return;
        }
        assembly {
            let implementation := sload(IMPLEMENTATION_SLOT)
            calldatacopy(0, 0, calldatasize())
            let ok := delegatecall(gas(), implementation, 0, calldatasize(), 0, 0)
            returndatacopy(0, 0, returndatasize())
            switch ok
            case 0 { revert(0, returndatasize()) }
            default { return(0, returndatasize()) }
        }
    }

    function _upgradeToAndCall(address implementation, bytes memory data) private {
        if (implementation.code.length == 0) revert ERC1967InvalidImplementation(implementation);
        assembly {
            sstore(IMPLEMENTATION_SLOT, implementation)
        }
        emit Upgraded(implementation);
        if (data.length > 0) {
            (bool ok, bytes memory returndata) = implementation.delegatecall(data);
            if (!ok) {
                assembly {
                    revert(add(returndata, 32), mload(returndata))
                }
            }
        }
    }
}
