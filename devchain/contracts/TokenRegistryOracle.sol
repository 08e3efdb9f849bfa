// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {AccessControlUpgradeable} from "@openzeppelin/contracts-upgradeable/access/AccessControlUpgradeable.sol";

import {removeAddress} from "./Base.sol";
import {LiquidTokenManager} from "./LiquidTokenManager.sol";

/// @notice A LAT's price oracle as Mainnet v1 deploys it (OpenZeppelin 4.9, behind a
/// TransparentUpgradeableProxy). Prices live in the LiquidTokenManager (pricePerUnit); the
/// oracle reads each configured token's price from its source and pushes it there.
///
/// Sources: 1 a Chainlink-style feed (latestRoundData, scaled to 18 decimals; an answer <= 0, a
/// zero updatedAt or a stale round is no price), 2 a Curve pool (get_virtual_price, then
/// price_oracle, then get_dy(0, 1, 1e18)), 3 a protocol's rate function (the configured
/// selector on the source, with 1e18 as argument when `needsArg`). A token whose source gives no
/// price falls back to its fallback function, if any.
///
/// Staleness: prices are stale once `block.timestamp > lastPriceUpdate() + interval`. With an
/// interval set by `setPriceUpdateInterval` (the devnet sets one) the interval is that many
/// seconds. Without one (after `disableEmergencyInterval`) it is derived from the block, between
/// 1 and 4 hours as on Mainnet v1; the devnet's derivation is simpler than upstream's (the hour
/// and the salt only), so it is not the same threshold at the same block.
///
/// `updateAllPricesIfNeeded` (RATE_UPDATER_ROLE: the price updater and the LAT) refreshes every
/// configured token when prices are stale and reverts `NoFreshPrice(token)` when a token has no
/// price from its sources; the LAT's deposit turns that into `PriceUpdateFailed()`.
contract TokenRegistryOracle is AccessControlUpgradeable {
    struct Init {
        address initialOwner;
        address priceUpdater;
        address liquidToken;
        LiquidTokenManager liquidTokenManager;
    }

    struct TokenConfig {
        uint8 primaryType;
        uint8 needsArg;
        uint16 reserved;
        address primarySource;
        address fallbackSource;
        bytes4 fallbackFn;
    }

    bytes32 public constant RATE_UPDATER_ROLE = keccak256("RATE_UPDATER_ROLE");
    bytes32 public constant ORACLE_ADMIN_ROLE = keccak256("ORACLE_ADMIN_ROLE");
    bytes32 public constant TOKEN_CONFIGURATOR_ROLE = keccak256("TOKEN_CONFIGURATOR_ROLE");
    uint8 public constant SOURCE_TYPE_CHAINLINK = 1;
    uint8 public constant SOURCE_TYPE_CURVE = 2;
    uint8 public constant SOURCE_TYPE_PROTOCOL = 3;

    LiquidTokenManager public liquidTokenManager;
    uint64 public lastGlobalPriceUpdate;
    mapping(address => TokenConfig) public tokenConfigs;
    mapping(address => bool) public isConfigured;
    mapping(address => bool) public requiresReentrancyLock;
    address[] public configuredTokens;
    uint256 private _stalenessSalt;
    uint64 private _fixedInterval;
    bool private _fixedIntervalSet;

    event TokenRateUpdated(IERC20 indexed token, uint256 oldRate, uint256 newRate, address indexed updater);
    event EmergencyIntervalDisabled();
    event TokenSourceSet(address indexed token, address indexed source);
    event UpdateIntervalChanged(uint256 oldInterval, uint256 newInterval);
    event GlobalPricesUpdated(address indexed updater, uint256 timestamp);
    event TokenRemoved(address token);
    event BatchPoolsConfigured(address[] pools, bool[] settings);

    error ZeroAddress();
    error NoFreshPrice(address token);
    error InvalidUpdater(address sender);
    error ArrayLengthMismatch();
    error NativeTokensNotConfigurable();
    error FallbackSourceRequired();
    error IntervalCannotBeZero();

    constructor() {
        _disableInitializers();
    }

    function initialize(Init memory init, uint256 stalenessSalt) public initializer {
        __AccessControl_init();
        if (
            init.initialOwner == address(0) || init.priceUpdater == address(0)
                || address(init.liquidTokenManager) == address(0) || init.liquidToken == address(0)
        ) revert ZeroAddress();
        _grantRole(DEFAULT_ADMIN_ROLE, init.initialOwner);
        _grantRole(ORACLE_ADMIN_ROLE, init.initialOwner);
        _grantRole(RATE_UPDATER_ROLE, init.priceUpdater);
        _grantRole(RATE_UPDATER_ROLE, init.liquidToken);
        _grantRole(TOKEN_CONFIGURATOR_ROLE, address(init.liquidTokenManager));
        liquidTokenManager = init.liquidTokenManager;
        lastGlobalPriceUpdate = uint64(block.timestamp);
        _stalenessSalt = stalenessSalt;
    }

    // ----- configuration -----

    function configureToken(
        address token,
        uint8 primaryType,
        address primarySource,
        uint8 needsArg,
        address fallbackSource,
        bytes4 fallbackFn
    ) external onlyRole(TOKEN_CONFIGURATOR_ROLE) {
        if (token == address(0)) revert ZeroAddress();
        if (primaryType == 0 && primarySource == address(0)) revert NativeTokensNotConfigurable();
        if (primarySource == address(0)) revert ZeroAddress();
        if (fallbackFn != bytes4(0) && fallbackSource == address(0)) revert FallbackSourceRequired();
        tokenConfigs[token] = TokenConfig(primaryType, needsArg, 0, primarySource, fallbackSource, fallbackFn);
        if (!isConfigured[token]) {
            isConfigured[token] = true;
            configuredTokens.push(token);
        }
        emit TokenSourceSet(token, primarySource);
    }

    function removeToken(address token) external onlyRole(TOKEN_CONFIGURATOR_ROLE) {
        if (!isConfigured[token]) return;
        delete tokenConfigs[token];
        isConfigured[token] = false;
        removeAddress(configuredTokens, token);
        emit TokenRemoved(token);
    }

    function setPriceUpdateInterval(uint256 interval) external onlyRole(ORACLE_ADMIN_ROLE) {
        if (interval == 0) revert IntervalCannotBeZero();
        uint256 old = _fixedIntervalSet ? _fixedInterval : 0;
        _fixedInterval = uint64(interval);
        _fixedIntervalSet = true;
        emit UpdateIntervalChanged(old, interval);
    }

    function disableEmergencyInterval() external onlyRole(ORACLE_ADMIN_ROLE) {
        _fixedIntervalSet = false;
        emit EmergencyIntervalDisabled();
    }

    function batchSetRequiresLock(address[] calldata pools, bool[] calldata settings)
        external
        onlyRole(ORACLE_ADMIN_ROLE)
    {
        if (pools.length != settings.length) revert ArrayLengthMismatch();
        for (uint256 i = 0; i < pools.length; i++) {
            requiresReentrancyLock[pools[i]] = settings[i];
        }
        emit BatchPoolsConfigured(pools, settings);
    }

    // ----- rates -----

    function updateRate(IERC20 token, uint256 newRate) external onlyRole(RATE_UPDATER_ROLE) {
        _setRate(token, newRate);
    }

    function batchUpdateRates(IERC20[] calldata tokens, uint256[] calldata newRates)
        external
        onlyRole(RATE_UPDATER_ROLE)
    {
        if (tokens.length != newRates.length) revert ArrayLengthMismatch();
        for (uint256 i = 0; i < tokens.length; i++) {
            _setRate(tokens[i], newRates[i]);
        }
    }

    /// @notice Refreshes every configured token's price from its sources when prices are stale.
    /// @return Whether prices were refreshed (false: they were not stale).
    function updateAllPricesIfNeeded() external returns (bool) {
        if (!arePricesStale()) return false;
        if (
            !hasRole(RATE_UPDATER_ROLE, msg.sender) && !hasRole(DEFAULT_ADMIN_ROLE, msg.sender)
                && !hasRole(ORACLE_ADMIN_ROLE, msg.sender)
        ) revert InvalidUpdater(msg.sender);
        for (uint256 i = 0; i < configuredTokens.length; i++) {
            address token = configuredTokens[i];
            (uint256 price, bool ok) = _sourcePrice(token);
            if (!ok) (price, ok) = _fallbackPrice(token);
            if (!ok) revert NoFreshPrice(token);
            _setRate(IERC20(token), price);
        }
        lastGlobalPriceUpdate = uint64(block.timestamp);
        emit GlobalPricesUpdated(msg.sender, block.timestamp);
        return true;
    }

    function _setRate(IERC20 token, uint256 newRate) private {
        uint256 oldRate = liquidTokenManager.getTokenInfo(address(token)).pricePerUnit;
        liquidTokenManager.updatePrice(address(token), newRate);
        emit TokenRateUpdated(token, oldRate, newRate, msg.sender);
    }

    // ----- views (and the price reads, which are not views: a Curve pool may be poked) -----

    function getRate(IERC20 token) external view returns (uint256) {
        return liquidTokenManager.getTokenInfo(address(token)).pricePerUnit;
    }

    function arePricesStale() public view returns (bool) {
        return block.timestamp > uint256(lastGlobalPriceUpdate) + _interval();
    }

    function lastPriceUpdate() external view returns (uint256) {
        return lastGlobalPriceUpdate;
    }

    /// @notice The token's price from its source, else its fallback, else the stored price.
    function getTokenPrice(address token) external returns (uint256) {
        (uint256 price, bool ok) = _sourcePrice(token);
        if (ok) return price;
        (price, ok) = _fallbackPrice(token);
        if (ok) return price;
        return liquidTokenManager.getTokenInfo(token).pricePerUnit;
    }

    /// @notice The token's price from its primary source, and whether there was one.
    function _getTokenPrice_getter(address token) external returns (uint256 price, bool success) {
        return _sourcePrice(token);
    }

    function _interval() private view returns (uint256) {
        if (_fixedIntervalSet) return _fixedInterval;
        // 1 to 4 hours, changing every hour.
        uint256 mixed = uint256(keccak256(abi.encode(block.timestamp / 3600, _stalenessSalt, address(this))));
        return 3600 + (mixed % 10_800);
    }

    function _sourcePrice(address token) private returns (uint256, bool) {
        TokenConfig storage config = tokenConfigs[token];
        if (config.primarySource == address(0)) return (0, false);
        if (config.primaryType == SOURCE_TYPE_CHAINLINK) return _feedPrice(config.primarySource);
        if (config.primaryType == SOURCE_TYPE_CURVE) return _curvePrice(config.primarySource);
        if (config.primaryType == SOURCE_TYPE_PROTOCOL) {
            return _ratePrice(config.primarySource, config.fallbackFn, config.needsArg);
        }
        return (0, false);
    }

    function _fallbackPrice(address token) private view returns (uint256, bool) {
        TokenConfig storage config = tokenConfigs[token];
        if (config.fallbackFn == bytes4(0) || config.fallbackSource == address(0)) return (0, false);
        return _ratePrice(config.fallbackSource, config.fallbackFn, config.needsArg);
    }

    function _feedPrice(address feed) private view returns (uint256, bool) {
        (bool ok, bytes memory data) = feed.staticcall(abi.encodeWithSignature("latestRoundData()"));
        if (!ok || data.length < 160) return (0, false);
        (uint80 roundId, int256 answer,, uint256 updatedAt, uint80 answeredInRound) =
            abi.decode(data, (uint80, int256, uint256, uint256, uint80));
        if (answer <= 0 || updatedAt == 0 || answeredInRound < roundId) return (0, false);
        uint256 decimals = 8;
        (ok, data) = feed.staticcall(abi.encodeWithSignature("decimals()"));
        if (ok && data.length >= 32) decimals = abi.decode(data, (uint256)) & 0xff;
        uint256 price = uint256(answer);
        if (decimals < 18) return (price * 10 ** (18 - decimals), true);
        return (price / 10 ** (decimals - 18), price / 10 ** (decimals - 18) > 0);
    }

    function _curvePrice(address pool) private returns (uint256, bool) {
        if (requiresReentrancyLock[pool]) {
            // A zero withdrawal fails while the pool is mid-call: then its prices cannot be trusted.
            (bool unlocked,) = pool.call(abi.encodeWithSignature("remove_liquidity(uint256,uint256[])", 0, new uint256[](2)));
            require(unlocked, "CurveOracle: pool re-entrancy");
        }
        (uint256 price, bool ok) = _uintCall(pool, abi.encodeWithSignature("get_virtual_price()"));
        if (!ok) (price, ok) = _uintCall(pool, abi.encodeWithSignature("price_oracle()"));
        if (!ok) (price, ok) = _uintCall(pool, abi.encodeWithSignature("get_dy(int128,int128,uint256)", 0, 1, 1e18));
        return (price, ok);
    }

    function _ratePrice(address source, bytes4 selector, uint8 needsArg) private view returns (uint256, bool) {
        if (source == address(0) || selector == bytes4(0)) return (0, false);
        bytes memory call = needsArg != 0 ? abi.encodeWithSelector(selector, 1e18) : abi.encodeWithSelector(selector);
        return _uintCall(source, call);
    }

    /// @dev A positive uint256 answered by a static call, or (0, false).
    function _uintCall(address target, bytes memory call) private view returns (uint256, bool) {
        (bool ok, bytes memory data) = target.staticcall(call);
        if (!ok || data.length < 32) return (0, false);
        uint256 value = abi.decode(data, (uint256));
        return (value, value > 0);
    }
}
