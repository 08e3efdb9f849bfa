// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20, Initializable, Owned} from "./Base.sol";
import {ERC20} from "./ERC20.sol";
import {LiquidTokenManager} from "./LiquidTokenManager.sol";
import {TokenRegistryOracle} from "./TokenRegistryOracle.sol";

/// @notice The LAT: an 18-decimal ERC-20 whose shares are minted against deposits of supported
/// tokens, valued in the LAT's unit of account. Lives behind a TransparentProxy.
///
/// shares = convertToUnitOfAccount(asset, amount) * totalSupply / totalAssets (1:1 while the
/// supply is zero), where totalAssets sums, over the supported tokens, the unstaked, queued and
/// staked (withdrawable, in underlying) balances converted to the unit of account.
///
/// Deposits are refused with `EnforcedPause()` while `paused()`. A LAT initialised with
/// `legacyEvents` emits the older `Deposit` event instead of `AssetDeposited`.
contract LiquidToken is Initializable, Owned, ERC20 {
    LiquidTokenManager public liquidTokenManager;
    TokenRegistryOracle public tokenRegistryOracle;
    bool public paused;
    bool public legacyEvents;
    mapping(address asset => uint256) private _assetBalances;
    mapping(address asset => uint256) private _queuedAssetBalances;

    event AssetDeposited(
        address indexed sender, address indexed receiver, address indexed asset, uint256 amount, uint256 shares
    );
    event Deposit(
        address indexed sender, address indexed receiver, address indexed asset, uint256 amount, uint256 shares
    );
    event AssetTransferred(address indexed asset, uint256 amount, address indexed destination);
    event AssetQueued(address indexed asset, uint256 amount);
    event Paused(address account);
    event Unpaused(address account);

    error ArrayLengthMismatch();
    error ZeroAmount();
    error UnsupportedAsset(address asset);
    error ZeroShares();
    /// The deposit moved `actualAmount` into the LAT instead of the `expectedAmount` sent.
    error AssetBalanceOutOfSync(address asset, uint256 expectedAmount, uint256 actualAmount);
    error EnforcedPause();
    error ExpectedPause();
    error NotLiquidTokenManager(address caller);
    error InsufficientAssetBalance(address asset, uint256 available, uint256 required);
    error TransferFailed();

    modifier onlyLiquidTokenManager() {
        if (msg.sender != address(liquidTokenManager)) revert NotLiquidTokenManager(msg.sender);
        _;
    }

    function initialize(
        string calldata name_,
        string calldata symbol_,
        address owner_,
        LiquidTokenManager manager,
        TokenRegistryOracle oracle,
        bool legacyEvents_
    ) external initializer {
        _initERC20(name_, symbol_, 18);
        _transferOwnership(owner_);
        liquidTokenManager = manager;
        tokenRegistryOracle = oracle;
        legacyEvents = legacyEvents_;
    }

    function deposit(address[] calldata assets, uint256[] calldata amounts, address receiver)
        external
        returns (uint256[] memory shares)
    {
        if (paused) revert EnforcedPause();
        if (assets.length != amounts.length) revert ArrayLengthMismatch();
        shares = new uint256[](assets.length);
        for (uint256 i = 0; i < assets.length; i++) {
            address asset = assets[i];
            uint256 amount = amounts[i];
            if (amount == 0) revert ZeroAmount();
            if (!liquidTokenManager.tokenIsSupported(asset)) revert UnsupportedAsset(asset);
            uint256 minted = calculateShares(asset, amount);
            if (minted == 0) revert ZeroShares();

            uint256 before = IERC20(asset).balanceOf(address(this));
            if (!IERC20(asset).transferFrom(msg.sender, address(this), amount)) revert TransferFailed();
            uint256 received = IERC20(asset).balanceOf(address(this)) - before;
            if (received != amount) revert AssetBalanceOutOfSync(asset, amount, received);

            _assetBalances[asset] += amount;
            _mint(receiver, minted);
            shares[i] = minted;
            if (legacyEvents) {
                emit Deposit(msg.sender, receiver, asset, amount, minted);
            } else {
                emit AssetDeposited(msg.sender, receiver, asset, amount, minted);
            }
        }
    }

    // ----- views -----

    function totalAssets() public view returns (uint256 total) {
        address[] memory tokens = liquidTokenManager.getSupportedTokens();
        for (uint256 i = 0; i < tokens.length; i++) {
            uint256 balance = liquidTokenManager.getWithdrawableAssetBalance(tokens[i]);
            total += liquidTokenManager.convertToUnitOfAccount(tokens[i], balance);
        }
    }

    function calculateShares(address asset, uint256 amount) public view returns (uint256) {
        uint256 value = liquidTokenManager.convertToUnitOfAccount(asset, amount);
        uint256 supply = totalSupply;
        uint256 assetsValue = totalAssets();
        if (supply == 0 || assetsValue == 0) return value;
        return (value * supply) / assetsValue;
    }

    function calculateAmount(address asset, uint256 shares) external view returns (uint256) {
        uint256 supply = totalSupply;
        uint256 value = supply == 0 ? shares : (shares * totalAssets()) / supply;
        return liquidTokenManager.convertFromUnitOfAccount(asset, value);
    }

    /// @notice Unstaked balances held by the LAT, in token units.
    function balanceAssets(address[] calldata assets) external view returns (uint256[] memory balances) {
        balances = new uint256[](assets.length);
        for (uint256 i = 0; i < assets.length; i++) {
            balances[i] = _assetBalances[assets[i]];
        }
    }

    /// @notice Balances set aside in the withdrawal queue, in token units.
    function balanceQueuedAssets(address[] calldata assets) external view returns (uint256[] memory balances) {
        balances = new uint256[](assets.length);
        for (uint256 i = 0; i < assets.length; i++) {
            balances[i] = _queuedAssetBalances[assets[i]];
        }
    }

    /// @notice Burns the caller's own LAT (a stand-in for the upstream withdrawal's burn).
    function burn(uint256 value) external {
        _burn(msg.sender, value);
    }

    // ----- admin -----

    function pause() external onlyOwner {
        if (paused) revert EnforcedPause();
        paused = true;
        emit Paused(msg.sender);
    }

    function unpause() external onlyOwner {
        if (!paused) revert ExpectedPause();
        paused = false;
        emit Unpaused(msg.sender);
    }

    /// @notice Moves unstaked assets out (to a staker node), on the manager's behalf.
    function transferAssets(address[] calldata assets, uint256[] calldata amounts, address destination)
        external
        onlyLiquidTokenManager
    {
        if (assets.length != amounts.length) revert ArrayLengthMismatch();
        for (uint256 i = 0; i < assets.length; i++) {
            _takeUnstaked(assets[i], amounts[i]);
            if (!IERC20(assets[i]).transfer(destination, amounts[i])) revert TransferFailed();
            emit AssetTransferred(assets[i], amounts[i], destination);
        }
    }

    /// @notice Sets unstaked assets aside as queued for withdrawal (they stay in this contract).
    function queueAssets(address asset, uint256 amount) external onlyLiquidTokenManager {
        _takeUnstaked(asset, amount);
        _queuedAssetBalances[asset] += amount;
        emit AssetQueued(asset, amount);
    }

    function _takeUnstaked(address asset, uint256 amount) private {
        uint256 available = _assetBalances[asset];
        if (amount > available) revert InsufficientAssetBalance(asset, available, amount);
        _assetBalances[asset] = available - amount;
    }
}
