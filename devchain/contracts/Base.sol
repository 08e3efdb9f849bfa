// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @notice The slice of ERC-20 the other contracts call.
interface IERC20 {
    function balanceOf(address account) external view returns (uint256);
    function decimals() external view returns (uint8);
    function transfer(address to, uint256 amount) external returns (bool);
    function transferFrom(address from, address to, uint256 amount) external returns (bool);
    function approve(address spender, uint256 amount) external returns (bool);
    function allowance(address owner, address spender) external view returns (uint256);
}

/// @notice Single-owner access control (OpenZeppelin 5 error names). Plain contracts set the
/// owner in their constructor, proxied ones in `initialize`.
abstract contract Owned {
    address public owner;

    event OwnershipTransferred(address indexed previousOwner, address indexed newOwner);

    error OwnableUnauthorizedAccount(address account);
    error OwnableInvalidOwner(address owner);

    modifier onlyOwner() {
        if (msg.sender != owner) revert OwnableUnauthorizedAccount(msg.sender);
        _;
    }

    function transferOwnership(address newOwner) external onlyOwner {
        _transferOwnership(newOwner);
    }

    function _transferOwnership(address newOwner) internal {
        if (newOwner == address(0)) revert OwnableInvalidOwner(address(0));
        emit OwnershipTransferred(owner, newOwner);
        owner = newOwner;
    }
}

/// @notice One-shot `initialize` for contracts that live behind a proxy. The implementation
/// contract itself is locked at construction, so only proxies can be initialised.
abstract contract Initializable {
    bool private _initialized;

    error InvalidInitialization();

    modifier initializer() {
        if (_initialized) revert InvalidInitialization();
        _initialized = true;
        _;
    }

    constructor() {
        _initialized = true;
    }
}

/// @notice Removes the first `item` from an unordered `list` (the last entry takes its place);
/// nothing when it is absent. Panics on an empty list.
function removeAddress(address[] storage list, address item) {
    uint256 last = list.length - 1;
    for (uint256 i = 0; i <= last; i++) {
        if (list[i] == item) {
            list[i] = list[last];
            list.pop();
            break;
        }
    }
}
