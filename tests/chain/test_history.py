"""Reads of a chain's past (chain/history.py) on anvil, with block times as irregular as a devnet
makes them (days without a block, blocks a second apart, equal timestamps): the last block
before each time equals what a walk over every header finds, and the first block with code is
the block of the contract's deployment."""

from __future__ import annotations

import pytest

from chain.gateway import gateway_for_url
from chain.history import blocks_before, first_block_with_code

pytestmark = pytest.mark.chain
DEVNET = pytest.mark.parametrize("devnet_kind", ["plain"], indirect=True)


def _mine_at(chain, timestamps: list[int]) -> None:
    for t in timestamps:
        chain.rpc("evm_setNextBlockTimestamp", hex(t))
        chain.rpc("evm_mine")


@DEVNET
def test_the_last_block_before_each_time_is_the_one_a_full_walk_finds(chain):
    head = chain.w3.eth.get_block("latest")
    t0 = head["timestamp"]
    # A day without a block, a burst a second apart, then an hour, then five days apart.
    _mine_at(chain, [t0 + 86_400 * 2 + n for n in range(8)] + [t0 + 86_400 * 2 + 3_600])
    _mine_at(chain, [t0 + 86_400 * 2 + 3_600 + 86_400 * 5 * n for n in range(1, 4)])
    numbers = range(0, chain.w3.eth.block_number + 1)
    times = {n: chain.w3.eth.get_block(n)["timestamp"] for n in numbers}

    def walk(t: int) -> int:
        return max(n for n, stamp in times.items() if stamp < t)

    gateway = gateway_for_url(chain.url, timeout=30, multicall=None)
    low, high = gateway.block(0), gateway.head()
    wanted = sorted(
        {times[0] + 1, t0, t0 + 1, t0 + 86_400, t0 + 86_400 * 2 + 3}
        | {t0 + 86_400 * 2 + 3_600, t0 + 86_400 * 2 + 3_601}
        | {t0 + 3_600 * h for h in range(0, 24 * 18, 7)}
        | {stamp for stamp in times.values() if stamp > times[0]}
    )
    found = blocks_before(gateway, wanted, low=low, high=high)
    assert {t: b.number for t, b in found.items()} == {
        t: walk(t) if t <= high.timestamp else high.number for t in wanted
    }
    for block in found.values():
        assert block.timestamp == times[block.number]
        assert block.hash == chain.w3.eth.get_block(block.number)["hash"].to_0x_hex()


@DEVNET
def test_the_first_block_with_code_is_the_deployment(chain):
    manifest = chain.manifests[0]
    gateway = gateway_for_url(chain.url, timeout=30, multicall=None)
    head = gateway.head_number()
    proxy = manifest["proxyAddress"]
    assert first_block_with_code(gateway, proxy, high=head) == manifest["deploymentBlock"]
    assert (
        first_block_with_code(gateway, "0x000000000000000000000000000000000000dEaD", high=head)
        is None
    )
