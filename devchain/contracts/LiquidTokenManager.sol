// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Metadata} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Metadata.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {Math} from "@openzeppelin/contracts/utils/math/Math.sol";
import {AccessControlUpgradeable} from "@openzeppelin/contracts-upgradeable/access/AccessControlUpgradeable.sol";
import {ReentrancyGuardUpgradeable} from "@openzeppelin/contracts-upgradeable/security/ReentrancyGuardUpgradeable.sol";

import {DelegationManager} from "./DelegationManager.sol";
import {LiquidToken} from "./LiquidToken.sol";
import {StakerNode} from "./StakerNode.sol";
import {StakerNodeCoordinator} from "./StakerNodeCoordinator.sol";
import {Strategy} from "./Strategy.sol";
import {StrategyManager} from "./StrategyManager.sol";
import {TokenRegistryOracle} from "./TokenRegistryOracle.sol";

/// @notice A LAT's token registry and staking admin as Mainnet v1 deploys it (OpenZeppelin 4.9,
/// behind a TransparentUpgradeableProxy): supported tokens with their decimals, price in the unit
/// of account (1e18-scaled), volatility threshold and EigenLayer strategy; each token's price
/// source is configured in the TokenRegistryOracle when the token is added, and its first price
/// read from there. Roles: DEFAULT_ADMIN_ROLE adds and removes tokens, STRATEGY_CONTROLLER_ROLE
/// delegates nodes and stakes, PRICE_UPDATER_ROLE (the oracle) sets prices.
///
/// Balances per token: getDepositAssetBalance sums the nodes' staked deposits at deposit-share
/// value, getWithdrawableAssetBalance the same net of slashing (token units, nodes only).
///
/// Devnet-only additions (not on Mainnet v1): `undelegateNodes` (upstream's is out of scope for
/// v1; here the node keeps its shares) and `queueAssets`.
contract LiquidTokenManager is AccessControlUpgradeable, ReentrancyGuardUpgradeable {
    using SafeERC20 for IERC20;
    using Math for uint256;

    struct Init {
        LiquidToken liquidToken;
        StrategyManager strategyManager;
        DelegationManager delegationManager;
        StakerNodeCoordinator stakerNodeCoordinator;
        TokenRegistryOracle tokenRegistryOracle;
        address initialOwner;
        address strategyController;
        address priceUpdater;
    }

    struct TokenInfo {
        uint256 decimals;
        uint256 pricePerUnit;
        uint256 volatilityThreshold;
    }

    struct NodeAllocation {
        uint256 nodeId;
        IERC20[] assets;
        uint256[] amounts;
    }

    bytes32 public constant STRATEGY_CONTROLLER_ROLE = keccak256("STRATEGY_CONTROLLER_ROLE");
    bytes32 public constant PRICE_UPDATER_ROLE = keccak256("PRICE_UPDATER_ROLE");
    uint256 public constant PRICE_DECIMALS = 18;

    StrategyManager public strategyManager;
    DelegationManager public delegationManager;
    LiquidToken public liquidToken;
    StakerNodeCoordinator public stakerNodeCoordinator;
    TokenRegistryOracle public tokenRegistryOracle;
    mapping(IERC20 => TokenInfo) public tokens;
    mapping(IERC20 => Strategy) public tokenStrategies;
    mapping(Strategy => IERC20) public strategyTokens;
    IERC20[] public supportedTokens;

    event TokenAdded(
        IERC20 indexed token,
        uint256 decimals,
        uint256 initialPrice,
        uint256 volatilityThreshold,
        address indexed strategy,
        address indexed setter
    );
    event TokenPriceUpdated(IERC20 indexed token, uint256 oldPrice, uint256 newPrice, address indexed updater);
    event VolatilityThresholdUpdated(
        IERC20 indexed asset, uint256 oldThreshold, uint256 newThreshold, address indexed updatedBy
    );
    event VolatilityCheckFailed(IERC20 indexed token, uint256 oldPrice, uint256 newPrice, uint256 changeRatio);
    event AssetsStakedToNode(uint256 indexed nodeId, IERC20[] assets, uint256[] amounts, address indexed staker);
    event AssetsDepositedToEigenlayer(
        IERC20[] assets, uint256[] amounts, Strategy[] strategies, address indexed depositor
    );
    event NodeDelegated(uint256 nodeId, address indexed operator);
    event NodeUndelegated(uint256 nodeId, address indexed operator);
    event TokenRemoved(IERC20 indexed token, address indexed remover);

    error ZeroAddress();
    error InvalidStakingAmount(uint256 amount);
    error TokenExists(address asset);
    error TokenNotSupported(IERC20 token);
    error TokenInUse(IERC20 token);
    error InvalidPriceSource();
    error TokenPriceFetchFailed();
    error StrategyNotFound(address asset);
    error TokenForStrategyNotFound(address strategy);
    error LengthMismatch(uint256 length1, uint256 length2);
    error InvalidNodeId(uint256 nodeId);
    error InvalidDecimals();
    error NotAContract();
    error StrategyAlreadyAssigned(address strategy, address existingToken);
    error InvalidPrice();
    error InvalidThreshold();
    error VolatilityThresholdHit(IERC20 token, uint256 changeRatio);

    constructor() {
        _disableInitializers();
    }

    function initialize(Init memory init) public initializer {
        __AccessControl_init();
        __ReentrancyGuard_init();
        if (
            address(init.strategyManager) == address(0) || address(init.delegationManager) == address(0)
                || address(init.liquidToken) == address(0) || init.initialOwner == address(0)
                || init.priceUpdater == address(0) || address(init.tokenRegistryOracle) == address(0)
        ) revert ZeroAddress();
        _grantRole(DEFAULT_ADMIN_ROLE, init.initialOwner);
        _grantRole(STRATEGY_CONTROLLER_ROLE, init.strategyController);
        _grantRole(PRICE_UPDATER_ROLE, init.priceUpdater);
        liquidToken = init.liquidToken;
        strategyManager = init.strategyManager;
        delegationManager = init.delegationManager;
        stakerNodeCoordinator = init.stakerNodeCoordinator;
        tokenRegistryOracle = init.tokenRegistryOracle;
    }

    // ----- the token registry -----

    /// @notice Adds a token. Its price source is configured in the oracle (primaryType 1
    /// Chainlink-style feed, 2 Curve pool, 3 a protocol's rate function) and its first price read
    /// from it; primaryType 0 with no source is a native token, priced 1e18 and not refreshed.
    function addToken(
        IERC20 token,
        uint8 decimals,
        uint256 volatilityThreshold,
        Strategy strategy,
        uint8 primaryType,
        address primarySource,
        uint8 needsArg,
        address fallbackSource,
        bytes4 fallbackFn
    ) external onlyRole(DEFAULT_ADMIN_ROLE) {
        if (address(tokenStrategies[token]) != address(0)) revert TokenExists(address(token));
        if (address(token) == address(0) || address(strategy) == address(0)) revert ZeroAddress();
        if (decimals == 0) revert InvalidDecimals();
        _checkThreshold(volatilityThreshold);
        if (address(strategyTokens[strategy]) != address(0)) {
            revert StrategyAlreadyAssigned(address(strategy), address(strategyTokens[strategy]));
        }
        bool native = primaryType == 0 && primarySource == address(0);
        if (!native) {
            if (primaryType < 1 || primaryType > 3 || primarySource == address(0)) revert InvalidPriceSource();
            tokenRegistryOracle.configureToken(
                address(token), primaryType, primarySource, needsArg, fallbackSource, fallbackFn
            );
        }
        try IERC20Metadata(address(token)).decimals() returns (uint8 actual) {
            if (actual != decimals) revert InvalidDecimals();
        } catch {}

        uint256 price = 1e18;
        if (!native) {
            bool ok;
            (price, ok) = tokenRegistryOracle._getTokenPrice_getter(address(token));
            if (!ok || price == 0) revert TokenPriceFetchFailed();
        }
        tokens[token] = TokenInfo(decimals, price, volatilityThreshold);
        tokenStrategies[token] = strategy;
        strategyTokens[strategy] = token;
        supportedTokens.push(token);
        emit TokenAdded(token, decimals, price, volatilityThreshold, address(strategy), msg.sender);
    }

    /// @notice Only a token the LAT holds none of (unstaked, queued or staked) can be removed.
    function removeToken(IERC20 token) external onlyRole(DEFAULT_ADMIN_ROLE) {
        if (tokens[token].decimals == 0) revert TokenNotSupported(token);
        IERC20[] memory one = new IERC20[](1);
        one[0] = token;
        if (liquidToken.balanceAssets(one)[0] > 0 || liquidToken.balanceQueuedAssets(one)[0] > 0) {
            revert TokenInUse(token);
        }
        StakerNode[] memory nodes = stakerNodeCoordinator.getAllNodes();
        for (uint256 i = 0; i < nodes.length; i++) {
            if (_withdrawableNodeBalance(token, nodes[i]) > 0) revert TokenInUse(token);
        }
        uint256 last = supportedTokens.length - 1;
        for (uint256 i = 0; i <= last; i++) {
            if (supportedTokens[i] == token) {
                supportedTokens[i] = supportedTokens[last];
                supportedTokens.pop();
                break;
            }
        }
        tokenRegistryOracle.removeToken(address(token));
        delete strategyTokens[tokenStrategies[token]];
        delete tokenStrategies[token];
        delete tokens[token];
        emit TokenRemoved(token, msg.sender);
    }

    /// @notice Sets a token's price; refused beyond its volatility threshold.
    function updatePrice(IERC20 token, uint256 newPrice) external onlyRole(PRICE_UPDATER_ROLE) {
        TokenInfo storage info = tokens[token];
        if (info.decimals == 0) revert TokenNotSupported(token);
        uint256 oldPrice = info.pricePerUnit;
        if (newPrice == 0 || oldPrice == 0) revert InvalidPrice();
        if (info.volatilityThreshold != 0) {
            uint256 diff = newPrice > oldPrice ? newPrice - oldPrice : oldPrice - newPrice;
            uint256 changeRatio = (diff * 1e18) / oldPrice;
            if (changeRatio > info.volatilityThreshold) {
                emit VolatilityCheckFailed(token, oldPrice, newPrice, changeRatio);
                revert VolatilityThresholdHit(token, changeRatio);
            }
        }
        info.pricePerUnit = newPrice;
        emit TokenPriceUpdated(token, oldPrice, newPrice, msg.sender);
    }

    function setVolatilityThreshold(IERC20 asset, uint256 newThreshold) external onlyRole(DEFAULT_ADMIN_ROLE) {
        if (address(asset) == address(0)) revert ZeroAddress();
        if (tokens[asset].decimals == 0) revert TokenNotSupported(asset);
        _checkThreshold(newThreshold);
        emit VolatilityThresholdUpdated(asset, tokens[asset].volatilityThreshold, newThreshold, msg.sender);
        tokens[asset].volatilityThreshold = newThreshold;
    }

    function _checkThreshold(uint256 threshold) private pure {
        if (threshold != 0 && (threshold < 1e16 || threshold > 1e18)) revert InvalidThreshold();
    }

    // ----- staking -----

    function delegateNodes(
        uint256[] calldata nodeIds,
        address[] calldata operators,
        DelegationManager.SignatureWithExpiry[] calldata approverSignatureAndExpiries,
        bytes32[] calldata approverSalts
    ) external onlyRole(STRATEGY_CONTROLLER_ROLE) {
        uint256 count = nodeIds.length;
        if (operators.length != count) revert LengthMismatch(operators.length, count);
        if (approverSignatureAndExpiries.length != count) {
            revert LengthMismatch(approverSignatureAndExpiries.length, count);
        }
        if (approverSalts.length != count) revert LengthMismatch(approverSalts.length, count);
        for (uint256 i = 0; i < count; i++) {
            stakerNodeCoordinator.getNodeById(nodeIds[i]).delegate(
                operators[i], approverSignatureAndExpiries[i], approverSalts[i]
            );
            emit NodeDelegated(nodeIds[i], operators[i]);
        }
    }

    /// @notice Devnet: undelegates nodes; each keeps its strategy shares.
    function undelegateNodes(uint256[] calldata nodeIds) external onlyRole(STRATEGY_CONTROLLER_ROLE) {
        for (uint256 i = 0; i < nodeIds.length; i++) {
            address operator = stakerNodeCoordinator.getNodeById(nodeIds[i]).undelegate();
            emit NodeUndelegated(nodeIds[i], operator);
        }
    }

    function stakeAssetsToNode(uint256 nodeId, IERC20[] memory assets, uint256[] memory amounts)
        external
        onlyRole(STRATEGY_CONTROLLER_ROLE)
        nonReentrant
    {
        _stake(nodeId, assets, amounts);
    }

    function stakeAssetsToNodes(NodeAllocation[] calldata allocations)
        external
        onlyRole(STRATEGY_CONTROLLER_ROLE)
        nonReentrant
    {
        for (uint256 i = 0; i < allocations.length; i++) {
            _stake(allocations[i].nodeId, allocations[i].assets, allocations[i].amounts);
        }
    }

    /// @dev The LAT hands its unstaked assets to this contract, which passes them to the node,
    /// which deposits each into its token's strategy.
    function _stake(uint256 nodeId, IERC20[] memory assets, uint256[] memory amounts) private {
        if (assets.length != amounts.length) revert LengthMismatch(assets.length, amounts.length);
        StakerNode node = stakerNodeCoordinator.getNodeById(nodeId);
        Strategy[] memory strategies = new Strategy[](assets.length);
        for (uint256 i = 0; i < assets.length; i++) {
            if (amounts[i] == 0) revert InvalidStakingAmount(amounts[i]);
            strategies[i] = tokenStrategies[assets[i]];
            if (address(strategies[i]) == address(0)) revert StrategyNotFound(address(assets[i]));
        }
        liquidToken.transferAssets(assets, amounts);
        for (uint256 i = 0; i < assets.length; i++) {
            assets[i].safeTransfer(address(node), amounts[i]);
        }
        emit AssetsStakedToNode(nodeId, assets, amounts, msg.sender);
        node.depositAssets(assets, amounts, strategies);
        emit AssetsDepositedToEigenlayer(assets, amounts, strategies, address(node));
    }

    /// @notice Devnet: sets unstaked assets aside as queued for withdrawal (balanceQueuedAssets).
    function queueAssets(IERC20 asset, uint256 amount) external onlyRole(DEFAULT_ADMIN_ROLE) {
        if (tokens[asset].decimals == 0) revert TokenNotSupported(asset);
        liquidToken.queueAssets(asset, amount);
    }

    // ----- views -----

    function getSupportedTokens() external view returns (IERC20[] memory) {
        return supportedTokens;
    }

    function getTokenInfo(IERC20 token) external view returns (TokenInfo memory) {
        if (address(token) == address(0)) revert ZeroAddress();
        if (tokens[token].decimals == 0) revert TokenNotSupported(token);
        return tokens[token];
    }

    function getTokenStrategy(IERC20 asset) external view returns (Strategy) {
        if (address(asset) == address(0)) revert ZeroAddress();
        return _strategyOf(asset);
    }

    function getStrategyToken(Strategy strategy) external view returns (IERC20) {
        if (address(strategy) == address(0)) revert ZeroAddress();
        IERC20 token = strategyTokens[strategy];
        if (address(token) == address(0)) revert TokenForStrategyNotFound(address(strategy));
        return token;
    }

    function getDepositAssetBalance(IERC20 asset) external view returns (uint256 total) {
        _strategyOf(asset);
        StakerNode[] memory nodes = stakerNodeCoordinator.getAllNodes();
        for (uint256 i = 0; i < nodes.length; i++) {
            total += _depositNodeBalance(asset, nodes[i]);
        }
    }

    function getDepositAssetBalanceNode(IERC20 asset, uint256 nodeId) external view returns (uint256) {
        _strategyOf(asset);
        return _depositNodeBalance(asset, stakerNodeCoordinator.getNodeById(nodeId));
    }

    function getWithdrawableAssetBalance(IERC20 asset) external view returns (uint256 total) {
        _strategyOf(asset);
        StakerNode[] memory nodes = stakerNodeCoordinator.getAllNodes();
        for (uint256 i = 0; i < nodes.length; i++) {
            total += _withdrawableNodeBalance(asset, nodes[i]);
        }
    }

    function getWithdrawableAssetBalanceNode(IERC20 asset, uint256 nodeId) external view returns (uint256) {
        _strategyOf(asset);
        return _withdrawableNodeBalance(asset, stakerNodeCoordinator.getNodeById(nodeId));
    }

    function tokenIsSupported(IERC20 token) external view returns (bool) {
        return tokens[token].decimals != 0;
    }

    /// @notice amount (token units) * pricePerUnit / 10**decimals: 1e18-scaled unit of account.
    function convertToUnitOfAccount(IERC20 token, uint256 amount) external view returns (uint256) {
        TokenInfo storage info = tokens[token];
        if (info.decimals == 0) revert TokenNotSupported(token);
        return amount.mulDiv(info.pricePerUnit, 10 ** info.decimals);
    }

    function convertFromUnitOfAccount(IERC20 token, uint256 amount) external view returns (uint256) {
        TokenInfo storage info = tokens[token];
        if (info.decimals == 0) revert TokenNotSupported(token);
        return amount.mulDiv(10 ** info.decimals, info.pricePerUnit);
    }

    function isStrategySupported(Strategy strategy) external view returns (bool) {
        return address(strategy) != address(0) && address(strategyTokens[strategy]) != address(0);
    }

    // ----- internals -----

    function _strategyOf(IERC20 asset) private view returns (Strategy strategy) {
        strategy = tokenStrategies[asset];
        if (address(strategy) == address(0)) revert StrategyNotFound(address(asset));
    }

    /// @dev The node's deposit shares in the token's strategy, as underlying (no slashing).
    function _depositNodeBalance(IERC20 asset, StakerNode node) private view returns (uint256) {
        return _strategyOf(asset).userUnderlyingView(address(node));
    }

    /// @dev The node's withdrawable shares (net of slashing), as underlying.
    function _withdrawableNodeBalance(IERC20 asset, StakerNode node) private view returns (uint256) {
        Strategy strategy = _strategyOf(asset);
        address[] memory strategies = new address[](1);
        strategies[0] = address(strategy);
        (uint256[] memory withdrawable,) = delegationManager.getWithdrawableShares(address(node), strategies);
        return withdrawable[0] == 0 ? 0 : strategy.sharesToUnderlyingView(withdrawable[0]);
    }
}
