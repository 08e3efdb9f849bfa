"""What a wallet is told for a deposit that would revert (deposits/reverts.py), from revert data
encoded here by hand (selectors from keccak256 of the signature)."""

from __future__ import annotations

import pytest
from eth_utils import keccak

from chain import reverts
from deposits.reverts import deposit_failure

ASSET = "0x5FC8d32690cc91D4c39d9d3abcBD16989F875707"


def word(value: int) -> bytes:
    return value.to_bytes(32, "big")


def data(signature: str, *words: bytes) -> str:
    return "0x" + (keccak(text=signature)[:4] + b"".join(words)).hex()


def string_data(text: str) -> str:
    raw = text.encode()
    return data("Error(string)", word(32), word(len(raw)), raw + bytes(-len(raw) % 32))


ASSET_WORD = bytes(12) + bytes.fromhex(ASSET[2:])

CASES = [
    # Mainnet v1 (OpenZeppelin 4.9) and OpenZeppelin 5 deployments alike.
    (string_data("Pausable: paused"), "paused",
     "The LAT is paused: it accepts no deposits until it is unpaused."),
    (data("EnforcedPause()"), "paused",
     "The LAT is paused: it accepts no deposits until it is unpaused."),
    (data("PriceUpdateFailed()"), "price_refresh_failed",
     "The LAT's prices are stale and refreshing them failed (a token's price source gave no "
     "price): it accepts no deposits until its prices are updated."),
    (data("PriceUpdateRejected()"), "price_refresh_failed",
     "The LAT's prices are stale and refreshing them failed (a token's price source gave no "
     "price): it accepts no deposits until its prices are updated."),
    (data("PricesRemainStale()"), "prices_stale",
     "The LAT's prices are still stale after refreshing them: try again later."),
    (data("AssetPriceInvalid(address)", ASSET_WORD), "asset_price_invalid",
     f"The LAT has no valid price for {ASSET}: it refuses deposits of it."),
    (data("UnsupportedAsset(address)", ASSET_WORD), "unsupported_asset",
     f"{ASSET} is not a token this LAT accepts."),
    (data("ZeroAmount()"), "zero_amount", "Every amount must be above zero."),
    (data("ZeroShares()"), "zero_shares", "An amount is too small to mint any LAT share."),
    (data("ArrayLengthMismatch()"), "array_length_mismatch",
     "The deposit needs one amount per asset."),
    (data("AssetBalanceOutOfSync(address,uint256,uint256)", ASSET_WORD, word(2), word(1)),
     "balance_out_of_sync",
     f"The LAT holds less of {ASSET} than its accounts say: it refuses deposits of it until "
     "that is resolved."),
    # The token's own reverts, passed on by the LAT: OpenZeppelin 5, 4, and stETH's strings.
    (data("ERC20InsufficientBalance(address,uint256,uint256)", ASSET_WORD, word(0), word(5)),
     "insufficient_balance", "The sender's token balance is too low for this deposit."),
    (string_data("ERC20: transfer amount exceeds balance"), "insufficient_balance",
     "The sender's token balance is too low for this deposit."),
    (string_data("BALANCE_EXCEEDED"), "insufficient_balance",
     "The sender's token balance is too low for this deposit."),
    (data("ERC20InsufficientAllowance(address,uint256,uint256)", ASSET_WORD, word(0), word(5)),
     "insufficient_allowance",
     "The sender has not approved the LAT to take this amount of the token: approve it first."),
    (string_data("ERC20: insufficient allowance"), "insufficient_allowance",
     "The sender has not approved the LAT to take this amount of the token: approve it first."),
    (string_data("ALLOWANCE_EXCEEDED"), "insufficient_allowance",
     "The sender has not approved the LAT to take this amount of the token: approve it first."),
    (string_data("ReentrancyGuard: reentrant call"), "reentrant_call",
     "The deposit would re-enter the LAT, which refuses it."),
    (string_data("SafeERC20: low-level call failed"), "token_transfer_failed",
     "A token transfer into the LAT would fail."),
    (data("Panic(uint256)", word(0x11)), "panic",
     "The deposit would fail on an internal error of a contract: "
     "Panic(0x11: arithmetic overflow or underflow)."),
    ("0xdeadbeef", "unknown_error",
     "The deposit would fail with an error this service does not know (selector 0xdeadbeef)."),
    ("0x", "no_reason", "The deposit would fail without the contracts giving a reason."),
    (string_data("something else"), "other", "The deposit would fail: something else."),
    (data("TokenNotSupported(address)", ASSET_WORD), "other",
     f"The deposit would fail: TokenNotSupported({ASSET})."),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "code", "reason"), CASES)
def test_a_revert_in_words_with_the_raw_error_beside_it(raw, code, reason):
    decoded = reverts.decode(raw)
    failure = deposit_failure(decoded)
    assert (failure.code, failure.reason) == (code, reason)
    assert failure.revert == decoded.text
    assert failure.revert_data == raw


def test_a_call_without_a_revert_is_no_contract():
    failure = deposit_failure(None, text="no contract code at the LAT address")
    assert (failure.code, failure.revert, failure.revert_data) == (
        "no_contract", "no contract code at the LAT address", "0x",
    )  # fmt: skip
    assert failure.reason.startswith("There is no LAT contract at this address")
