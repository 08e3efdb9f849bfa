"""Revert data decoded whatever its kind (chain/reverts.py), from data encoded here by hand:
each selector is keccak256 of the signature, computed here; each argument a 32-byte word."""

from __future__ import annotations

import pytest
from eth_utils import keccak

from chain import reverts
from chain.errors import ChainCallReverted
from chain.transport import check

ASSET = "0x5FC8d32690cc91D4c39d9d3abcBD16989F875707"
SENDER = "0x71bE63f3384f5fb98995898A86B02Fb2426c5788"
PAUSER_ROLE = keccak(text="PAUSER_ROLE")


def word(value: int) -> bytes:
    return value.to_bytes(32, "big")


def address_word(address: str) -> bytes:
    return bytes(12) + bytes.fromhex(address[2:])


def data(signature: str, *words: bytes) -> str:
    return "0x" + (keccak(text=signature)[:4] + b"".join(words)).hex()


def string_data(text: str) -> str:
    raw = text.encode()
    return data("Error(string)", word(32), word(len(raw)), raw + bytes(-len(raw) % 32))


def test_the_two_builtin_selectors_are_the_well_known_ones():
    assert keccak(text="Error(string)")[:4].hex() == "08c379a0"
    assert keccak(text="Panic(uint256)")[:4].hex() == "4e487b71"


def test_an_error_string_is_its_text():
    raw = string_data("Pausable: paused")
    revert = reverts.decode(raw)
    assert (revert.kind, revert.text, revert.name, revert.signature) == (
        "error", "Pausable: paused", "Error", "Error(string)",
    )  # fmt: skip
    assert revert.args == ("Pausable: paused",)
    assert revert.message == "Pausable: paused"
    assert (revert.data, revert.selector) == (raw, "0x08c379a0")
    # The same from bytes.
    assert reverts.decode(bytes.fromhex(raw[2:])) == revert


def test_an_error_string_longer_than_a_word():
    text = "AccessControl: account 0x71be63f3384f5fb98995898a86b02fb2426c5788 is missing role " + (
        "0x" + PAUSER_ROLE.hex()
    )
    assert len(text.encode()) > 64
    assert reverts.decode(string_data(text)).text == text


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (0x01, "Panic(0x01: assertion failed)"),
        (0x11, "Panic(0x11: arithmetic overflow or underflow)"),
        (0x12, "Panic(0x12: division or modulo by zero)"),
        (0x21, "Panic(0x21: conversion to an invalid enum value)"),
        (0x31, "Panic(0x31: pop() on an empty array)"),
        (0x32, "Panic(0x32: array index out of bounds)"),
        (0x41, "Panic(0x41: too much memory allocated)"),
        (0x51, "Panic(0x51: call to a zero-initialized internal function)"),
        (0x99, "Panic(0x99: unknown panic code)"),
    ],
)
def test_a_panic_says_what_its_code_means(code, text):
    revert = reverts.decode(data("Panic(uint256)", word(code)))
    assert (revert.kind, revert.text, revert.panic_code) == ("panic", text, code)
    assert revert.selector == "0x4e487b71"


# Every custom error chain.md lists, and OpenZeppelin 5's, with arguments encoded by hand.
CUSTOM = [
    ("ArrayLengthMismatch()", [], "ArrayLengthMismatch()"),
    ("ZeroAmount()", [], "ZeroAmount()"),
    ("UnsupportedAsset(address)", [address_word(ASSET)], f"UnsupportedAsset({ASSET})"),
    ("ZeroShares()", [], "ZeroShares()"),
    (
        "AssetBalanceOutOfSync(address,uint256,uint256)",
        [address_word(ASSET), word(17_000_000), word(16_000_000)],
        f"AssetBalanceOutOfSync({ASSET}, 17000000, 16000000)",
    ),
    ("PriceUpdateFailed()", [], "PriceUpdateFailed()"),
    ("PriceUpdateRejected()", [], "PriceUpdateRejected()"),
    ("PricesRemainStale()", [], "PricesRemainStale()"),
    ("AssetPriceInvalid(address)", [address_word(ASSET)], f"AssetPriceInvalid({ASSET})"),
    ("StrategyNotFound(address)", [address_word(ASSET)], f"StrategyNotFound({ASSET})"),
    ("ZeroAddress()", [], "ZeroAddress()"),
    (
        "InsufficientBalance(address,uint256,uint256)",
        [address_word(ASSET), word(5), word(3)],
        f"InsufficientBalance({ASSET}, 5, 3)",
    ),
    ("NoFreshPrice(address)", [address_word(ASSET)], f"NoFreshPrice({ASSET})"),
    ("EnforcedPause()", [], "EnforcedPause()"),
    ("ExpectedPause()", [], "ExpectedPause()"),
    (
        "AccessControlUnauthorizedAccount(address,bytes32)",
        [address_word(SENDER), PAUSER_ROLE],
        f"AccessControlUnauthorizedAccount({SENDER}, 0x{PAUSER_ROLE.hex()})",
    ),
    (
        "ERC20InsufficientBalance(address,uint256,uint256)",
        [address_word(SENDER), word(0), word(5)],
        f"ERC20InsufficientBalance({SENDER}, 0, 5)",
    ),
    (
        "ERC20InsufficientAllowance(address,uint256,uint256)",
        [address_word(ASSET), word(0), word(10**18)],
        f"ERC20InsufficientAllowance({ASSET}, 0, 1000000000000000000)",
    ),
    ("ReentrancyGuardReentrantCall()", [], "ReentrancyGuardReentrantCall()"),
    (
        "SafeERC20FailedOperation(address)",
        [address_word(ASSET)],
        f"SafeERC20FailedOperation({ASSET})",
    ),
]


@pytest.mark.parametrize(("signature", "words", "text"), CUSTOM, ids=[c[0] for c in CUSTOM])
def test_a_known_custom_error_is_named_with_its_arguments(signature, words, text):
    raw = data(signature, *words)
    revert = reverts.decode(raw)
    assert (revert.kind, revert.text, revert.signature) == ("custom", text, signature)
    assert revert.name == signature.split("(")[0]
    assert revert.selector == "0x" + keccak(text=signature)[:4].hex()
    assert revert.data == raw


def test_addresses_come_out_checksummed_whatever_the_case_of_the_data():
    revert = reverts.decode(data("UnsupportedAsset(address)", address_word(ASSET.lower())))
    assert revert.args == (ASSET,)


def test_an_unknown_selector_is_shown_as_such_with_its_data():
    raw = "0xdeadbeef" + word(7).hex()
    revert = reverts.decode(raw)
    assert (revert.kind, revert.text, revert.name, revert.args) == (
        "unknown", "unknown error 0xdeadbeef", "", (),
    )  # fmt: skip
    assert (revert.selector, revert.data) == ("0xdeadbeef", raw)


@pytest.mark.parametrize("raw", [None, "", "0x", b""])
def test_no_data_is_a_revert_without_a_reason(raw):
    revert = reverts.decode(raw)
    assert (revert.kind, revert.text, revert.data, revert.selector) == (
        "empty", "reverted without a reason", "0x", "",
    )  # fmt: skip


def test_a_reason_given_only_in_the_nodes_message_is_taken_as_the_string():
    revert = reverts.decode(None, message="execution reverted: Pausable: paused")
    assert (revert.kind, revert.text, revert.data) == ("error", "Pausable: paused", "0x")
    assert reverts.decode(None, message="execution reverted").kind == "empty"


def test_undecodable_arguments_keep_the_error_known():
    raw = data("UnsupportedAsset(address)", b"\x01\x02")  # shorter than a word
    revert = reverts.decode(raw)
    assert (revert.kind, revert.name, revert.args) == ("custom", "UnsupportedAsset", ())
    assert revert.text == "UnsupportedAsset(address) with undecodable arguments"
    broken = reverts.decode("0x08c379a0" + word(32).hex())  # a string with no length word
    assert (broken.kind, broken.text) == ("error", "Error(string) with undecodable data")


def test_the_transport_raises_the_decoded_revert_of_a_json_rpc_error():
    raw = string_data("Pausable: paused")
    response = {
        "jsonrpc": "2.0",
        "id": 0,
        "error": {"code": 3, "message": "execution reverted: Pausable: paused", "data": raw},
    }
    with pytest.raises(ChainCallReverted) as excinfo:
        check(response, "eth_call")
    assert excinfo.value.reason == "Pausable: paused"
    assert excinfo.value.revert is not None
    assert (excinfo.value.revert.kind, excinfo.value.revert.data) == ("error", raw)
    # A node that puts the reason in its message only.
    response["error"] = {"code": -32000, "message": "execution reverted: Pausable: paused"}
    with pytest.raises(ChainCallReverted) as excinfo:
        check(response, "eth_call")
    assert excinfo.value.reason == "Pausable: paused"


def test_every_error_chain_md_lists_is_known_without_the_abis(monkeypatch, tmp_path):
    """The list in chain/reverts.py, not the devnet's ABIs, decodes a deployment's errors."""
    monkeypatch.setattr(reverts, "ABI_DIR", tmp_path)  # no ABI at all
    reverts.error_table.cache_clear()
    try:
        for signature, words, text in CUSTOM:
            assert reverts.decode(data(signature, *words)).text == text
    finally:
        reverts.error_table.cache_clear()
