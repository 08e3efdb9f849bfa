// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20, Owned} from "./Base.sol";
import {StrategyManager} from "./StrategyManager.sol";

/// @notice An EigenLayer-style strategy for one token. Shares are not 1:1 with the underlying:
/// one share is worth `exchangeRate` / 1e18 tokens, a rate the owner raises to model yield.
contract Strategy is Owned {
    IERC20 public immutable underlyingToken;
    StrategyManager public immutable strategyManager;
    uint256 public totalShares;
    /// Underlying token units per share, 1e18-scaled.
    uint256 public exchangeRate = 1e18;

    event ExchangeRateUpdated(uint256 oldRate, uint256 newRate);

    error OnlyStrategyManager(address caller);
    error OnlyUnderlyingToken(address token);
    error InvalidExchangeRate();

    constructor(IERC20 token, StrategyManager manager, uint256 initialRate) {
        underlyingToken = token;
        strategyManager = manager;
        _transferOwnership(msg.sender);
        _setExchangeRate(initialRate);
    }

    /// @notice Called by the StrategyManager after it moved `amount` of `token` here.
    function deposit(IERC20 token, uint256 amount) external returns (uint256 newShares) {
        if (msg.sender != address(strategyManager)) revert OnlyStrategyManager(msg.sender);
        if (token != underlyingToken) revert OnlyUnderlyingToken(address(token));
        newShares = underlyingToSharesView(amount);
        totalShares += newShares;
    }

    function sharesToUnderlyingView(uint256 amountShares) public view returns (uint256) {
        return (amountShares * exchangeRate) / 1e18;
    }

    function underlyingToSharesView(uint256 amountUnderlying) public view returns (uint256) {
        return (amountUnderlying * 1e18) / exchangeRate;
    }

    function shares(address user) public view returns (uint256) {
        return strategyManager.stakerDepositShares(user, address(this));
    }

    function userUnderlyingView(address user) external view returns (uint256) {
        return sharesToUnderlyingView(shares(user));
    }

    function setExchangeRate(uint256 newRate) external onlyOwner {
        _setExchangeRate(newRate);
    }

    function _setExchangeRate(uint256 newRate) private {
        if (newRate == 0) revert InvalidExchangeRate();
        emit ExchangeRateUpdated(exchangeRate, newRate);
        exchangeRate = newRate;
    }
}
