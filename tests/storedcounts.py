"""The indexer's stored counts of deposits against counts of the stored rows, made here."""

from __future__ import annotations

from collections import Counter

from deposits.models import Deposit, DepositCount, DepositSpan, DepositSpanTotal


def assert_deposit_counts_match_rows() -> None:
    """DepositCount (per LAT: all, per sender, receiver, asset), DepositSpan (per LAT and
    span of blocks) and DepositSpanTotal (per span) equal what the deposit rows give when
    counted one by one."""
    rows = Deposit.objects.values_list("lat_id", "sender", "receiver", "asset", "block_number")
    want: Counter = Counter()
    spans: Counter = Counter()
    for lat, sender, receiver, asset, block in rows:
        want.update([(lat, "", ""), (lat, "sender", sender), (lat, "receiver", receiver)])
        want[lat, "asset", asset] += 1
        spans[lat, block // DepositSpan.SPAN_BLOCKS] += 1
    counts = DepositCount.objects.filter(n__gt=0).values_list("lat_id", "field", "address", "n")
    assert Counter({(lat, field, a): n for lat, field, a, n in counts}) == want
    stored = DepositSpan.objects.filter(n__gt=0).values_list("lat_id", "span", "n")
    assert Counter({(lat, span): n for lat, span, n in stored}) == spans
    totals: Counter = Counter()
    for (_, span), n in spans.items():
        totals[span] += n
    summed = DepositSpanTotal.objects.filter(n__gt=0).values_list("span", "n")
    assert Counter(dict(summed)) == totals
