// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20, Owned} from "./Base.sol";
import {Strategy} from "./Strategy.sol";
import {DelegationManager} from "./DelegationManager.sol";

/// @notice EigenLayer-style StrategyManager: takes a staker's tokens into a strategy and records
/// the staker's deposit shares; tells the DelegationManager so the operator's shares follow.
contract StrategyManager is Owned {
    DelegationManager public delegation;
    mapping(address staker => mapping(address strategy => uint256)) public stakerDepositShares;
    mapping(address staker => address[]) private _stakerStrategyList;

    event Deposit(address staker, address token, address strategy, uint256 shares);
    event DelegationManagerSet(address delegationManager);

    error DelegationManagerAlreadySet();
    error TransferFailed();
    error SharesAmountZero();

    constructor() {
        _transferOwnership(msg.sender);
    }

    function setDelegationManager(DelegationManager delegationManager) external onlyOwner {
        if (address(delegation) != address(0)) revert DelegationManagerAlreadySet();
        delegation = delegationManager;
        emit DelegationManagerSet(address(delegationManager));
    }

    function depositIntoStrategy(Strategy strategy, IERC20 token, uint256 amount) external returns (uint256 shares) {
        if (!token.transferFrom(msg.sender, address(strategy), amount)) revert TransferFailed();
        shares = strategy.deposit(token, amount);
        if (shares == 0) revert SharesAmountZero();
        if (stakerDepositShares[msg.sender][address(strategy)] == 0) {
            _stakerStrategyList[msg.sender].push(address(strategy));
        }
        stakerDepositShares[msg.sender][address(strategy)] += shares;
        delegation.increaseDelegatedShares(msg.sender, address(strategy), shares);
        emit Deposit(msg.sender, address(token), address(strategy), shares);
    }

    function getStakerStrategyList(address staker) external view returns (address[] memory) {
        return _stakerStrategyList[staker];
    }

    function stakerStrategyListLength(address staker) external view returns (uint256) {
        return _stakerStrategyList[staker].length;
    }
}
