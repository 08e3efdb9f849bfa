// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {AccessControlUpgradeable} from "@openzeppelin/contracts-upgradeable/access/AccessControlUpgradeable.sol";
import {ERC20Upgradeable} from "@openzeppelin/contracts-upgradeable/token/ERC20/ERC20Upgradeable.sol";
import {PausableUpgradeable} from "@openzeppelin/contracts-upgradeable/security/PausableUpgradeable.sol";
import {ReentrancyGuardUpgradeable} from "@openzeppelin/contracts-upgradeable/security/ReentrancyGuardUpgradeable.sol";

import {LiquidTokenManager} from "./LiquidTokenManager.sol";
import {TokenRegistryOracle} from "./TokenRegistryOracle.sol";

/// @notice The LAT as Mainnet v1 deploys it: an 18-decimal ERC-20 (OpenZeppelin 4.9
/// upgradeable, behind a TransparentUpgradeableProxy) whose shares are minted against deposits
/// of supported tokens, valued in the LAT's unit of account.
///
/// A deposit first asks the oracle whether prices are stale; when they are, it has the oracle
/// refresh every price (`updateAllPricesIfNeeded`) before anything is minted, and reverts with
/// `PriceUpdateFailed()` when the refresh fails, `PriceUpdateRejected()` when it refused,
/// `PricesRemainStale()` when prices are still stale after it. Pausing is OpenZeppelin 4.9's:
/// a paused deposit reverts with the string "Pausable: paused". Token transfers go through
/// SafeERC20, so a token's own revert (its custom error or string) comes through unchanged.
///
/// shares = value * totalSupply / totalAssets (1:1 while either is zero), where value is the
/// amount the LAT actually received, converted to the unit of account. totalAssets converts,
/// per supported token, the unstaked, queued and staked-withdrawable balances to the unit of
/// account (one conversion of their sum).
///
/// Devnet-only additions (not on Mainnet v1): `burn`, `queueAssets` (unstaked set aside as
/// queued) and `setLegacyEvents` (emit the older `Deposit` event in place of `AssetDeposited`).
contract LiquidToken is AccessControlUpgradeable, ERC20Upgradeable, PausableUpgradeable, ReentrancyGuardUpgradeable {
    using SafeERC20 for IERC20;

    struct Init {
        string name;
        string symbol;
        LiquidTokenManager liquidTokenManager;
        TokenRegistryOracle tokenRegistryOracle;
        address initialOwner;
        address pauser;
    }

    bytes32 public constant PAUSER_ROLE = keccak256("PAUSER_ROLE");

    LiquidTokenManager public liquidTokenManager;
    TokenRegistryOracle public tokenRegistryOracle;
    /// Unstaked balances held by this contract, per asset.
    mapping(address => uint256) public assetBalances;
    /// Balances set aside in the withdrawal queue, per asset.
    mapping(address => uint256) public queuedAssetBalances;
    /// Devnet: emit `Deposit` instead of `AssetDeposited`, as older deployments do.
    bool public legacyEvents;

    event PricesUpdatedBeforeDeposit(address indexed depositor);
    event AssetDeposited(
        address indexed sender, address indexed receiver, IERC20 indexed asset, uint256 amount, uint256 shares
    );
    /// The event older deployments emit for a deposit, with the same fields.
    event Deposit(
        address indexed sender, address indexed receiver, IERC20 indexed asset, uint256 amount, uint256 shares
    );
    event AssetTransferred(IERC20 indexed asset, uint256 amount, address indexed destination, address indexed initiator);

    error UnsupportedAsset(IERC20 asset);
    error ZeroAddress();
    error ZeroAmount();
    error ZeroShares();
    error NotLiquidTokenManager(address sender);
    error ArrayLengthMismatch();
    error InsufficientBalance(IERC20 asset, uint256 required, uint256 available);
    error AssetBalanceOutOfSync(IERC20 asset, uint256 accountingBalance, uint256 actualBalance);
    error PriceUpdateFailed();
    error PriceUpdateRejected();
    error PricesRemainStale();
    error AssetPriceInvalid(address token);

    modifier onlyLiquidTokenManager() {
        if (msg.sender != address(liquidTokenManager)) revert NotLiquidTokenManager(msg.sender);
        _;
    }

    constructor() {
        _disableInitializers();
    }

    function initialize(Init calldata init) external initializer {
        __ERC20_init(init.name, init.symbol);
        __AccessControl_init();
        __Pausable_init();
        __ReentrancyGuard_init();
        if (
            init.initialOwner == address(0) || init.pauser == address(0)
                || address(init.liquidTokenManager) == address(0) || address(init.tokenRegistryOracle) == address(0)
        ) revert ZeroAddress();
        _grantRole(DEFAULT_ADMIN_ROLE, init.initialOwner);
        _grantRole(PAUSER_ROLE, init.pauser);
        liquidTokenManager = init.liquidTokenManager;
        tokenRegistryOracle = init.tokenRegistryOracle;
    }

    // ----- deposits -----

    function deposit(IERC20[] calldata assets, uint256[] calldata amounts, address receiver)
        external
        nonReentrant
        whenNotPaused
        returns (uint256[] memory shares)
    {
        if (assets.length != amounts.length) revert ArrayLengthMismatch();
        _refreshStalePrices();
        _checkPrices(assets);

        shares = new uint256[](assets.length);
        for (uint256 i = 0; i < assets.length; i++) {
            shares[i] = _depositOne(assets[i], amounts[i], receiver);
        }
    }

    /// @dev When the oracle says prices are stale, every price is refreshed before minting.
    function _refreshStalePrices() private {
        TokenRegistryOracle oracle = tokenRegistryOracle;
        if (!oracle.arePricesStale()) return;
        bool refreshed;
        try oracle.updateAllPricesIfNeeded() returns (bool result) {
            refreshed = result;
        } catch {
            revert PriceUpdateFailed();
        }
        if (!refreshed) revert PriceUpdateRejected();
        if (oracle.arePricesStale()) revert PricesRemainStale();
        emit PricesUpdatedBeforeDeposit(msg.sender);
    }

    /// @dev Each supported asset must have a price from its source (or, failing that, a stored one).
    function _checkPrices(IERC20[] calldata assets) private {
        for (uint256 i = 0; i < assets.length; i++) {
            if (liquidTokenManager.tokenIsSupported(assets[i])) {
                if (tokenRegistryOracle.getTokenPrice(address(assets[i])) == 0) {
                    revert AssetPriceInvalid(address(assets[i]));
                }
            }
        }
    }

    function _depositOne(IERC20 asset, uint256 amount, address receiver) private returns (uint256 minted) {
        if (amount == 0) revert ZeroAmount();
        if (!liquidTokenManager.tokenIsSupported(asset)) revert UnsupportedAsset(asset);

        // What arrives may be less than `amount` (fee-on-transfer tokens): shares follow what arrived.
        uint256 before = asset.balanceOf(address(this));
        asset.safeTransferFrom(msg.sender, address(this), amount);
        uint256 received = asset.balanceOf(address(this)) - before;

        minted = calculateShares(asset, received);
        if (minted == 0) revert ZeroShares();

        uint256 accounted = assetBalances[address(asset)] + received;
        assetBalances[address(asset)] = accounted;
        uint256 held = asset.balanceOf(address(this));
        if (accounted > held) revert AssetBalanceOutOfSync(asset, accounted, held);

        _mint(receiver, minted);
        if (legacyEvents) {
            emit Deposit(msg.sender, receiver, asset, received, minted);
        } else {
            emit AssetDeposited(msg.sender, receiver, asset, received, minted);
        }
    }

    // ----- the manager's paths -----

    /// @notice Adds to the queued balances (assets on their way back from EigenLayer).
    function creditQueuedAssetBalances(IERC20[] calldata assets, uint256[] calldata amounts)
        external
        whenNotPaused
        onlyLiquidTokenManager
    {
        if (assets.length != amounts.length) revert ArrayLengthMismatch();
        for (uint256 i = 0; i < assets.length; i++) {
            queuedAssetBalances[address(assets[i])] += amounts[i];
        }
    }

    /// @notice Moves unstaked assets to the manager, which stakes them through a node.
    function transferAssets(IERC20[] calldata assetsToRetrieve, uint256[] calldata amounts)
        external
        whenNotPaused
        onlyLiquidTokenManager
    {
        if (assetsToRetrieve.length != amounts.length) revert ArrayLengthMismatch();
        for (uint256 i = 0; i < assetsToRetrieve.length; i++) {
            IERC20 asset = assetsToRetrieve[i];
            uint256 amount = amounts[i];
            if (!liquidTokenManager.tokenIsSupported(asset)) revert UnsupportedAsset(asset);
            uint256 available = assetBalances[address(asset)];
            // Mainnet v1 passes (available, required) here, the reverse of the names.
            if (amount > available) revert InsufficientBalance(asset, available, amount);
            assetBalances[address(asset)] = available - amount;
            asset.safeTransfer(address(liquidTokenManager), amount);
            uint256 held = asset.balanceOf(address(this));
            if (assetBalances[address(asset)] > held) {
                revert AssetBalanceOutOfSync(asset, assetBalances[address(asset)], held);
            }
            emit AssetTransferred(asset, amount, address(liquidTokenManager), msg.sender);
        }
    }

    /// @notice Devnet: sets unstaked assets aside as queued (they stay in this contract).
    function queueAssets(IERC20 asset, uint256 amount) external onlyLiquidTokenManager {
        uint256 available = assetBalances[address(asset)];
        if (amount > available) revert InsufficientBalance(asset, available, amount);
        assetBalances[address(asset)] = available - amount;
        queuedAssetBalances[address(asset)] += amount;
    }

    // ----- views -----

    function calculateShares(IERC20 asset, uint256 amount) public view returns (uint256) {
        uint256 value = liquidTokenManager.convertToUnitOfAccount(asset, amount);
        uint256 supply = totalSupply();
        uint256 assetsValue = totalAssets();
        if (supply == 0 || assetsValue == 0) return value;
        return (value * supply) / assetsValue;
    }

    function calculateAmount(IERC20 asset, uint256 shares) public view returns (uint256) {
        uint256 supply = totalSupply();
        uint256 assetsValue = totalAssets();
        uint256 value = (supply == 0 || assetsValue == 0) ? shares : (shares * assetsValue) / supply;
        return liquidTokenManager.convertFromUnitOfAccount(asset, value);
    }

    function totalAssets() public view returns (uint256 total) {
        IERC20[] memory tokens = liquidTokenManager.getSupportedTokens();
        for (uint256 i = 0; i < tokens.length; i++) {
            address token = address(tokens[i]);
            uint256 held = assetBalances[token] + queuedAssetBalances[token];
            uint256 staked = liquidTokenManager.getWithdrawableAssetBalance(tokens[i]);
            total += liquidTokenManager.convertToUnitOfAccount(tokens[i], held + staked);
        }
    }

    /// @notice Unstaked balances held by the LAT, in token units.
    function balanceAssets(IERC20[] calldata assetList) external view returns (uint256[] memory balances) {
        balances = new uint256[](assetList.length);
        for (uint256 i = 0; i < assetList.length; i++) {
            balances[i] = assetBalances[address(assetList[i])];
        }
    }

    /// @notice Balances set aside in the withdrawal queue, in token units.
    function balanceQueuedAssets(IERC20[] calldata assetList) external view returns (uint256[] memory balances) {
        balances = new uint256[](assetList.length);
        for (uint256 i = 0; i < assetList.length; i++) {
            balances[i] = queuedAssetBalances[address(assetList[i])];
        }
    }

    // ----- admin -----

    function pause() external onlyRole(PAUSER_ROLE) {
        _pause();
    }

    function unpause() external onlyRole(DEFAULT_ADMIN_ROLE) {
        _unpause();
    }

    /// @notice Devnet: burns the caller's own LAT (a stand-in for a withdrawal's burn).
    function burn(uint256 value) external {
        _burn(msg.sender, value);
    }

    /// @notice Devnet: emit the older `Deposit` event instead of `AssetDeposited`.
    function setLegacyEvents(bool enabled) external onlyRole(DEFAULT_ADMIN_ROLE) {
        legacyEvents = enabled;
    }
}
