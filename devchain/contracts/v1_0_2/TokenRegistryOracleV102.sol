// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Initializable} from "../Base.sol";
import {Oz5Roles} from "./Oz5.sol";
import {LiquidTokenManagerV102} from "./LiquidTokenManagerV102.sol";

/// @notice The price oracle of a v1.0.2-era deployment: it pushes rates into the manager and has
/// no staleness (no `arePricesStale()`, no `lastPriceUpdate()`), so deposits never refresh prices.
contract TokenRegistryOracleV102 is Initializable, Oz5Roles {
    struct Init {
        address initialOwner;
        address priceUpdater;
        LiquidTokenManagerV102 liquidTokenManager;
    }

    bytes32 public constant RATE_UPDATER_ROLE = keccak256("RATE_UPDATER_ROLE");

    LiquidTokenManagerV102 public liquidTokenManager;

    event TokenRateUpdated(address indexed token, uint256 oldRate, uint256 newRate, address indexed updater);

    error ArrayLengthMismatch();

    function initialize(Init memory init) external initializer {
        _grantRole(DEFAULT_ADMIN_ROLE, init.initialOwner);
        _grantRole(RATE_UPDATER_ROLE, init.priceUpdater);
        liquidTokenManager = init.liquidTokenManager;
    }

    function updateRate(address token, uint256 newRate) external onlyRole(RATE_UPDATER_ROLE) {
        _setRate(token, newRate);
    }

    function batchUpdateRates(address[] calldata tokens, uint256[] calldata newRates)
        external
        onlyRole(RATE_UPDATER_ROLE)
    {
        if (tokens.length != newRates.length) revert ArrayLengthMismatch();
        for (uint256 i = 0; i < tokens.length; i++) {
            _setRate(tokens[i], newRates[i]);
        }
    }

    function getRate(address token) external view returns (uint256) {
        return liquidTokenManager.getTokenInfo(token).pricePerUnit;
    }

    function _setRate(address token, uint256 newRate) private {
        uint256 oldRate = liquidTokenManager.getTokenInfo(token).pricePerUnit;
        liquidTokenManager.updatePrice(token, newRate);
        emit TokenRateUpdated(token, oldRate, newRate, msg.sender);
    }
}
