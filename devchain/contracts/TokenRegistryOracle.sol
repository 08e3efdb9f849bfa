// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Initializable, Owned} from "./Base.sol";
import {LiquidTokenManager} from "./LiquidTokenManager.sol";

/// @notice A LAT's price oracle. Rates live in the LiquidTokenManager (pricePerUnit); the oracle
/// pushes new ones there and records when prices were last updated. Prices are stale once
/// `priceUpdateInterval` seconds have passed since the last update.
contract TokenRegistryOracle is Initializable, Owned {
    LiquidTokenManager public liquidTokenManager;
    uint256 public lastPriceUpdate;
    uint256 public priceUpdateInterval;

    event PriceUpdateIntervalSet(uint256 oldInterval, uint256 newInterval);
    event PricesUpdated(uint256 timestamp);

    error NotLiquidTokenManager(address caller);

    function initialize(address owner_, LiquidTokenManager manager, uint256 priceUpdateInterval_) external initializer {
        _transferOwnership(owner_);
        liquidTokenManager = manager;
        priceUpdateInterval = priceUpdateInterval_;
        lastPriceUpdate = block.timestamp;
    }

    function getRate(address token) external view returns (uint256) {
        (, uint256 pricePerUnit,) = liquidTokenManager.getTokenInfo(token);
        return pricePerUnit;
    }

    function arePricesStale() external view returns (bool) {
        return block.timestamp > lastPriceUpdate + priceUpdateInterval;
    }

    function updateRate(address token, uint256 newRate) external onlyOwner {
        liquidTokenManager.updatePrice(token, newRate);
        _stamp();
    }

    /// @notice Called by the manager when its owner sets a price directly.
    function recordPriceUpdate() external {
        if (msg.sender != address(liquidTokenManager)) revert NotLiquidTokenManager(msg.sender);
        _stamp();
    }

    function setPriceUpdateInterval(uint256 newInterval) external onlyOwner {
        emit PriceUpdateIntervalSet(priceUpdateInterval, newInterval);
        priceUpdateInterval = newInterval;
    }

    function _stamp() private {
        lastPriceUpdate = block.timestamp;
        emit PricesUpdated(block.timestamp);
    }
}
