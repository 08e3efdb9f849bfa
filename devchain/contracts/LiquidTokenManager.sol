// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20Metadata} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Metadata.sol";
import {Math} from "@openzeppelin/contracts/utils/math/Math.sol";
import {AccessControlUpgradeable} from "@openzeppelin/contracts-upgradeable/access/AccessControlUpgradeable.sol";
import {ReentrancyGuardUpgradeable} from "@openzeppelin/contracts-upgradeable/security/ReentrancyGuardUpgradeable.sol";

import {DelegationManager} from "./DelegationManager.sol";
import {LiquidToken} from "./LiquidToken.sol";
import {LiquidTokenManagerBase} from "./LiquidTokenManagerBase.sol";
import {StakerNode} from "./StakerNode.sol";
import {StakerNodeCoordinator} from "./StakerNodeCoordinator.sol";
import {Strategy} from "./Strategy.sol";
import {StrategyManager} from "./StrategyManager.sol";
import {AccessHooks} from "./Hooks.sol";
import {SafeTransfers} from "./Transfers.sol";
import {TokenRegistryOracle} from "./TokenRegistryOracle.sol";

/// @notice A LAT's token registry and staking admin as Mainnet v1 deploys it (OpenZeppelin 4.9,
/// behind a TransparentUpgradeableProxy); what it shares with the older variant is in
/// LiquidTokenManagerBase. Each token's price source is configured in the TokenRegistryOracle when
/// the token is added, and its first price read from there; every token has its own strategy
/// (getStrategyToken). Tokens move through SafeERC20; prices convert with full-precision mulDiv.
///
/// Balances per token: getDepositAssetBalance sums the nodes' staked deposits at deposit-share
/// value, getWithdrawableAssetBalance the same net of slashing (token units, nodes only).
///
/// Devnet-only additions (not on Mainnet v1): `undelegateNodes` (upstream's is out of scope for
/// v1; here the node keeps its shares) and `queueAssets`.
contract LiquidTokenManager is
    AccessControlUpgradeable,
    ReentrancyGuardUpgradeable,
    SafeTransfers,
    LiquidTokenManagerBase
{
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

    struct NodeAllocation {
        uint256 nodeId;
        address[] assets;
        uint256[] amounts;
    }

    uint256 public constant PRICE_DECIMALS = 18;

    TokenRegistryOracle public tokenRegistryOracle;
    mapping(Strategy => address) public strategyTokens;

    event VolatilityCheckFailed(address indexed token, uint256 oldPrice, uint256 newPrice, uint256 changeRatio);

    error InvalidPriceSource();
    error TokenPriceFetchFailed();
    error TokenForStrategyNotFound(address strategy);
    error InvalidNodeId(uint256 nodeId);
    error NotAContract();
    error StrategyAlreadyAssigned(address strategy, address existingToken);

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
        _initRoles(init.initialOwner, init.strategyController, init.priceUpdater);
        _initContracts(init.liquidToken, init.strategyManager, init.delegationManager, init.stakerNodeCoordinator);
        tokenRegistryOracle = init.tokenRegistryOracle;
    }

    // ----- the token registry -----

    /// @notice Adds a token. Its price source is configured in the oracle (primaryType 1
    /// Chainlink-style feed, 2 Curve pool, 3 a protocol's rate function) and its first price read
    /// from it; primaryType 0 with no source is a native token, priced 1e18 and not refreshed.
    function addToken(
        address token,
        uint8 decimals,
        uint256 volatilityThreshold,
        Strategy strategy,
        uint8 primaryType,
        address primarySource,
        uint8 needsArg,
        address fallbackSource,
        bytes4 fallbackFn
    ) external onlyRole(DEFAULT_ADMIN_ROLE) {
        if (address(tokenStrategies[token]) != address(0)) revert TokenExists(token);
        if (token == address(0) || address(strategy) == address(0)) revert ZeroAddress();
        if (decimals == 0) revert InvalidDecimals();
        _checkThreshold(volatilityThreshold);
        if (strategyTokens[strategy] != address(0)) {
            revert StrategyAlreadyAssigned(address(strategy), strategyTokens[strategy]);
        }
        bool native = primaryType == 0 && primarySource == address(0);
        if (!native) {
            if (primaryType < 1 || primaryType > 3 || primarySource == address(0)) revert InvalidPriceSource();
            tokenRegistryOracle.configureToken(token, primaryType, primarySource, needsArg, fallbackSource, fallbackFn);
        }
        try IERC20Metadata(token).decimals() returns (uint8 actual) {
            if (actual != decimals) revert InvalidDecimals();
        } catch {}

        uint256 price = 1e18;
        if (!native) {
            bool ok;
            (price, ok) = tokenRegistryOracle._getTokenPrice_getter(token);
            if (!ok || price == 0) revert TokenPriceFetchFailed();
        }
        strategyTokens[strategy] = token;
        _registerToken(token, decimals, price, volatilityThreshold, strategy);
    }

    /// @dev removeToken: the oracle forgets the token's price source, the strategy its token.
    function _forgetToken(address token) internal override {
        tokenRegistryOracle.removeToken(token);
        delete strategyTokens[tokenStrategies[token]];
    }

    function _checkTokenAddress(address token) internal pure override {
        if (token == address(0)) revert ZeroAddress();
    }

    function _volatilityCheckFailed(address token, uint256 oldPrice, uint256 newPrice, uint256 changeRatio)
        internal
        override
    {
        emit VolatilityCheckFailed(token, oldPrice, newPrice, changeRatio);
    }

    // ----- staking -----

    function _checkDelegationLengths(uint256 count, uint256 operators, uint256 signatures, uint256 salts)
        internal
        pure
        override
    {
        if (operators != count) revert LengthMismatch(operators, count);
        if (signatures != count) revert LengthMismatch(signatures, count);
        if (salts != count) revert LengthMismatch(salts, count);
    }

    function stakeAssetsToNode(uint256 nodeId, address[] calldata assets, uint256[] calldata amounts)
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

    // ----- views -----

    function getStrategyToken(Strategy strategy) external view returns (address) {
        if (address(strategy) == address(0)) revert ZeroAddress();
        address token = strategyTokens[strategy];
        if (token == address(0)) revert TokenForStrategyNotFound(address(strategy));
        return token;
    }

    function isStrategySupported(Strategy strategy) external view returns (bool) {
        return address(strategy) != address(0) && strategyTokens[strategy] != address(0);
    }

    function getDepositAssetBalance(address asset) external view returns (uint256 total) {
        Strategy strategy = _strategyOf(asset);
        StakerNode[] memory nodes = stakerNodeCoordinator.getAllNodes();
        for (uint256 i = 0; i < nodes.length; i++) {
            total += strategy.userUnderlyingView(address(nodes[i]));
        }
    }

    function getDepositAssetBalanceNode(address asset, uint256 nodeId) external view returns (uint256) {
        Strategy strategy = _strategyOf(asset);
        return strategy.userUnderlyingView(address(stakerNodeCoordinator.getNodeById(nodeId)));
    }

    function getWithdrawableAssetBalance(address asset) external view returns (uint256 total) {
        return _withdrawableBalance(asset);
    }

    function getWithdrawableAssetBalanceNode(address asset, uint256 nodeId) external view returns (uint256) {
        return _withdrawableBalanceNode(asset, nodeId);
    }

    // ----- LiquidTokenManagerBase's hooks, by OpenZeppelin 4.9 -----

    /// @dev Full precision: no overflow of a * b.
    function _mulDiv(uint256 a, uint256 b, uint256 c) internal pure override returns (uint256) {
        return Math.mulDiv(a, b, c);
    }

    function _checkRole(bytes32 role) internal view override(AccessControlUpgradeable, AccessHooks) {
        AccessControlUpgradeable._checkRole(role);
    }

    function _grantRole(bytes32 role, address account) internal override(AccessControlUpgradeable, AccessHooks) {
        AccessControlUpgradeable._grantRole(role, account);
    }
}
