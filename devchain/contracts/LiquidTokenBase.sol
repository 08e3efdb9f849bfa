// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "./Base.sol";
import {AccessHooks, ERC20Hooks, PauseHooks, TransferHooks} from "./Hooks.sol";
import {LiquidTokenManagerBase} from "./LiquidTokenManagerBase.sol";

/// @notice What the devnet's two LATs share, Mainnet v1's LiquidToken and the older
/// LiquidTokenV102: the ledger of unstaked and queued balances, deposits, the manager's paths, the
/// share-price views, pausing, and the devnet-only additions (`burn`, `queueAssets`,
/// `setLegacyEvents`). Tokens are addresses here; Mainnet v1 types them IERC20, the same ABI.
///
/// A deposit credits what actually arrived (fee-on-transfer tokens): shares = value * totalSupply /
/// totalAssets (1:1 while either is zero), value being the amount received in the unit of account.
/// totalAssets converts, per supported token, the unstaked, queued and staked-withdrawable balances
/// to the unit of account (one conversion of their sum).
///
/// A variant brings its foundations (access control, pausing, ERC-20 and token transfers: see
/// Hooks.sol), its `initialize`, its `deposit` (which carries its own reentrancy guard and calls
/// `_deposit`), the manager's view of the staked balance (`_stakedBalance`), and says whether
/// `transferAssets` checks the token and the ledger (`_strictTransfers`).
abstract contract LiquidTokenBase is AccessHooks, PauseHooks, ERC20Hooks, TransferHooks {
    bytes32 public constant PAUSER_ROLE = keccak256("PAUSER_ROLE");

    LiquidTokenManagerBase public liquidTokenManager;
    /// Unstaked balances held by this contract, per asset.
    mapping(address => uint256) public assetBalances;
    /// Balances set aside in the withdrawal queue, per asset.
    mapping(address => uint256) public queuedAssetBalances;
    /// Devnet: emit `Deposit` instead of `AssetDeposited`, as older deployments do.
    bool public legacyEvents;

    event AssetDeposited(
        address indexed sender, address indexed receiver, address indexed asset, uint256 amount, uint256 shares
    );
    /// The event older deployments emit for a deposit, with the same fields.
    event Deposit(
        address indexed sender, address indexed receiver, address indexed asset, uint256 amount, uint256 shares
    );
    event AssetTransferred(address indexed asset, uint256 amount, address indexed destination, address indexed initiator);

    error UnsupportedAsset(address asset);
    error ZeroAddress();
    error ZeroAmount();
    error ZeroShares();
    error NotLiquidTokenManager(address sender);
    error ArrayLengthMismatch();
    error InsufficientBalance(address asset, uint256 required, uint256 available);
    error AssetBalanceOutOfSync(address asset, uint256 accountingBalance, uint256 actualBalance);

    modifier onlyLiquidTokenManager() {
        if (msg.sender != address(liquidTokenManager)) revert NotLiquidTokenManager(msg.sender);
        _;
    }

    /// @dev The part of `initialize` both variants share, after their own checks.
    function _initLiquidToken(LiquidTokenManagerBase manager, address initialOwner, address pauser) internal {
        _grantRole(ADMIN_ROLE, initialOwner);
        _grantRole(PAUSER_ROLE, pauser);
        liquidTokenManager = manager;
    }

    // ----- what a variant supplies -----

    /// @dev The nodes' withdrawable stake of `token`, in token units, as the variant's manager
    /// tells it.
    function _stakedBalance(address token) internal view virtual returns (uint256);

    /// @dev Whether `transferAssets` refuses an unsupported token and checks the ledger against
    /// the balance after each transfer (Mainnet v1 does, v1.0.2 does not).
    function _strictTransfers() internal pure virtual returns (bool);

    // ----- deposits -----

    /// @dev A variant's `deposit`, after its guards: mints shares for each asset in turn.
    function _deposit(address[] calldata assets, uint256[] calldata amounts, address receiver)
        internal
        returns (uint256[] memory shares)
    {
        if (assets.length != amounts.length) revert ArrayLengthMismatch();
        shares = new uint256[](assets.length);
        for (uint256 i = 0; i < assets.length; i++) {
            shares[i] = _depositOne(assets[i], amounts[i], receiver);
        }
    }

    function _depositOne(address asset, uint256 amount, address receiver) private returns (uint256 minted) {
        if (amount == 0) revert ZeroAmount();
        if (!liquidTokenManager.tokenIsSupported(asset)) revert UnsupportedAsset(asset);

        // What arrives may be less than `amount` (fee-on-transfer tokens): shares follow what arrived.
        uint256 before = IERC20(asset).balanceOf(address(this));
        _pullAsset(asset, msg.sender, amount);
        uint256 received = IERC20(asset).balanceOf(address(this)) - before;

        minted = calculateShares(asset, received);
        if (minted == 0) revert ZeroShares();

        assetBalances[asset] += received;
        _checkLedger(asset);

        _mint(receiver, minted);
        if (legacyEvents) {
            emit Deposit(msg.sender, receiver, asset, received, minted);
        } else {
            emit AssetDeposited(msg.sender, receiver, asset, received, minted);
        }
    }

    /// @dev The ledger may not count more of `asset` than this contract holds.
    function _checkLedger(address asset) private view {
        uint256 held = IERC20(asset).balanceOf(address(this));
        if (assetBalances[asset] > held) revert AssetBalanceOutOfSync(asset, assetBalances[asset], held);
    }

    // ----- the manager's paths -----

    /// @notice Adds to the queued balances (assets on their way back from EigenLayer).
    function creditQueuedAssetBalances(address[] calldata assets, uint256[] calldata amounts)
        external
        whenUnpaused
        onlyLiquidTokenManager
    {
        if (assets.length != amounts.length) revert ArrayLengthMismatch();
        for (uint256 i = 0; i < assets.length; i++) {
            queuedAssetBalances[assets[i]] += amounts[i];
        }
    }

    /// @notice Moves unstaked assets to the manager, which stakes them through a node.
    function transferAssets(address[] calldata assetsToRetrieve, uint256[] calldata amounts)
        external
        whenUnpaused
        onlyLiquidTokenManager
    {
        if (assetsToRetrieve.length != amounts.length) revert ArrayLengthMismatch();
        bool strict = _strictTransfers();
        for (uint256 i = 0; i < assetsToRetrieve.length; i++) {
            address asset = assetsToRetrieve[i];
            uint256 amount = amounts[i];
            if (strict && !liquidTokenManager.tokenIsSupported(asset)) revert UnsupportedAsset(asset);
            uint256 available = assetBalances[asset];
            // Upstream passes (available, required) here, the reverse of the names.
            if (amount > available) revert InsufficientBalance(asset, available, amount);
            assetBalances[asset] = available - amount;
            _sendAsset(asset, address(liquidTokenManager), amount);
            if (strict) _checkLedger(asset);
            emit AssetTransferred(asset, amount, address(liquidTokenManager), msg.sender);
        }
    }

    /// @notice Devnet: sets unstaked assets aside as queued (they stay in this contract).
    function queueAssets(address asset, uint256 amount) external onlyLiquidTokenManager {
        uint256 available = assetBalances[asset];
        if (amount > available) revert InsufficientBalance(asset, available, amount);
        assetBalances[asset] = available - amount;
        queuedAssetBalances[asset] += amount;
    }

    // ----- views -----

    function calculateShares(address asset, uint256 amount) public view returns (uint256) {
        uint256 value = liquidTokenManager.convertToUnitOfAccount(asset, amount);
        uint256 supply = totalSupply();
        uint256 assetsValue = totalAssets();
        if (supply == 0 || assetsValue == 0) return value;
        return (value * supply) / assetsValue;
    }

    function calculateAmount(address asset, uint256 shares) public view returns (uint256) {
        uint256 supply = totalSupply();
        uint256 assetsValue = totalAssets();
        uint256 value = (supply == 0 || assetsValue == 0) ? shares : (shares * assetsValue) / supply;
        return liquidTokenManager.convertFromUnitOfAccount(asset, value);
    }

    function totalAssets() public view returns (uint256 total) {
        address[] memory tokens = liquidTokenManager.getSupportedTokens();
        for (uint256 i = 0; i < tokens.length; i++) {
            uint256 held = assetBalances[tokens[i]] + queuedAssetBalances[tokens[i]];
            uint256 staked = _stakedBalance(tokens[i]);
            total += liquidTokenManager.convertToUnitOfAccount(tokens[i], held + staked);
        }
    }

    /// @notice Unstaked balances held by the LAT, in token units.
    function balanceAssets(address[] calldata assetList) external view returns (uint256[] memory balances) {
        balances = new uint256[](assetList.length);
        for (uint256 i = 0; i < assetList.length; i++) {
            balances[i] = assetBalances[assetList[i]];
        }
    }

    /// @notice Balances set aside in the withdrawal queue, in token units.
    function balanceQueuedAssets(address[] calldata assetList) external view returns (uint256[] memory balances) {
        balances = new uint256[](assetList.length);
        for (uint256 i = 0; i < assetList.length; i++) {
            balances[i] = queuedAssetBalances[assetList[i]];
        }
    }

    // ----- admin -----

    function pause() external restrictedTo(PAUSER_ROLE) {
        _pause();
    }

    function unpause() external restrictedTo(ADMIN_ROLE) {
        _unpause();
    }

    /// @notice Devnet: burns the caller's own LAT (a stand-in for a withdrawal's burn).
    function burn(uint256 value) external {
        _burn(msg.sender, value);
    }

    /// @notice Devnet: emit the older `Deposit` event instead of `AssetDeposited`.
    function setLegacyEvents(bool enabled) external restrictedTo(ADMIN_ROLE) {
        legacyEvents = enabled;
    }
}
