// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20, Initializable, removeAddress} from "../Base.sol";
import {Oz5ReentrancyGuard, Oz5Roles} from "./Oz5.sol";
import {DelegationManager} from "../DelegationManager.sol";
import {StakerNode} from "../StakerNode.sol";
import {StakerNodeCoordinator} from "../StakerNodeCoordinator.sol";
import {Strategy} from "../Strategy.sol";
import {StrategyManager} from "../StrategyManager.sol";
import {LiquidTokenV102} from "./LiquidTokenV102.sol";

/// @notice The token registry and staking admin of an older deployment (upstream tags up to
/// v1.0.6 for the balance views, v1.0.2 for the rest), with OpenZeppelin 5's custom errors:
/// `getStakedAssetBalance(asset)` and `getStakedAssetBalanceNode(asset, nodeId)` (the nodes'
/// withdrawable stake, in token units) in place of `getDepositAssetBalance` and
/// `getWithdrawableAssetBalance`; no `tokenRegistryOracle()`; a token is added with its price.
/// The same StakerNodeCoordinator and StakerNode as the current deployment serve it.
contract LiquidTokenManagerV102 is Initializable, Oz5Roles, Oz5ReentrancyGuard {
    struct Init {
        LiquidTokenV102 liquidToken;
        StrategyManager strategyManager;
        DelegationManager delegationManager;
        StakerNodeCoordinator stakerNodeCoordinator;
        address initialOwner;
        address strategyController;
        address priceUpdater;
    }

    struct TokenInfo {
        uint256 decimals;
        uint256 pricePerUnit;
        uint256 volatilityThreshold;
    }

    bytes32 public constant STRATEGY_CONTROLLER_ROLE = keccak256("STRATEGY_CONTROLLER_ROLE");
    bytes32 public constant PRICE_UPDATER_ROLE = keccak256("PRICE_UPDATER_ROLE");

    LiquidTokenV102 public liquidToken;
    StrategyManager public strategyManager;
    DelegationManager public delegationManager;
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
    event TokenRemoved(address indexed token, address indexed remover);
    event TokenPriceUpdated(address indexed token, uint256 oldPrice, uint256 newPrice, address indexed updater);
    event VolatilityThresholdUpdated(
        address indexed asset, uint256 oldThreshold, uint256 newThreshold, address indexed updatedBy
    );
    event AssetsStakedToNode(uint256 indexed nodeId, address[] assets, uint256[] amounts, address indexed staker);
    event AssetsDepositedToEigenlayer(
        address[] assets, uint256[] amounts, address[] strategies, address indexed depositor
    );
    event NodeDelegated(uint256 nodeId, address indexed operator);
    event NodeUndelegated(uint256 nodeId, address indexed operator);

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
    error TransferFailed();

    function initialize(Init memory init) external initializer {
        if (address(init.liquidToken) == address(0) || init.initialOwner == address(0)) revert ZeroAddress();
        _grantRole(DEFAULT_ADMIN_ROLE, init.initialOwner);
        _grantRole(STRATEGY_CONTROLLER_ROLE, init.strategyController);
        _grantRole(PRICE_UPDATER_ROLE, init.priceUpdater);
        liquidToken = init.liquidToken;
        strategyManager = init.strategyManager;
        delegationManager = init.delegationManager;
        stakerNodeCoordinator = init.stakerNodeCoordinator;
    }

    function addToken(address token, uint8 decimals, uint256 initialPrice, uint256 volatilityThreshold, Strategy strategy)
        external
        onlyRole(DEFAULT_ADMIN_ROLE)
    {
        if (tokens[token].decimals != 0) revert TokenExists(token);
        if (token == address(0) || address(strategy) == address(0)) revert ZeroAddress();
        if (decimals == 0 || IERC20(token).decimals() != decimals) revert InvalidDecimals();
        if (initialPrice == 0) revert InvalidPrice();
        if (volatilityThreshold != 0 && (volatilityThreshold < 1e16 || volatilityThreshold > 1e18)) {
            revert InvalidThreshold();
        }
        tokens[token] = TokenInfo(decimals, initialPrice, volatilityThreshold);
        tokenStrategies[token] = strategy;
        supportedTokens.push(token);
        emit TokenAdded(token, decimals, initialPrice, volatilityThreshold, address(strategy), msg.sender);
    }

    /// @notice Only a token the LAT holds none of (unstaked, queued or staked) can be removed.
    function removeToken(address token) external onlyRole(DEFAULT_ADMIN_ROLE) {
        if (tokens[token].decimals == 0) revert TokenNotSupported(token);
        address[] memory one = new address[](1);
        one[0] = token;
        if (liquidToken.balanceAssets(one)[0] > 0 || liquidToken.balanceQueuedAssets(one)[0] > 0) {
            revert TokenInUse(token);
        }
        if (this.getStakedAssetBalance(token) > 0) revert TokenInUse(token);
        removeAddress(supportedTokens, token);
        delete tokenStrategies[token];
        delete tokens[token];
        emit TokenRemoved(token, msg.sender);
    }

    function setVolatilityThreshold(address asset, uint256 newThreshold) external onlyRole(DEFAULT_ADMIN_ROLE) {
        if (tokens[asset].decimals == 0) revert TokenNotSupported(asset);
        if (newThreshold != 0 && (newThreshold < 1e16 || newThreshold > 1e18)) revert InvalidThreshold();
        emit VolatilityThresholdUpdated(asset, tokens[asset].volatilityThreshold, newThreshold, msg.sender);
        tokens[asset].volatilityThreshold = newThreshold;
    }

    function updatePrice(address token, uint256 newPrice) external onlyRole(PRICE_UPDATER_ROLE) {
        TokenInfo storage info = tokens[token];
        if (info.decimals == 0) revert TokenNotSupported(token);
        if (newPrice == 0) revert InvalidPrice();
        uint256 oldPrice = info.pricePerUnit;
        if (info.volatilityThreshold != 0) {
            uint256 diff = newPrice > oldPrice ? newPrice - oldPrice : oldPrice - newPrice;
            uint256 changeRatio = (diff * 1e18) / oldPrice;
            if (changeRatio > info.volatilityThreshold) revert VolatilityThresholdHit(token, changeRatio);
        }
        info.pricePerUnit = newPrice;
        emit TokenPriceUpdated(token, oldPrice, newPrice, msg.sender);
    }

    function delegateNodes(
        uint256[] calldata nodeIds,
        address[] calldata operators,
        DelegationManager.SignatureWithExpiry[] calldata approverSignatureAndExpiries,
        bytes32[] calldata approverSalts
    ) external onlyRole(STRATEGY_CONTROLLER_ROLE) {
        if (operators.length != nodeIds.length) revert LengthMismatch(operators.length, nodeIds.length);
        if (approverSignatureAndExpiries.length != nodeIds.length || approverSalts.length != nodeIds.length) {
            revert LengthMismatch(approverSalts.length, nodeIds.length);
        }
        for (uint256 i = 0; i < nodeIds.length; i++) {
            stakerNodeCoordinator.getNodeById(nodeIds[i]).delegate(
                operators[i], approverSignatureAndExpiries[i], approverSalts[i]
            );
            emit NodeDelegated(nodeIds[i], operators[i]);
        }
    }

    function undelegateNodes(uint256[] calldata nodeIds) external onlyRole(STRATEGY_CONTROLLER_ROLE) {
        for (uint256 i = 0; i < nodeIds.length; i++) {
            address operator = stakerNodeCoordinator.getNodeById(nodeIds[i]).undelegate();
            emit NodeUndelegated(nodeIds[i], operator);
        }
    }

    function stakeAssetsToNode(uint256 nodeId, address[] calldata assets, uint256[] calldata amounts)
        external
        onlyRole(STRATEGY_CONTROLLER_ROLE)
        nonReentrant
    {
        if (assets.length != amounts.length) revert LengthMismatch(assets.length, amounts.length);
        StakerNode node = stakerNodeCoordinator.getNodeById(nodeId);
        address[] memory strategies = new address[](assets.length);
        for (uint256 i = 0; i < assets.length; i++) {
            if (amounts[i] == 0) revert InvalidStakingAmount(0);
            strategies[i] = address(tokenStrategies[assets[i]]);
            if (strategies[i] == address(0)) revert StrategyNotFound(assets[i]);
        }
        liquidToken.transferAssets(assets, amounts);
        for (uint256 i = 0; i < assets.length; i++) {
            if (!IERC20(assets[i]).transfer(address(node), amounts[i])) revert TransferFailed();
        }
        emit AssetsStakedToNode(nodeId, assets, amounts, msg.sender);
        _depositThroughNode(node, assets, amounts, strategies);
        emit AssetsDepositedToEigenlayer(assets, amounts, strategies, address(node));
    }

    function _depositThroughNode(
        StakerNode node,
        address[] calldata assets,
        uint256[] calldata amounts,
        address[] memory strategies
    ) private {
        // The node's ABI types assets and strategies as addresses; the call is by selector.
        (bool ok, bytes memory data) =
            address(node).call(abi.encodeCall(StakerNodeDeposit.depositAssets, (assets, amounts, strategies)));
        if (!ok) {
            assembly {
                revert(add(data, 32), mload(data))
            }
        }
    }

    /// @notice Devnet: sets unstaked assets aside as queued for withdrawal.
    function queueAssets(address asset, uint256 amount) external onlyRole(DEFAULT_ADMIN_ROLE) {
        if (tokens[asset].decimals == 0) revert TokenNotSupported(asset);
        liquidToken.queueAssets(asset, amount);
    }

    function getSupportedTokens() external view returns (address[] memory) {
        return supportedTokens;
    }

    function getTokenInfo(address token) external view returns (TokenInfo memory) {
        if (tokens[token].decimals == 0) revert TokenNotSupported(token);
        return tokens[token];
    }

    function getTokenStrategy(address asset) external view returns (address) {
        if (address(tokenStrategies[asset]) == address(0)) revert StrategyNotFound(asset);
        return address(tokenStrategies[asset]);
    }

    function tokenIsSupported(address token) external view returns (bool) {
        return tokens[token].decimals != 0;
    }

    function convertToUnitOfAccount(address token, uint256 amount) external view returns (uint256) {
        TokenInfo storage info = tokens[token];
        if (info.decimals == 0) revert TokenNotSupported(token);
        return (amount * info.pricePerUnit) / 10 ** info.decimals;
    }

    function convertFromUnitOfAccount(address token, uint256 amount) external view returns (uint256) {
        TokenInfo storage info = tokens[token];
        if (info.decimals == 0) revert TokenNotSupported(token);
        return (amount * 10 ** info.decimals) / info.pricePerUnit;
    }

    /// @notice The nodes' withdrawable stake of the token, in token units.
    function getStakedAssetBalance(address asset) external view returns (uint256 total) {
        Strategy strategy = tokenStrategies[asset];
        if (address(strategy) == address(0)) revert StrategyNotFound(asset);
        StakerNode[] memory nodes = stakerNodeCoordinator.getAllNodes();
        for (uint256 i = 0; i < nodes.length; i++) {
            total += _nodeStake(strategy, address(nodes[i]));
        }
    }

    function getStakedAssetBalanceNode(address asset, uint256 nodeId) external view returns (uint256) {
        Strategy strategy = tokenStrategies[asset];
        if (address(strategy) == address(0)) revert StrategyNotFound(asset);
        return _nodeStake(strategy, address(stakerNodeCoordinator.getNodeById(nodeId)));
    }

    function _nodeStake(Strategy strategy, address node) private view returns (uint256) {
        address[] memory one = new address[](1);
        one[0] = address(strategy);
        (uint256[] memory withdrawable,) = delegationManager.getWithdrawableShares(node, one);
        return withdrawable[0] == 0 ? 0 : strategy.sharesToUnderlyingView(withdrawable[0]);
    }
}

/// @dev The staker node's deposit, with assets and strategies as addresses.
interface StakerNodeDeposit {
    function depositAssets(address[] calldata assets, uint256[] calldata amounts, address[] calldata strategies)
        external;
}
