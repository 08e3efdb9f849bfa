// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20 as IOzERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";

import {IERC20} from "./Base.sol";
import {TransferHooks} from "./Hooks.sol";

/// @notice Token transfers as Mainnet v1 makes them, through OpenZeppelin 4.9's SafeERC20: a
/// token's own revert comes through unchanged, a `false` reverts with "SafeERC20: ERC20 operation
/// did not succeed".
abstract contract SafeTransfers is TransferHooks {
    using SafeERC20 for IOzERC20;

    function _pullAsset(address asset, address from, uint256 amount) internal override {
        IOzERC20(asset).safeTransferFrom(from, address(this), amount);
    }

    function _sendAsset(address asset, address to, uint256 amount) internal override {
        IOzERC20(asset).safeTransfer(to, amount);
    }
}

/// @notice Token transfers as v1.0.2 makes them: plain calls whose `false` reverts with
/// `TransferFailed()` (a token's own revert comes through unchanged).
abstract contract PlainTransfers is TransferHooks {
    error TransferFailed();

    function _pullAsset(address asset, address from, uint256 amount) internal override {
        if (!IERC20(asset).transferFrom(from, address(this), amount)) revert TransferFailed();
    }

    function _sendAsset(address asset, address to, uint256 amount) internal override {
        if (!IERC20(asset).transfer(to, amount)) revert TransferFailed();
    }
}
