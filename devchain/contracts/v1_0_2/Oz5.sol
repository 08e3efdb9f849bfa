// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {AccessHooks, PauseHooks} from "../Hooks.sol";

/// @notice Access roles, pausing and a reentrancy guard with OpenZeppelin 5's custom errors, as
/// the deployments built on OpenZeppelin 5 revert (Holesky v1): `AccessControlUnauthorizedAccount`,
/// `EnforcedPause`, `ExpectedPause`, `ReentrancyGuardReentrantCall`. Written for the devnet's
/// v1.0.2-shaped contracts; storage-based so that it works behind a proxy. Roles and pausing are
/// also the hooks the LAT's shared bases call (Hooks.sol).
abstract contract Oz5Roles is AccessHooks {
    bytes32 public constant DEFAULT_ADMIN_ROLE = 0x00;

    mapping(bytes32 role => mapping(address account => bool)) private _members;

    event RoleGranted(bytes32 indexed role, address indexed account, address indexed sender);
    event RoleRevoked(bytes32 indexed role, address indexed account, address indexed sender);

    error AccessControlUnauthorizedAccount(address account, bytes32 neededRole);

    modifier onlyRole(bytes32 role) {
        _checkRole(role);
        _;
    }

    function hasRole(bytes32 role, address account) public view returns (bool) {
        return _members[role][account];
    }

    function grantRole(bytes32 role, address account) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _grantRole(role, account);
    }

    function revokeRole(bytes32 role, address account) external onlyRole(DEFAULT_ADMIN_ROLE) {
        if (_members[role][account]) {
            _members[role][account] = false;
            emit RoleRevoked(role, account, msg.sender);
        }
    }

    function _checkRole(bytes32 role) internal view override {
        if (!_members[role][msg.sender]) revert AccessControlUnauthorizedAccount(msg.sender, role);
    }

    function _grantRole(bytes32 role, address account) internal override {
        if (!_members[role][account]) {
            _members[role][account] = true;
            emit RoleGranted(role, account, msg.sender);
        }
    }
}

abstract contract Oz5Pausable is PauseHooks {
    bool private _paused;

    event Paused(address account);
    event Unpaused(address account);

    error EnforcedPause();
    error ExpectedPause();

    modifier whenNotPaused() {
        _requireNotPaused();
        _;
    }

    function paused() public view returns (bool) {
        return _paused;
    }

    function _requireNotPaused() internal view override {
        if (_paused) revert EnforcedPause();
    }

    function _pause() internal override {
        _requireNotPaused();
        _paused = true;
        emit Paused(msg.sender);
    }

    function _unpause() internal override {
        if (!_paused) revert ExpectedPause();
        _paused = false;
        emit Unpaused(msg.sender);
    }
}

abstract contract Oz5ReentrancyGuard {
    bool private _entered;

    error ReentrancyGuardReentrantCall();

    modifier nonReentrant() {
        if (_entered) revert ReentrancyGuardReentrantCall();
        _entered = true;
        _;
        _entered = false;
    }
}
