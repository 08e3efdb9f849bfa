// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @notice What the LAT's shared bases (LiquidTokenBase, LiquidTokenManagerBase) call of the
/// foundations a variant is built on, under OpenZeppelin 4.9's names. The v1.0.2 variant's
/// foundations (v1_0_2/Oz5.sol, ERC20.sol) implement these; Mainnet v1's contracts, built on
/// OpenZeppelin 4.9 upgradeable, hand each to OpenZeppelin's own. Declarations only: no storage,
/// events or errors, so that no variant's ABI gains anything from them.
abstract contract AccessHooks {
    /// DEFAULT_ADMIN_ROLE, which each variant's access control declares (public) as well.
    bytes32 internal constant ADMIN_ROLE = 0x00;

    /// The variants' own `onlyRole`, under another name: a base cannot share the modifier's name
    /// with OpenZeppelin's.
    modifier restrictedTo(bytes32 role) {
        _checkRole(role);
        _;
    }

    /// Reverts unless msg.sender holds `role`.
    function _checkRole(bytes32 role) internal view virtual;

    function _grantRole(bytes32 role, address account) internal virtual;
}

abstract contract PauseHooks {
    /// The variants' own `whenNotPaused`, under another name (see `restrictedTo`).
    modifier whenUnpaused() {
        _requireNotPaused();
        _;
    }

    function _requireNotPaused() internal view virtual;

    function _pause() internal virtual;

    function _unpause() internal virtual;
}

abstract contract ERC20Hooks {
    function totalSupply() public view virtual returns (uint256);

    function _mint(address account, uint256 amount) internal virtual;

    function _burn(address account, uint256 amount) internal virtual;
}

/// @notice How a variant moves tokens (Transfers.sol).
abstract contract TransferHooks {
    /// Moves `amount` of `asset` from `from` to this contract.
    function _pullAsset(address asset, address from, uint256 amount) internal virtual;

    /// Moves `amount` of `asset` from this contract to `to`.
    function _sendAsset(address asset, address to, uint256 amount) internal virtual;
}
