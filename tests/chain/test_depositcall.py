"""chain/depositcall.py against eth_abi: the calldata of deposit(address[],uint256[],address)
and its uint256[] answer, both ways, over generated inputs and at the edges."""

from __future__ import annotations

import pytest
from eth_abi import decode as abi_decode
from eth_abi import encode as abi_encode
from eth_utils import keccak
from hypothesis import given
from hypothesis import strategies as st

from chain.depositcall import deposit_calldata, deposit_shares

SELECTOR = keccak(text="deposit(address[],uint256[],address)")[:4]
UINT256_MAX = 2**256 - 1

addresses = st.binary(min_size=20, max_size=20).map(lambda raw: "0x" + raw.hex())
uints = st.integers(min_value=0, max_value=UINT256_MAX)


@given(
    assets=st.lists(addresses, max_size=40),
    amounts=st.lists(uints, max_size=40),
    receiver=addresses,
)
def test_calldata_is_eth_abis(assets, amounts, receiver):
    expected = SELECTOR + abi_encode(
        ["address[]", "uint256[]", "address"], [assets, amounts, receiver]
    )
    assert deposit_calldata(assets, amounts, receiver) == expected


def test_calldata_takes_any_letter_case():
    lower = "0x71be63f3384f5fb98995898a86b02fb2426c5788"
    mixed = "0x71bE63f3384f5fb98995898A86B02Fb2426c5788"
    assert deposit_calldata([mixed], [1], mixed) == deposit_calldata([lower], [1], lower)


@pytest.mark.parametrize(
    ("assets", "amounts", "receiver", "match"),
    [
        (["0x12"], [1], "0x" + "00" * 20, "20 bytes"),  # a short address
        (["0x" + "zz" * 20], [1], "0x" + "00" * 20, "non-hexadecimal"),
        (["0x" + "11" * 20], [2**256], "0x" + "00" * 20, "uint256"),  # above uint256
        (["0x" + "11" * 20], [-1], "0x" + "00" * 20, "uint256"),
    ],
)
def test_malformed_arguments_are_refused(assets, amounts, receiver, match):
    with pytest.raises(ValueError, match=match):
        deposit_calldata(assets, amounts, receiver)


@given(st.lists(uints, max_size=40))
def test_shares_are_eth_abis(shares):
    data = abi_encode(["uint256[]"], [shares])
    assert deposit_shares(data) == tuple(shares)
    assert deposit_shares(data) == abi_decode(["uint256[]"], data)[0]


@pytest.mark.parametrize(
    "data",
    [
        b"",
        bytes(31),  # less than the offset word
        (32).to_bytes(32, "big"),  # an offset, no length
        (32).to_bytes(32, "big") + (2).to_bytes(32, "big") + bytes(32),  # 2 items, 1 word
        (2**255).to_bytes(32, "big") + bytes(64),  # an offset past the end
        (32).to_bytes(32, "big") + (2**255).to_bytes(32, "big"),  # a length past the end
    ],
)
def test_data_that_is_not_an_array_is_refused(data):
    with pytest.raises(ValueError, match=r"inside a word|longer than the data"):
        deposit_shares(data)
