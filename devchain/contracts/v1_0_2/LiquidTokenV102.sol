// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Initializable} from "../Base.sol";
import {ERC20} from "../ERC20.sol";
import {LiquidTokenBase} from "../LiquidTokenBase.sol";
import {PlainTransfers} from "../Transfers.sol";
import {Oz5Pausable, Oz5ReentrancyGuard, Oz5Roles} from "./Oz5.sol";
import {LiquidTokenManagerV102} from "./LiquidTokenManagerV102.sol";

/// @notice The LAT of an older deployment (upstream tags up to v1.0.2; OpenZeppelin 5's custom
/// errors as up to v1.0.1 and on Holesky v1): no `tokenRegistryOracle()` and no price refresh inside
/// `deposit`; a paused deposit reverts with `EnforcedPause()`. Deposits, shares and balances work
/// as in the current LiquidToken (LiquidTokenBase); totalAssets values the staked part with the
/// manager's `getStakedAssetBalance`. Tokens move by plain calls (`TransferFailed()` on `false`),
/// and `transferAssets` neither refuses an unsupported token nor checks the ledger after it.
///
/// Devnet-only additions: `burn`, `queueAssets`, `setLegacyEvents` (as on the current LAT).
contract LiquidTokenV102 is
    Initializable,
    Oz5Roles,
    Oz5Pausable,
    Oz5ReentrancyGuard,
    ERC20,
    PlainTransfers,
    LiquidTokenBase
{
    struct Init {
        string name;
        string symbol;
        LiquidTokenManagerV102 liquidTokenManager;
        address initialOwner;
        address pauser;
    }

    function initialize(Init calldata init) external initializer {
        if (init.initialOwner == address(0) || init.pauser == address(0)) revert ZeroAddress();
        if (address(init.liquidTokenManager) == address(0)) revert ZeroAddress();
        _initERC20(init.name, init.symbol, 18);
        _initLiquidToken(init.liquidTokenManager, init.initialOwner, init.pauser);
    }

    function deposit(address[] calldata assets, uint256[] calldata amounts, address receiver)
        external
        nonReentrant
        whenNotPaused
        returns (uint256[] memory shares)
    {
        return _deposit(assets, amounts, receiver);
    }

    function _stakedBalance(address token) internal view override returns (uint256) {
        return LiquidTokenManagerV102(address(liquidTokenManager)).getStakedAssetBalance(token);
    }

    function _strictTransfers() internal pure override returns (bool) {
        return false;
    }
}
