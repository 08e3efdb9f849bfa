"""Why a deposit would fail, in words a wallet can show, from the decoded revert
(chain/reverts.py): a short stable code for programs and a sentence for people.

The reverts are those of the LAT contracts as deployed (upstream's Mainnet v1 is built on
OpenZeppelin 4.9 and reverts with strings, such as "Pausable: paused"; older deployments on
OpenZeppelin 5 revert with custom errors, such as `EnforcedPause()`) and those of the tokens a
deposit moves, which come through the LAT unchanged (OpenZeppelin 5's `ERC20InsufficientAllowance`,
OpenZeppelin 4's "ERC20: insufficient allowance", stETH's "ALLOWANCE_EXCEEDED", ...).
"""

from __future__ import annotations

from dataclasses import dataclass

from chain import reverts
from chain.reverts import Revert

PAUSED = "paused"
PRICE_REFRESH_FAILED = "price_refresh_failed"
PRICES_STALE = "prices_stale"
ASSET_PRICE_INVALID = "asset_price_invalid"
UNSUPPORTED_ASSET = "unsupported_asset"
ZERO_AMOUNT = "zero_amount"
ZERO_SHARES = "zero_shares"
ARRAY_LENGTH_MISMATCH = "array_length_mismatch"
BALANCE_OUT_OF_SYNC = "balance_out_of_sync"
INSUFFICIENT_BALANCE = "insufficient_balance"
INSUFFICIENT_ALLOWANCE = "insufficient_allowance"
REENTRANT_CALL = "reentrant_call"
TOKEN_TRANSFER_FAILED = "token_transfer_failed"
PANIC = "panic"
NO_CONTRACT = "no_contract"
NO_REASON = "no_reason"
UNKNOWN_ERROR = "unknown_error"
OTHER = "other"

REASON_CODES = (
    PAUSED, PRICE_REFRESH_FAILED, PRICES_STALE, ASSET_PRICE_INVALID, UNSUPPORTED_ASSET,
    ZERO_AMOUNT, ZERO_SHARES, ARRAY_LENGTH_MISMATCH, BALANCE_OUT_OF_SYNC, INSUFFICIENT_BALANCE,
    INSUFFICIENT_ALLOWANCE, REENTRANT_CALL, TOKEN_TRANSFER_FAILED, PANIC, NO_CONTRACT, NO_REASON,
    UNKNOWN_ERROR, OTHER,
)  # fmt: skip

# Error(string) reverts, lower-cased, by what they mean. OpenZeppelin 4's ERC-20 and Pausable,
# and the strings of tokens LATs accept (stETH: BALANCE_EXCEEDED, ALLOWANCE_EXCEEDED).
_STRINGS: dict[str, str] = {
    "pausable: paused": PAUSED,
    "erc20: transfer amount exceeds balance": INSUFFICIENT_BALANCE,
    "erc20: insufficient allowance": INSUFFICIENT_ALLOWANCE,
    "erc20: transfer amount exceeds allowance": INSUFFICIENT_ALLOWANCE,
    "balance_exceeded": INSUFFICIENT_BALANCE,
    "allowance_exceeded": INSUFFICIENT_ALLOWANCE,
    "reentrancyguard: reentrant call": REENTRANT_CALL,
    "safeerc20: low-level call failed": TOKEN_TRANSFER_FAILED,
    "safeerc20: erc20 operation did not succeed": TOKEN_TRANSFER_FAILED,
}

# Custom errors by name.
_ERRORS: dict[str, str] = {
    "EnforcedPause": PAUSED,
    "PriceUpdateFailed": PRICE_REFRESH_FAILED,
    "PriceUpdateRejected": PRICE_REFRESH_FAILED,
    "PricesRemainStale": PRICES_STALE,
    "AssetPriceInvalid": ASSET_PRICE_INVALID,
    "UnsupportedAsset": UNSUPPORTED_ASSET,
    "ZeroAmount": ZERO_AMOUNT,
    "ZeroShares": ZERO_SHARES,
    "ArrayLengthMismatch": ARRAY_LENGTH_MISMATCH,
    "AssetBalanceOutOfSync": BALANCE_OUT_OF_SYNC,
    "ERC20InsufficientBalance": INSUFFICIENT_BALANCE,
    "ERC20InsufficientAllowance": INSUFFICIENT_ALLOWANCE,
    "ReentrancyGuardReentrantCall": REENTRANT_CALL,
    "SafeERC20FailedOperation": TOKEN_TRANSFER_FAILED,
}


@dataclass(frozen=True)
class DepositFailure:
    code: str  # one of REASON_CODES
    reason: str  # a sentence a wallet can show
    revert: str  # the revert as decoded ("Pausable: paused", "UnsupportedAsset(0x…)")
    revert_data: str  # the raw revert data, 0x-hex ("0x" when the node gave none)


def _arg(revert: Revert, index: int) -> str:
    return str(revert.args[index]) if len(revert.args) > index else "the token"


def deposit_failure(revert: Revert | None, *, text: str = "") -> DepositFailure:
    """What a wallet can show for a deposit that would revert with `revert` (None: the call
    failed without one, `text` saying how, such as there being no contract at the address)."""
    if revert is None:
        return DepositFailure(
            NO_CONTRACT,
            "There is no LAT contract at this address on its chain: nothing would be deposited.",
            text,
            "0x",
        )
    code, words = _words(revert)
    return DepositFailure(code, words, revert.text, revert.data)


def _words(revert: Revert) -> tuple[str, str]:
    if revert.kind == reverts.EMPTY:
        return NO_REASON, "The deposit would fail without the contracts giving a reason."
    if revert.kind == reverts.UNKNOWN:
        return UNKNOWN_ERROR, (
            f"The deposit would fail with an error this service does not know "
            f"(selector {revert.selector})."
        )
    if revert.kind == reverts.PANIC:
        return PANIC, f"The deposit would fail on an internal error of a contract: {revert.text}."
    code = (
        _STRINGS.get(revert.message.strip().lower(), OTHER)
        if revert.kind == reverts.STRING
        else _ERRORS.get(revert.name, OTHER)
    )
    return code, _sentence(code, revert)


def _sentence(code: str, revert: Revert) -> str:
    if code == PAUSED:
        return "The LAT is paused: it accepts no deposits until it is unpaused."
    if code == PRICE_REFRESH_FAILED:
        return (
            "The LAT's prices are stale and refreshing them failed (a token's price source gave "
            "no price): it accepts no deposits until its prices are updated."
        )
    if code == PRICES_STALE:
        return "The LAT's prices are still stale after refreshing them: try again later."
    if code == ASSET_PRICE_INVALID:
        return f"The LAT has no valid price for {_arg(revert, 0)}: it refuses deposits of it."
    if code == UNSUPPORTED_ASSET:
        return f"{_arg(revert, 0)} is not a token this LAT accepts."
    if code == ZERO_AMOUNT:
        return "Every amount must be above zero."
    if code == ZERO_SHARES:
        return "An amount is too small to mint any LAT share."
    if code == ARRAY_LENGTH_MISMATCH:
        return "The deposit needs one amount per asset."
    if code == BALANCE_OUT_OF_SYNC:
        return (
            f"The LAT holds less of {_arg(revert, 0)} than its accounts say: it refuses deposits "
            "of it until that is resolved."
        )
    if code == INSUFFICIENT_BALANCE:
        return "The sender's token balance is too low for this deposit."
    if code == INSUFFICIENT_ALLOWANCE:
        return (
            "The sender has not approved the LAT to take this amount of the token: approve it "
            "first."
        )
    if code == REENTRANT_CALL:
        return "The deposit would re-enter the LAT, which refuses it."
    if code == TOKEN_TRANSFER_FAILED:
        return "A token transfer into the LAT would fail."
    return f"The deposit would fail: {revert.text}."
