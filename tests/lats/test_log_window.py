"""chain.gateway.LogWindow: one eth_getLogs answer handed out per set of addresses, once
each, within its block range and topics only (a retry reads the node again)."""

from __future__ import annotations

from chain.gateway import LogWindow

A, B, C = "0x" + "a" * 40, "0x" + "B" * 40, "0x" + "c" * 40
TOPICS = [["0x" + "1" * 64]]


def log(address: str, block: int) -> dict:
    return {"address": address, "blockNumber": hex(block), "logIndex": "0x0"}


def window() -> LogWindow:
    logs = [log(A, 10), log(B.lower(), 11), log(C, 12), log(A, 13)]
    return LogWindow(frozenset({A, B.lower(), C}), TOPICS, 10, 13, logs)


def test_each_set_of_addresses_gets_its_logs_once():
    shared = window()
    assert shared.take([A, B], TOPICS, 10, 13) == [log(A, 10), log(B.lower(), 11), log(A, 13)]
    assert shared.take([B, A], TOPICS, 10, 13) is None  # the same set again: to the node
    assert shared.take(C, TOPICS, 12, 13) == [log(C, 12)]


def test_block_range_filters_and_bounds():
    assert window().take([A], TOPICS, 11, 13) == [log(A, 13)]
    assert window().take([A], TOPICS, 9, 13) is None  # starts before the window
    assert window().take([A], TOPICS, 10, 14) is None  # ends after it


def test_other_topics_or_addresses_go_to_the_node():
    assert window().take([A], [["0x" + "2" * 64]], 10, 13) is None
    assert window().take([A, "0x" + "d" * 40], TOPICS, 10, 13) is None
