// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20, Initializable} from "../Base.sol";
import {ERC20} from "../ERC20.sol";
import {Oz5Pausable, Oz5ReentrancyGuard, Oz5Roles} from "./Oz5.sol";
import {LiquidTokenManagerV102} from "./LiquidTokenManagerV102.sol";

/// @notice The LAT of an older deployment (upstream tags up to v1.0.2; OpenZeppelin 5's custom
/// errors as up to v1.0.1 and on Holesky v1): no `tokenRegistryOracle()` and no price refresh inside
/// `deposit`; a paused deposit reverts with `EnforcedPause()`. Deposits, shares and balances work
/// as in the current LiquidToken (shares follow the amount received); totalAssets values the
/// staked part with the manager's `getStakedAssetBalance`.
///
/// Devnet-only additions: `burn`, `queueAssets`, `setLegacyEvents` (as on the current LAT).
contract LiquidTokenV102 is Initializable, Oz5Roles, Oz5Pausable, Oz5ReentrancyGuard, ERC20 {
    struct Init {
        string name;
        string symbol;
        LiquidTokenManagerV102 liquidTokenManager;
        address initialOwner;
        address pauser;
    }

    bytes32 public constant PAUSER_ROLE = keccak256("PAUSER_ROLE");

    LiquidTokenManagerV102 public liquidTokenManager;
    mapping(address => uint256) public assetBalances;
    mapping(address => uint256) public queuedAssetBalances;
    bool public legacyEvents;

    event AssetDeposited(
        address indexed sender, address indexed receiver, address indexed asset, uint256 amount, uint256 shares
    );
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
    error TransferFailed();

    modifier onlyLiquidTokenManager() {
        if (msg.sender != address(liquidTokenManager)) revert NotLiquidTokenManager(msg.sender);
        _;
    }

    function initialize(Init calldata init) external initializer {
        if (init.initialOwner == address(0) || init.pauser == address(0)) revert ZeroAddress();
        if (address(init.liquidTokenManager) == address(0)) revert ZeroAddress();
        _initERC20(init.name, init.symbol, 18);
        _grantRole(DEFAULT_ADMIN_ROLE, init.initialOwner);
        _grantRole(PAUSER_ROLE, init.pauser);
        liquidTokenManager = init.liquidTokenManager;
    }

    function deposit(address[] calldata assets, uint256[] calldata amounts, address receiver)
        external
        nonReentrant
        whenNotPaused
        returns (uint256[] memory shares)
    {
        if (assets.length != amounts.length) revert ArrayLengthMismatch();
        shares = new uint256[](assets.length);
        for (uint256 i = 0; i < assets.length; i++) {
            address asset = assets[i];
            if (amounts[i] == 0) revert ZeroAmount();
            if (!liquidTokenManager.tokenIsSupported(asset)) revert UnsupportedAsset(asset);
            uint256 before = IERC20(asset).balanceOf(address(this));
            if (!IERC20(asset).transferFrom(msg.sender, address(this), amounts[i])) revert TransferFailed();
            uint256 received = IERC20(asset).balanceOf(address(this)) - before;
            uint256 minted = calculateShares(asset, received);
            if (minted == 0) revert ZeroShares();
            uint256 accounted = assetBalances[asset] + received;
            assetBalances[asset] = accounted;
            uint256 held = IERC20(asset).balanceOf(address(this));
            if (accounted > held) revert AssetBalanceOutOfSync(asset, accounted, held);
            _mint(receiver, minted);
            shares[i] = minted;
            if (legacyEvents) {
                emit Deposit(msg.sender, receiver, asset, received, minted);
            } else {
                emit AssetDeposited(msg.sender, receiver, asset, received, minted);
            }
        }
    }

    function creditQueuedAssetBalances(address[] calldata assets, uint256[] calldata amounts)
        external
        whenNotPaused
        onlyLiquidTokenManager
    {
        if (assets.length != amounts.length) revert ArrayLengthMismatch();
        for (uint256 i = 0; i < assets.length; i++) {
            queuedAssetBalances[assets[i]] += amounts[i];
        }
    }

    function transferAssets(address[] calldata assetsToRetrieve, uint256[] calldata amounts)
        external
        whenNotPaused
        onlyLiquidTokenManager
    {
        if (assetsToRetrieve.length != amounts.length) revert ArrayLengthMismatch();
        for (uint256 i = 0; i < assetsToRetrieve.length; i++) {
            address asset = assetsToRetrieve[i];
            uint256 available = assetBalances[asset];
            if (amounts[i] > available) revert InsufficientBalance(asset, available, amounts[i]);
            assetBalances[asset] = available - amounts[i];
            if (!IERC20(asset).transfer(address(liquidTokenManager), amounts[i])) revert TransferFailed();
            emit AssetTransferred(asset, amounts[i], address(liquidTokenManager), msg.sender);
        }
    }

    /// @notice Devnet: sets unstaked assets aside as queued (they stay in this contract).
    function queueAssets(address asset, uint256 amount) external onlyLiquidTokenManager {
        uint256 available = assetBalances[asset];
        if (amount > available) revert InsufficientBalance(asset, available, amount);
        assetBalances[asset] = available - amount;
        queuedAssetBalances[asset] += amount;
    }

    function calculateShares(address asset, uint256 amount) public view returns (uint256) {
        uint256 value = liquidTokenManager.convertToUnitOfAccount(asset, amount);
        uint256 assetsValue = totalAssets();
        if (totalSupply == 0 || assetsValue == 0) return value;
        return (value * totalSupply) / assetsValue;
    }

    function calculateAmount(address asset, uint256 shares) external view returns (uint256) {
        uint256 assetsValue = totalAssets();
        uint256 value = (totalSupply == 0 || assetsValue == 0) ? shares : (shares * assetsValue) / totalSupply;
        return liquidTokenManager.convertFromUnitOfAccount(asset, value);
    }

    function totalAssets() public view returns (uint256 total) {
        address[] memory tokens = liquidTokenManager.getSupportedTokens();
        for (uint256 i = 0; i < tokens.length; i++) {
            uint256 held = assetBalances[tokens[i]] + queuedAssetBalances[tokens[i]];
            uint256 staked = liquidTokenManager.getStakedAssetBalance(tokens[i]);
            total += liquidTokenManager.convertToUnitOfAccount(tokens[i], held + staked);
        }
    }

    function balanceAssets(address[] calldata assetList) external view returns (uint256[] memory balances) {
        balances = new uint256[](assetList.length);
        for (uint256 i = 0; i < assetList.length; i++) {
            balances[i] = assetBalances[assetList[i]];
        }
    }

    function balanceQueuedAssets(address[] calldata assetList) external view returns (uint256[] memory balances) {
        balances = new uint256[](assetList.length);
        for (uint256 i = 0; i < assetList.length; i++) {
            balances[i] = queuedAssetBalances[assetList[i]];
        }
    }

    function pause() external onlyRole(PAUSER_ROLE) {
        _pause();
    }

    function unpause() external onlyRole(DEFAULT_ADMIN_ROLE) {
        _unpause();
    }

    /// @notice Devnet: burns the caller's own LAT.
    function burn(uint256 value) external {
        _burn(msg.sender, value);
    }

    /// @notice Devnet: emit the older `Deposit` event instead of `AssetDeposited`.
    function setLegacyEvents(bool enabled) external onlyRole(DEFAULT_ADMIN_ROLE) {
        legacyEvents = enabled;
    }
}
