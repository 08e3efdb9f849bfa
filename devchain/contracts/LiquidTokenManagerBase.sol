// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {removeAddress} from "./Base.sol";
import {AccessHooks, TransferHooks} from "./Hooks.sol";
import {DelegationManager} from "./DelegationManager.sol";
import {LiquidTokenBase} from "./LiquidTokenBase.sol";
import {StakerNode} from "./StakerNode.sol";
import {StakerNodeCoordinator} from "./StakerNodeCoordinator.sol";
import {Strategy} from "./Strategy.sol";
import {StrategyManager} from "./StrategyManager.sol";

/// @notice What the devnet's two LAT managers share, Mainnet v1's LiquidTokenManager and the older
/// LiquidTokenManagerV102: the token registry (decimals, price in the unit of account, 1e18-scaled,
/// volatility threshold and EigenLayer strategy per supported token), prices and their volatility
/// check, delegating nodes and staking through them, and the nodes' withdrawable stake (net of
/// slashing, in token units). Tokens are addresses here; Mainnet v1 types them IERC20, the same ABI.
/// Roles: DEFAULT_ADMIN_ROLE adds and removes tokens, STRATEGY_CONTROLLER_ROLE delegates nodes
/// and stakes, PRICE_UPDATER_ROLE (the oracle) sets prices.
///
/// A variant brings its foundations (access control and token transfers: see Hooks.sol), its
/// `initialize` and `addToken`, its `stakeAssetsToNode` (which carries its own reentrancy guard
/// and calls `_stake`), its names for the stake views, and the hooks below where it differs.
abstract contract LiquidTokenManagerBase is AccessHooks, TransferHooks {
    bytes32 public constant STRATEGY_CONTROLLER_ROLE = keccak256("STRATEGY_CONTROLLER_ROLE");
    bytes32 public constant PRICE_UPDATER_ROLE = keccak256("PRICE_UPDATER_ROLE");

    struct TokenInfo {
        uint256 decimals;
        uint256 pricePerUnit;
        uint256 volatilityThreshold;
    }

    StrategyManager public strategyManager;
    DelegationManager public delegationManager;
    LiquidTokenBase public liquidToken;
    StakerNodeCoordinator public stakerNodeCoordinator;
    mapping(address => TokenInfo) public tokens;
    mapping(address => Strategy) public tokenStrategies;
    address[] public supportedTokens;

    event TokenAdded(
        address indexed token,
        uint256 decimals,
        uint256 initialPrice,
        uint256 volatilityThreshold,
        address indexed strategy,
        address indexed setter
    );
    event TokenPriceUpdated(address indexed token, uint256 oldPrice, uint256 newPrice, address indexed updater);
    event VolatilityThresholdUpdated(
        address indexed asset, uint256 oldThreshold, uint256 newThreshold, address indexed updatedBy
    );
    event AssetsStakedToNode(uint256 indexed nodeId, address[] assets, uint256[] amounts, address indexed staker);
    event AssetsDepositedToEigenlayer(
        address[] assets, uint256[] amounts, Strategy[] strategies, address indexed depositor
    );
    event NodeDelegated(uint256 nodeId, address indexed operator);
    event NodeUndelegated(uint256 nodeId, address indexed operator);
    event TokenRemoved(address indexed token, address indexed remover);

    error ZeroAddress();
    error InvalidStakingAmount(uint256 amount);
    error TokenExists(address asset);
    error TokenNotSupported(address token);
    error TokenInUse(address token);
    error StrategyNotFound(address asset);
    error LengthMismatch(uint256 length1, uint256 length2);
    error InvalidDecimals();
    error InvalidPrice();
    error InvalidThreshold();
    error VolatilityThresholdHit(address token, uint256 changeRatio);

    /// @dev `initialize`, after the variant's own checks: the roles' first holders.
    function _initRoles(address initialOwner, address strategyController, address priceUpdater) internal {
        _grantRole(ADMIN_ROLE, initialOwner);
        _grantRole(STRATEGY_CONTROLLER_ROLE, strategyController);
        _grantRole(PRICE_UPDATER_ROLE, priceUpdater);
    }

    /// @dev `initialize`, after the variant's own checks: the contracts the manager calls.
    function _initContracts(
        LiquidTokenBase liquidToken_,
        StrategyManager strategyManager_,
        DelegationManager delegationManager_,
        StakerNodeCoordinator stakerNodeCoordinator_
    ) internal {
        liquidToken = liquidToken_;
        strategyManager = strategyManager_;
        delegationManager = delegationManager_;
        stakerNodeCoordinator = stakerNodeCoordinator_;
    }

    // ----- what a variant supplies -----

    /// @dev a * b / c, rounded down.
    function _mulDiv(uint256 a, uint256 b, uint256 c) internal pure virtual returns (uint256);

    /// @dev Reverts with LengthMismatch unless `delegateNodes`' arrays all have `count` entries.
    function _checkDelegationLengths(uint256 count, uint256 operators, uint256 signatures, uint256 salts)
        internal
        pure
        virtual;

    /// @dev Mainnet v1 refuses the zero address as a token before looking it up.
    function _checkTokenAddress(address token) internal pure virtual {}

    /// @dev Mainnet v1 emits VolatilityCheckFailed before reverting with VolatilityThresholdHit.
    function _volatilityCheckFailed(address token, uint256 oldPrice, uint256 newPrice, uint256 changeRatio)
        internal
        virtual
    {}

    /// @dev What else `removeToken` forgets of the token, before its registry entry goes.
    function _forgetToken(address token) internal virtual {}

    // ----- the token registry -----

    /// @dev The end of a variant's `addToken`, after its checks.
    function _registerToken(
        address token,
        uint8 decimals,
        uint256 price,
        uint256 volatilityThreshold,
        Strategy strategy
    ) internal {
        tokens[token] = TokenInfo(decimals, price, volatilityThreshold);
        tokenStrategies[token] = strategy;
        supportedTokens.push(token);
        emit TokenAdded(token, decimals, price, volatilityThreshold, address(strategy), msg.sender);
    }

    /// @notice Only a token the LAT holds none of (unstaked, queued or staked) can be removed.
    function removeToken(address token) external restrictedTo(ADMIN_ROLE) {
        if (tokens[token].decimals == 0) revert TokenNotSupported(token);
        address[] memory one = new address[](1);
        one[0] = token;
        if (liquidToken.balanceAssets(one)[0] > 0 || liquidToken.balanceQueuedAssets(one)[0] > 0) {
            revert TokenInUse(token);
        }
        if (_withdrawableBalance(token) > 0) revert TokenInUse(token);
        removeAddress(supportedTokens, token);
        _forgetToken(token);
        delete tokenStrategies[token];
        delete tokens[token];
        emit TokenRemoved(token, msg.sender);
    }

    /// @notice Sets a token's price; refused beyond its volatility threshold.
    function updatePrice(address token, uint256 newPrice) external restrictedTo(PRICE_UPDATER_ROLE) {
        TokenInfo storage info = tokens[token];
        if (info.decimals == 0) revert TokenNotSupported(token);
        uint256 oldPrice = info.pricePerUnit;
        if (newPrice == 0 || oldPrice == 0) revert InvalidPrice();
        if (info.volatilityThreshold != 0) {
            uint256 diff = newPrice > oldPrice ? newPrice - oldPrice : oldPrice - newPrice;
            uint256 changeRatio = (diff * 1e18) / oldPrice;
            if (changeRatio > info.volatilityThreshold) {
                _volatilityCheckFailed(token, oldPrice, newPrice, changeRatio);
                revert VolatilityThresholdHit(token, changeRatio);
            }
        }
        info.pricePerUnit = newPrice;
        emit TokenPriceUpdated(token, oldPrice, newPrice, msg.sender);
    }

    function setVolatilityThreshold(address asset, uint256 newThreshold) external restrictedTo(ADMIN_ROLE) {
        _checkTokenAddress(asset);
        if (tokens[asset].decimals == 0) revert TokenNotSupported(asset);
        _checkThreshold(newThreshold);
        emit VolatilityThresholdUpdated(asset, tokens[asset].volatilityThreshold, newThreshold, msg.sender);
        tokens[asset].volatilityThreshold = newThreshold;
    }

    /// @dev A threshold is 0 (no check) or between 1e16 and 1e18.
    function _checkThreshold(uint256 threshold) internal pure {
        if (threshold != 0 && (threshold < 1e16 || threshold > 1e18)) revert InvalidThreshold();
    }

    // ----- staking -----

    function delegateNodes(
        uint256[] calldata nodeIds,
        address[] calldata operators,
        DelegationManager.SignatureWithExpiry[] calldata approverSignatureAndExpiries,
        bytes32[] calldata approverSalts
    ) external restrictedTo(STRATEGY_CONTROLLER_ROLE) {
        _checkDelegationLengths(nodeIds.length, operators.length, approverSignatureAndExpiries.length, approverSalts.length);
        for (uint256 i = 0; i < nodeIds.length; i++) {
            stakerNodeCoordinator.getNodeById(nodeIds[i]).delegate(
                operators[i], approverSignatureAndExpiries[i], approverSalts[i]
            );
            emit NodeDelegated(nodeIds[i], operators[i]);
        }
    }

    /// @notice Devnet: undelegates nodes; each keeps its strategy shares.
    function undelegateNodes(uint256[] calldata nodeIds) external restrictedTo(STRATEGY_CONTROLLER_ROLE) {
        for (uint256 i = 0; i < nodeIds.length; i++) {
            address operator = stakerNodeCoordinator.getNodeById(nodeIds[i]).undelegate();
            emit NodeUndelegated(nodeIds[i], operator);
        }
    }

    /// @dev The LAT hands its unstaked assets to this contract, which passes them to the node,
    /// which deposits each into its token's strategy.
    function _stake(uint256 nodeId, address[] memory assets, uint256[] memory amounts) internal {
        if (assets.length != amounts.length) revert LengthMismatch(assets.length, amounts.length);
        StakerNode node = stakerNodeCoordinator.getNodeById(nodeId);
        Strategy[] memory strategies = new Strategy[](assets.length);
        for (uint256 i = 0; i < assets.length; i++) {
            if (amounts[i] == 0) revert InvalidStakingAmount(amounts[i]);
            strategies[i] = tokenStrategies[assets[i]];
            if (address(strategies[i]) == address(0)) revert StrategyNotFound(assets[i]);
        }
        liquidToken.transferAssets(assets, amounts);
        for (uint256 i = 0; i < assets.length; i++) {
            _sendAsset(assets[i], address(node), amounts[i]);
        }
        emit AssetsStakedToNode(nodeId, assets, amounts, msg.sender);
        StakerNodeDeposit(address(node)).depositAssets(assets, amounts, strategies);
        emit AssetsDepositedToEigenlayer(assets, amounts, strategies, address(node));
    }

    /// @notice Devnet: sets unstaked assets aside as queued for withdrawal (balanceQueuedAssets).
    function queueAssets(address asset, uint256 amount) external restrictedTo(ADMIN_ROLE) {
        if (tokens[asset].decimals == 0) revert TokenNotSupported(asset);
        liquidToken.queueAssets(asset, amount);
    }

    // ----- views -----

    function getSupportedTokens() external view returns (address[] memory) {
        return supportedTokens;
    }

    function getTokenInfo(address token) external view returns (TokenInfo memory) {
        _checkTokenAddress(token);
        if (tokens[token].decimals == 0) revert TokenNotSupported(token);
        return tokens[token];
    }

    function getTokenStrategy(address asset) external view returns (Strategy) {
        _checkTokenAddress(asset);
        return _strategyOf(asset);
    }

    function tokenIsSupported(address token) external view returns (bool) {
        return tokens[token].decimals != 0;
    }

    /// @notice amount (token units) * pricePerUnit / 10**decimals: 1e18-scaled unit of account.
    function convertToUnitOfAccount(address token, uint256 amount) external view returns (uint256) {
        TokenInfo storage info = tokens[token];
        if (info.decimals == 0) revert TokenNotSupported(token);
        return _mulDiv(amount, info.pricePerUnit, 10 ** info.decimals);
    }

    function convertFromUnitOfAccount(address token, uint256 amount) external view returns (uint256) {
        TokenInfo storage info = tokens[token];
        if (info.decimals == 0) revert TokenNotSupported(token);
        return _mulDiv(amount, 10 ** info.decimals, info.pricePerUnit);
    }

    // ----- internals -----

    function _strategyOf(address asset) internal view returns (Strategy strategy) {
        strategy = tokenStrategies[asset];
        if (address(strategy) == address(0)) revert StrategyNotFound(asset);
    }

    /// @dev The nodes' withdrawable stake of the token (net of slashing), in token units.
    function _withdrawableBalance(address asset) internal view returns (uint256 total) {
        Strategy strategy = _strategyOf(asset);
        StakerNode[] memory nodes = stakerNodeCoordinator.getAllNodes();
        for (uint256 i = 0; i < nodes.length; i++) {
            total += _withdrawableStake(strategy, nodes[i]);
        }
    }

    /// @dev One node's withdrawable stake of the token, in token units.
    function _withdrawableBalanceNode(address asset, uint256 nodeId) internal view returns (uint256) {
        Strategy strategy = _strategyOf(asset);
        return _withdrawableStake(strategy, stakerNodeCoordinator.getNodeById(nodeId));
    }

    function _withdrawableStake(Strategy strategy, StakerNode node) private view returns (uint256) {
        address[] memory strategies = new address[](1);
        strategies[0] = address(strategy);
        (uint256[] memory withdrawable,) = delegationManager.getWithdrawableShares(address(node), strategies);
        return withdrawable[0] == 0 ? 0 : strategy.sharesToUnderlyingView(withdrawable[0]);
    }
}

/// @dev The staker node's deposit with assets as addresses (StakerNode types them IERC20: the same
/// selector).
interface StakerNodeDeposit {
    function depositAssets(address[] calldata assets, uint256[] calldata amounts, Strategy[] calldata strategies)
        external;
}
