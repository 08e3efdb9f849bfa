// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20, Initializable} from "../Base.sol";
import {DelegationManager} from "../DelegationManager.sol";
import {LiquidTokenManagerBase} from "../LiquidTokenManagerBase.sol";
import {StakerNodeCoordinator} from "../StakerNodeCoordinator.sol";
import {Strategy} from "../Strategy.sol";
import {StrategyManager} from "../StrategyManager.sol";
import {PlainTransfers} from "../Transfers.sol";
import {Oz5ReentrancyGuard, Oz5Roles} from "./Oz5.sol";
import {LiquidTokenV102} from "./LiquidTokenV102.sol";

/// @notice The token registry and staking admin of an older deployment (upstream tags up to
/// v1.0.6 for the balance views, v1.0.2 for the rest), with OpenZeppelin 5's custom errors:
/// `getStakedAssetBalance(asset)` and `getStakedAssetBalanceNode(asset, nodeId)` (the nodes'
/// withdrawable stake, in token units) in place of `getDepositAssetBalance` and
/// `getWithdrawableAssetBalance`; no `tokenRegistryOracle()`; a token is added with its price.
/// What it shares with the current manager is in LiquidTokenManagerBase; tokens move by plain
/// calls (`TransferFailed()` on `false`) and prices convert as (a * b) / c, reverting on overflow.
/// The same StakerNodeCoordinator and StakerNode as the current deployment serve it.
contract LiquidTokenManagerV102 is Initializable, Oz5Roles, Oz5ReentrancyGuard, PlainTransfers, LiquidTokenManagerBase {
    struct Init {
        LiquidTokenV102 liquidToken;
        StrategyManager strategyManager;
        DelegationManager delegationManager;
        StakerNodeCoordinator stakerNodeCoordinator;
        address initialOwner;
        address strategyController;
        address priceUpdater;
    }

    function initialize(Init memory init) external initializer {
        if (address(init.liquidToken) == address(0) || init.initialOwner == address(0)) revert ZeroAddress();
        _initRoles(init.initialOwner, init.strategyController, init.priceUpdater);
        _initContracts(init.liquidToken, init.strategyManager, init.delegationManager, init.stakerNodeCoordinator);
    }

    function addToken(address token, uint8 decimals, uint256 initialPrice, uint256 volatilityThreshold, Strategy strategy)
        external
        onlyRole(DEFAULT_ADMIN_ROLE)
    {
        if (tokens[token].decimals != 0) revert TokenExists(token);
        if (token == address(0) || address(strategy) == address(0)) revert ZeroAddress();
        if (decimals == 0 || IERC20(token).decimals() != decimals) revert InvalidDecimals();
        if (initialPrice == 0) revert InvalidPrice();
        _checkThreshold(volatilityThreshold);
        _registerToken(token, decimals, initialPrice, volatilityThreshold, strategy);
    }

    /// @dev v1.0.2 reports the salts' length when either the signatures' or the salts' is off.
    function _checkDelegationLengths(uint256 count, uint256 operators, uint256 signatures, uint256 salts)
        internal
        pure
        override
    {
        if (operators != count) revert LengthMismatch(operators, count);
        if (signatures != count || salts != count) revert LengthMismatch(salts, count);
    }

    function stakeAssetsToNode(uint256 nodeId, address[] calldata assets, uint256[] calldata amounts)
        external
        onlyRole(STRATEGY_CONTROLLER_ROLE)
        nonReentrant
    {
        _stake(nodeId, assets, amounts);
    }

    /// @notice The nodes' withdrawable stake of the token, in token units.
    function getStakedAssetBalance(address asset) external view returns (uint256 total) {
        return _withdrawableBalance(asset);
    }

    function getStakedAssetBalanceNode(address asset, uint256 nodeId) external view returns (uint256) {
        return _withdrawableBalanceNode(asset, nodeId);
    }

    /// @dev Plain arithmetic: a * b past 2**256 reverts (Panic 0x11).
    function _mulDiv(uint256 a, uint256 b, uint256 c) internal pure override returns (uint256) {
        return (a * b) / c;
    }
}
