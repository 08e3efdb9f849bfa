// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20, Initializable, Owned} from "./Base.sol";
import {LiquidToken} from "./LiquidToken.sol";
import {StakerNode} from "./StakerNode.sol";
import {StakerNodeCoordinator} from "./StakerNodeCoordinator.sol";
import {TokenRegistryOracle} from "./TokenRegistryOracle.sol";
import {Strategy} from "./Strategy.sol";
import {StrategyManager} from "./StrategyManager.sol";
import {DelegationManager} from "./DelegationManager.sol";

/// @notice Registry of a LAT's supported tokens (decimals, price in the unit of account,
/// volatility threshold, EigenLayer strategy) and the admin that stakes the LAT's assets through
/// its staker nodes. Lives behind a TransparentProxy.
///
/// Balances per token: getDepositAssetBalance = unstaked + queued + staked at deposit-share value;
/// getWithdrawableAssetBalance = unstaked + queued + staked net of slashing (what totalAssets uses).
contract LiquidTokenManager is Initializable, Owned {
    struct TokenInfo {
        uint256 decimals;
        uint256 pricePerUnit;
        uint256 volatilityThreshold;
    }

    LiquidToken public liquidToken;
    StakerNodeCoordinator public stakerNodeCoordinator;
    TokenRegistryOracle public tokenRegistryOracle;
    StrategyManager public strategyManager;
    DelegationManager public delegationManager;
    address[] private _supportedTokens;
    mapping(address token => TokenInfo) private _tokenInfo;
    mapping(address token => address) private _tokenStrategies;

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
    event VolatilityThresholdUpdated(address indexed token, uint256 oldThreshold, uint256 newThreshold);
    event NodeDelegated(uint256 nodeId, address indexed operator);
    event NodeUndelegated(uint256 nodeId, address indexed operator);
    event AssetsStakedToNode(uint256 indexed nodeId, address[] assets, uint256[] amounts, address indexed staker);
    event AssetsQueued(address indexed asset, uint256 amount, address indexed queuer);

    error TokenNotSupported(address token);
    error TokenExists(address token);
    error InvalidDecimals(address token, uint256 declared, uint256 actual);
    error InvalidPrice();
    error InvalidStrategy(address strategy);
    error TokenInUse(address token, uint256 balance);
    error VolatilityThresholdHit(address token, uint256 changeRatio);
    error NotTokenRegistryOracle(address caller);
    error ArrayLengthMismatch();

    modifier onlySupported(address token) {
        if (_tokenInfo[token].decimals == 0) revert TokenNotSupported(token);
        _;
    }

    function initialize(
        address owner_,
        LiquidToken liquidToken_,
        StakerNodeCoordinator coordinator,
        TokenRegistryOracle oracle,
        StrategyManager strategyManager_,
        DelegationManager delegationManager_
    ) external initializer {
        _transferOwnership(owner_);
        liquidToken = liquidToken_;
        stakerNodeCoordinator = coordinator;
        tokenRegistryOracle = oracle;
        strategyManager = strategyManager_;
        delegationManager = delegationManager_;
    }

    // ----- token registry -----

    function addToken(
        address token,
        uint256 decimals,
        uint256 initialPrice,
        uint256 volatilityThreshold,
        address strategy
    ) external onlyOwner {
        if (_tokenInfo[token].decimals != 0) revert TokenExists(token);
        uint256 actual = IERC20(token).decimals();
        if (decimals == 0 || decimals != actual) revert InvalidDecimals(token, decimals, actual);
        if (initialPrice == 0) revert InvalidPrice();
        if (address(Strategy(strategy).underlyingToken()) != token) revert InvalidStrategy(strategy);
        _tokenInfo[token] = TokenInfo(decimals, initialPrice, volatilityThreshold);
        _tokenStrategies[token] = strategy;
        _supportedTokens.push(token);
        emit TokenAdded(token, decimals, initialPrice, volatilityThreshold, strategy, msg.sender);
    }

    /// @notice Only a token the LAT holds none of (unstaked, queued or staked) can be removed.
    function removeToken(address token) external onlyOwner onlySupported(token) {
        uint256 balance = getDepositAssetBalance(token);
        if (balance != 0) revert TokenInUse(token, balance);
        delete _tokenInfo[token];
        delete _tokenStrategies[token];
        uint256 last = _supportedTokens.length - 1;
        for (uint256 i = 0; i <= last; i++) {
            if (_supportedTokens[i] == token) {
                _supportedTokens[i] = _supportedTokens[last];
                _supportedTokens.pop();
                break;
            }
        }
        emit TokenRemoved(token, msg.sender);
    }

    /// @notice Owner path for a price change; also stamps the oracle's lastPriceUpdate.
    function setPrice(address token, uint256 newPrice) external onlyOwner {
        _updatePrice(token, newPrice);
        tokenRegistryOracle.recordPriceUpdate();
    }

    /// @notice Oracle path for a price change (TokenRegistryOracle.updateRate).
    function updatePrice(address token, uint256 newPrice) external {
        if (msg.sender != address(tokenRegistryOracle)) revert NotTokenRegistryOracle(msg.sender);
        _updatePrice(token, newPrice);
    }

    function setVolatilityThreshold(address token, uint256 newThreshold) external onlyOwner onlySupported(token) {
        emit VolatilityThresholdUpdated(token, _tokenInfo[token].volatilityThreshold, newThreshold);
        _tokenInfo[token].volatilityThreshold = newThreshold;
    }

    // ----- staking admin -----

    function delegateNode(uint256 nodeId, address operator) external onlyOwner {
        StakerNode(stakerNodeCoordinator.getNodeById(nodeId)).delegate(operator);
        emit NodeDelegated(nodeId, operator);
    }

    function undelegateNode(uint256 nodeId) external onlyOwner {
        address operator = StakerNode(stakerNodeCoordinator.getNodeById(nodeId)).undelegate();
        emit NodeUndelegated(nodeId, operator);
    }

    /// @notice Moves unstaked assets from the LAT to a node, which deposits them into each
    /// token's strategy (the node then holds strategy shares).
    function stakeAssetsToNode(uint256 nodeId, address[] calldata assets, uint256[] calldata amounts)
        external
        onlyOwner
    {
        if (assets.length != amounts.length) revert ArrayLengthMismatch();
        address node = stakerNodeCoordinator.getNodeById(nodeId);
        address[] memory strategies = new address[](assets.length);
        for (uint256 i = 0; i < assets.length; i++) {
            if (_tokenInfo[assets[i]].decimals == 0) revert TokenNotSupported(assets[i]);
            strategies[i] = _tokenStrategies[assets[i]];
        }
        liquidToken.transferAssets(assets, amounts, node);
        StakerNode(node).depositAssets(assets, amounts, strategies);
        emit AssetsStakedToNode(nodeId, assets, amounts, msg.sender);
    }

    /// @notice Sets unstaked assets aside as queued for withdrawal (balanceQueuedAssets).
    function queueAssets(address asset, uint256 amount) external onlyOwner onlySupported(asset) {
        liquidToken.queueAssets(asset, amount);
        emit AssetsQueued(asset, amount, msg.sender);
    }

    // ----- views -----

    function getSupportedTokens() external view returns (address[] memory) {
        return _supportedTokens;
    }

    function tokenIsSupported(address token) external view returns (bool) {
        return _tokenInfo[token].decimals != 0;
    }

    function getTokenInfo(address token)
        external
        view
        onlySupported(token)
        returns (uint256 decimals, uint256 pricePerUnit, uint256 volatilityThreshold)
    {
        TokenInfo storage info = _tokenInfo[token];
        return (info.decimals, info.pricePerUnit, info.volatilityThreshold);
    }

    function getTokenStrategy(address token) external view onlySupported(token) returns (address) {
        return _tokenStrategies[token];
    }

    function getDepositAssetBalance(address token) public view onlySupported(token) returns (uint256) {
        return _heldBalance(token) + _stakedBalance(token, false);
    }

    function getWithdrawableAssetBalance(address token) public view onlySupported(token) returns (uint256) {
        return _heldBalance(token) + _stakedBalance(token, true);
    }

    /// @notice The token's staked balance across all nodes, in token units, net of slashing.
    function getStakedAssetBalance(address token) external view onlySupported(token) returns (uint256) {
        return _stakedBalance(token, true);
    }

    /// @notice The token's staked balance in one node, in token units, net of slashing.
    function getStakedAssetBalanceNode(address token, uint256 nodeId) external view onlySupported(token) returns (uint256) {
        return _nodeBalance(_tokenStrategies[token], stakerNodeCoordinator.getNodeById(nodeId), true);
    }

    /// @notice amount (token units) * pricePerUnit / 10**decimals: 1e18-scaled unit of account.
    function convertToUnitOfAccount(address token, uint256 amount) public view onlySupported(token) returns (uint256) {
        TokenInfo storage info = _tokenInfo[token];
        return (amount * info.pricePerUnit) / 10 ** info.decimals;
    }

    function convertFromUnitOfAccount(address token, uint256 value) external view onlySupported(token) returns (uint256) {
        TokenInfo storage info = _tokenInfo[token];
        return (value * 10 ** info.decimals) / info.pricePerUnit;
    }

    // ----- internals -----

    function _updatePrice(address token, uint256 newPrice) private onlySupported(token) {
        if (newPrice == 0) revert InvalidPrice();
        TokenInfo storage info = _tokenInfo[token];
        uint256 oldPrice = info.pricePerUnit;
        if (info.volatilityThreshold != 0) {
            uint256 diff = newPrice > oldPrice ? newPrice - oldPrice : oldPrice - newPrice;
            uint256 changeRatio = (diff * 1e18) / oldPrice;
            if (changeRatio > info.volatilityThreshold) revert VolatilityThresholdHit(token, changeRatio);
        }
        info.pricePerUnit = newPrice;
        emit TokenPriceUpdated(token, oldPrice, newPrice, msg.sender);
    }

    function _heldBalance(address token) private view returns (uint256) {
        address[] memory assets = new address[](1);
        assets[0] = token;
        return liquidToken.balanceAssets(assets)[0] + liquidToken.balanceQueuedAssets(assets)[0];
    }

    function _stakedBalance(address token, bool netOfSlashing) private view returns (uint256 total) {
        address strategy = _tokenStrategies[token];
        address[] memory nodes = stakerNodeCoordinator.getAllNodes();
        for (uint256 i = 0; i < nodes.length; i++) {
            total += _nodeBalance(strategy, nodes[i], netOfSlashing);
        }
    }

    function _nodeBalance(address strategy, address node, bool netOfSlashing) private view returns (uint256) {
        address[] memory strategies = new address[](1);
        strategies[0] = strategy;
        (uint256[] memory withdrawable, uint256[] memory deposited) =
            delegationManager.getWithdrawableShares(node, strategies);
        uint256 shares = netOfSlashing ? withdrawable[0] : deposited[0];
        return shares == 0 ? 0 : Strategy(strategy).sharesToUnderlyingView(shares);
    }
}
