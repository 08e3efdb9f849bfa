// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {AccessControlUpgradeable} from "@openzeppelin/contracts-upgradeable/access/AccessControlUpgradeable.sol";
import {ERC20Upgradeable} from "@openzeppelin/contracts-upgradeable/token/ERC20/ERC20Upgradeable.sol";
import {PausableUpgradeable} from "@openzeppelin/contracts-upgradeable/security/PausableUpgradeable.sol";
import {ReentrancyGuardUpgradeable} from "@openzeppelin/contracts-upgradeable/security/ReentrancyGuardUpgradeable.sol";

import {AccessHooks, ERC20Hooks, PauseHooks} from "./Hooks.sol";
import {LiquidTokenBase} from "./LiquidTokenBase.sol";
import {LiquidTokenManager} from "./LiquidTokenManager.sol";
import {TokenRegistryOracle} from "./TokenRegistryOracle.sol";
import {SafeTransfers} from "./Transfers.sol";

/// @notice The LAT as Mainnet v1 deploys it: an 18-decimal ERC-20 (OpenZeppelin 4.9
/// upgradeable, behind a TransparentUpgradeableProxy) whose shares are minted against deposits
/// of supported tokens, valued in the LAT's unit of account; what it shares with the older
/// variant (the ledger, shares, the manager's paths) is in LiquidTokenBase.
///
/// A deposit first asks the oracle whether prices are stale; when they are, it has the oracle
/// refresh every price (`updateAllPricesIfNeeded`) before anything is minted, and reverts with
/// `PriceUpdateFailed()` when the refresh fails, `PriceUpdateRejected()` when it refused,
/// `PricesRemainStale()` when prices are still stale after it. Pausing is OpenZeppelin 4.9's:
/// a paused deposit reverts with the string "Pausable: paused". Token transfers go through
/// SafeERC20, so a token's own revert (its custom error or string) comes through unchanged.
/// `transferAssets` refuses an unsupported token and checks the ledger after each transfer.
///
/// Devnet-only additions (not on Mainnet v1): `burn`, `queueAssets` (unstaked set aside as
/// queued) and `setLegacyEvents` (emit the older `Deposit` event in place of `AssetDeposited`).
contract LiquidToken is
    AccessControlUpgradeable,
    ERC20Upgradeable,
    PausableUpgradeable,
    ReentrancyGuardUpgradeable,
    SafeTransfers,
    LiquidTokenBase
{
    struct Init {
        string name;
        string symbol;
        LiquidTokenManager liquidTokenManager;
        TokenRegistryOracle tokenRegistryOracle;
        address initialOwner;
        address pauser;
    }

    TokenRegistryOracle public tokenRegistryOracle;

    event PricesUpdatedBeforeDeposit(address indexed depositor);

    error PriceUpdateFailed();
    error PriceUpdateRejected();
    error PricesRemainStale();
    error AssetPriceInvalid(address token);

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
        _initLiquidToken(init.liquidTokenManager, init.initialOwner, init.pauser);
        tokenRegistryOracle = init.tokenRegistryOracle;
    }

    // ----- deposits -----

    function deposit(address[] calldata assets, uint256[] calldata amounts, address receiver)
        external
        nonReentrant
        whenNotPaused
        returns (uint256[] memory shares)
    {
        // The lengths are checked before the oracle is asked anything.
        if (assets.length != amounts.length) revert ArrayLengthMismatch();
        _refreshStalePrices();
        _checkPrices(assets);
        return _deposit(assets, amounts, receiver);
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
    function _checkPrices(address[] calldata assets) private {
        for (uint256 i = 0; i < assets.length; i++) {
            if (liquidTokenManager.tokenIsSupported(assets[i])) {
                if (tokenRegistryOracle.getTokenPrice(assets[i]) == 0) revert AssetPriceInvalid(assets[i]);
            }
        }
    }

    // ----- LiquidTokenBase's hooks -----

    function _stakedBalance(address token) internal view override returns (uint256) {
        return LiquidTokenManager(address(liquidTokenManager)).getWithdrawableAssetBalance(token);
    }

    function _strictTransfers() internal pure override returns (bool) {
        return true;
    }

    // ----- the hooks of LiquidTokenBase's foundations, by OpenZeppelin 4.9 -----

    function totalSupply() public view override(ERC20Upgradeable, ERC20Hooks) returns (uint256) {
        return ERC20Upgradeable.totalSupply();
    }

    function _mint(address account, uint256 amount) internal override(ERC20Upgradeable, ERC20Hooks) {
        ERC20Upgradeable._mint(account, amount);
    }

    function _burn(address account, uint256 amount) internal override(ERC20Upgradeable, ERC20Hooks) {
        ERC20Upgradeable._burn(account, amount);
    }

    function _checkRole(bytes32 role) internal view override(AccessControlUpgradeable, AccessHooks) {
        AccessControlUpgradeable._checkRole(role);
    }

    function _grantRole(bytes32 role, address account) internal override(AccessControlUpgradeable, AccessHooks) {
        AccessControlUpgradeable._grantRole(role, account);
    }

    function _requireNotPaused() internal view override(PausableUpgradeable, PauseHooks) {
        PausableUpgradeable._requireNotPaused();
    }

    function _pause() internal override(PausableUpgradeable, PauseHooks) {
        PausableUpgradeable._pause();
    }

    function _unpause() internal override(PausableUpgradeable, PauseHooks) {
        PausableUpgradeable._unpause();
    }
}
