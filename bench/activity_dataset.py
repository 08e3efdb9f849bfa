"""The `activity` section's HTTP data: HOLDERS holders (and some former holders at a zero
balance) with their HolderTally and rank buckets (HolderBucket), and EVENTS events of the
bench database's primary LAT, bulk-inserted by `INSERT ... SELECT generate_series(...)` with
the secondary indexes and constraints dropped and rebuilt around it (as bench/dataset.py does
for the deposits). Kept while the tables hold exactly this data for that LAT; reloaded
otherwise."""

from __future__ import annotations

import time

from bench import dataset

HOLDERS = 100_000
FORMER = 5_000  # rows at a zero balance: held once, not holders (not listed, not counted)
EVENTS = 1_000_000
TABLES = ("deposits_event", "deposits_holder", "deposits_holdertally", "deposits_holderbucket")

HOLDERS_SQL = """
INSERT INTO deposits_holder (lat_id, address, balance, first_block)
SELECT %(lat)s,
       '0x' || substr(md5('holder' || i) || md5('redloh' || i), 1, 40),
       CASE WHEN i < %(holders)s
            THEN floor(power(random(), 4) * 1e24)::numeric + 1 + (i %% 3) ELSE 0 END,
       %(first)s + floor(random() * 2500000)::bigint
FROM generate_series(0, %(holders)s + %(former)s - 1) AS i
"""

# Four events a block; the mix of a busy LAT: deposits with their mints, transfers, some
# burns, and the rare others. Addresses lower-case (the feed serves args as stored).
EVENTS_SQL = """
INSERT INTO deposits_event
    (lat_id, block_number, log_index, tx_hash, block_hash, created_at, type, args)
SELECT %(lat)s, b, li,
       '0x' || md5('tx' || g) || md5('xt' || g), '0x' || md5('b' || b) || md5('h' || b),
       timestamptz '2024-06-01T00:00:00Z' + (b - %(first)s) * interval '12 seconds', kind,
       CASE WHEN kind = 'deposit' THEN jsonb_build_object('sender', a1, 'receiver', a1,
                'asset', %(asset)s::text, 'amount', v::text, 'shares', (v * 99 / 100)::text)
            WHEN kind IN ('mint', 'transfer', 'burn') THEN jsonb_build_object(
                'from', CASE WHEN kind = 'mint' THEN %(zero)s::text ELSE a2 END,
                'to', CASE WHEN kind = 'burn' THEN %(zero)s::text ELSE a1 END, 'value', v::text)
            WHEN kind = 'priceUpdated' THEN jsonb_build_object('token', %(asset)s::text,
                'oldPrice', '1000000000000000000', 'newPrice', '1001000000000000000',
                'updater', a2)
            WHEN kind = 'nodeDelegated' THEN jsonb_build_object('nodeId', g %% 12,
                'operator', a2)
            ELSE jsonb_build_object('account', a2) END
FROM (
    SELECT g, %(first)s + g / 4 AS b, (g %% 4) * 3 AS li, r,
           CASE WHEN r < 0.32 THEN 'deposit' WHEN r < 0.64 THEN 'mint'
                WHEN r < 0.94 THEN 'transfer' WHEN r < 0.98 THEN 'burn'
                WHEN r < 0.99 THEN 'priceUpdated' WHEN r < 0.995 THEN 'nodeDelegated'
                WHEN r < 0.9975 THEN 'paused' ELSE 'unpaused' END AS kind,
           '0x' || substr(md5('holder' || (g::bigint * 7919 %% %(holders)s)) ||
                          md5('redloh' || (g::bigint * 7919 %% %(holders)s)), 1, 40) AS a1,
           '0x' || substr(md5('holder' || (g::bigint * 104729 %% %(holders)s)) ||
                          md5('redloh' || (g::bigint * 104729 %% %(holders)s)), 1, 40) AS a2,
           (floor(random() * 1e21)::numeric + 1) AS v
    FROM (SELECT g, random() AS r FROM generate_series(0, %(events)s - 1) AS g) raw
) e
ORDER BY b, li
"""

# The holders' rank buckets as the indexer keeps them: width_bucket over the buckets' floors
# (deposits.models.holder_bucket_floors) is each balance's key.
BUCKETS_SQL = """
INSERT INTO deposits_holderbucket (lat_id, key, holders)
SELECT %(lat)s, width_bucket(balance, %(floors)s::numeric[]), count(*)
FROM deposits_holder WHERE lat_id = %(lat)s AND balance > 0 GROUP BY 2
"""


def loaded(conn, lat_id: int) -> bool:
    """Whether the tables hold exactly this data set, for this LAT."""
    row = conn.execute(
        "SELECT (SELECT count(*) FROM deposits_event),"
        " (SELECT count(*) FROM deposits_event WHERE lat_id = %(lat)s),"
        " (SELECT count(*) FROM deposits_holder),"
        " (SELECT holders FROM deposits_holdertally WHERE lat_id = %(lat)s),"
        " (SELECT sum(holders) FROM deposits_holderbucket WHERE lat_id = %(lat)s)",
        {"lat": lat_id},
    ).fetchone()
    return row == (EVENTS, EVENTS, HOLDERS + FORMER, HOLDERS, HOLDERS)


def prepare(db_url: str, proxy_address: str, log) -> float | None:
    """Load the holders and events of the LAT unless already there; the seconds it took, or
    None when reused."""
    with dataset.connect(db_url) as conn:
        lat_id, asset = conn.execute(
            "SELECT l.id, lower(t.address) FROM lats_lat l"
            " JOIN lats_lattoken lt ON lt.lat_id = l.id JOIN lats_token t ON t.id = lt.token_id"
            " WHERE l.proxy_address = %s ORDER BY lt.id LIMIT 1",
            [proxy_address],
        ).fetchone()
        if loaded(conn, lat_id):
            log(f"activity: {EVENTS:,} events and {HOLDERS:,} holders already loaded, reused")
            return None
        started = time.monotonic()
        _load(conn, lat_id, asset)
        log(f"activity: loaded {EVENTS:,} events and {HOLDERS:,} holders")
    with dataset.connect(db_url, autocommit=True) as conn:
        for table in TABLES:
            conn.execute(f"VACUUM (ANALYZE) {table}")
    elapsed = time.monotonic() - started
    log(f"activity: events and holders ready in {elapsed:.1f} s")
    return elapsed


def _load(conn, lat_id: int, asset: str) -> None:
    """Empty the four tables, then insert with the secondary indexes dropped (one
    transaction)."""
    from deposits.models import holder_bucket_floors

    params = {
        "lat": lat_id,
        "holders": HOLDERS,
        "former": FORMER,
        "events": EVENTS,
        "first": dataset.FIRST_BLOCK,
        "asset": asset,
        "zero": "0x" + "0" * 40,
        "floors": [str(floor) for floor in holder_bucket_floors()],
    }
    with conn.cursor() as cur:
        cur.execute("SET synchronous_commit = off; SET work_mem = '256MB'")
        cur.execute("SET maintenance_work_mem = '512MB'")
        cur.execute(f"TRUNCATE {', '.join(TABLES)}")
        rebuild = [s for t in TABLES[:2] for s in dataset._drop_secondary(conn, t)]
        cur.execute("SELECT setseed(0.1717)")
        cur.execute(HOLDERS_SQL, params)
        cur.execute(EVENTS_SQL, params)
        cur.execute(
            "INSERT INTO deposits_holdertally (lat_id, holders, ever)"
            " SELECT %(lat)s, count(*) FILTER (WHERE balance > 0), count(*)"
            " FROM deposits_holder WHERE lat_id = %(lat)s",
            params,
        )
        cur.execute(BUCKETS_SQL, params)
        for statement in rebuild:
            cur.execute(statement)
    conn.commit()
