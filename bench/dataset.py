"""The bench database: created, migrated and seeded (one `INSERT ... SELECT generate_series` per
table), reused while it holds exactly this data set; `activity`'s holders and events likewise."""

from __future__ import annotations

import hashlib
import json
import time
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg.types.string import StrDumper

from bench import python

DATASET_VERSION = 3  # bump when the data set changes: its marker addresses change with it
LATS, TOKENS, NODES, POOL = 4, 3, 8, 20_000  # LATs, the tokens and nodes of each, depositors
HOLDERS, FORMER, EVENTS = 100_000, 5_000, 1_000_000  # `activity`'s, of the first LAT
ACTIVITY = ("deposits_event", "deposits_holder", "deposits_holdertally", "deposits_holderbucket")


def address(tag: str) -> str:
    """A deterministic, EIP-55 checksummed address for a tag."""
    from eth_utils import to_checksum_address

    digest = hashlib.sha256(f"lat-bench-v{DATASET_VERSION}:{tag}".encode()).hexdigest()
    return to_checksum_address("0x" + digest[:40])


def addresses(kind: str, n: int) -> list[str]:
    return [address(f"{kind}:{i}") for i in range(n)]


MARKERS, TOKEN = addresses("lat", LATS), address("token:0")  # the first LAT (lEDA) is measured
ADDRESSES = {"lat": LATS, "impl": LATS, "avs": LATS, "eigen": 4, "token": LATS * TOKENS}
ADDRESSES |= {"strategy": LATS * TOKENS, "node": LATS * NODES, "user": POOL}
APYS = {"apy": "2.4000", "baseApy": "2.9", "nativeApy": "0.3000", "totalApy": "5.3000"}
APYS = json.dumps(dict.fromkeys(("current", "avg30d", "trailing7d", "trailing30d"), APYS))


def deployments(i: int) -> str:
    names = ("liquidToken", "liquidTokenManager", "stakerNodeCoordinator")
    kinds = {kind: {n: address(f"{kind}:{i}:{n}") for n in names} for kind in ("impl", "proxy")}
    return json.dumps({"implementation": kinds["impl"], "proxy": kinds["proxy"]})


# Row i of each table; LAT l holds the tokens TOKENS * l + k (the third of 8 decimals, the others
# of 18) and the staker nodes NODES * l + k, each node staking each of its LAT's tokens.
WORLD = """
INSERT INTO lats_token (id, chain_id, address, symbol, name, decimals, ref_id, base_apy)
SELECT i + 1, 1, %(token)s[i + 1], 'TK' || i, 'Token ' || i, 18 - 10 * (mod(i, 3) / 2), i, 2.9
FROM generate_series(0, 11) AS i;
INSERT INTO lats_avs (id, chain_id, address, metadata_uri, metadata_name, metadata_description,
    metadata_website, metadata_logo, metadata_social, tags, staff_edited_fields)
SELECT i + 1, 1, %(avs)s[i + 1], '', 'AVS ' || i, 'AVS ' || i || ', an actively validated service.',
    'https://avs' || i || '.example', 'https://avs.example/logo.png', 'https://x.com/avs',
    '["restaking", "avs"]', '[]'
FROM generate_series(0, 3) AS i;
INSERT INTO lats_lat (id, chain_id, proxy_address, implementation_address, name, symbol, avs_id,
    base_asset, base_asset_symbol, max_nodes, deployment_block, contract_deployments, apys,
    delegation_manager, strategy_manager, rewards_coordinator, avs_directory, allocation_manager,
    price_oracle, group_override, paused, total_assets, total_supply, unit_eth_price, state_block,
    created_at, eigenlayer_from_chain, manifest, manifest_version, missing_functions, apy_gaps)
SELECT i + 1, 1, %(lat)s[i + 1], %(impl)s[i + 1], 'Liquid ' || symbol, symbol,
    i + 1, %(token)s[3 * i + 1], 'TK' || 3 * i, 12, 19999000, %(deployments)s[i + 1]::jsonb,
    %(apys)s::jsonb, %(eigen)s[1], %(eigen)s[2], %(eigen)s[3], %(eigen)s[4], '', '', '', false,
    5115e19, 5e22, 1e18, 22700000, now(), '{}', '{}', '', '[]', '[]'
FROM generate_series(0, 3) AS i, LATERAL (SELECT (ARRAY['lEDA', 'lLGR', 'lEORA', 'lARPA'])[i + 1]
    AS symbol) AS s;
INSERT INTO lats_lattoken (id, lat_id, token_id, strategy_address, volatility_threshold,
    price_per_unit, decimals, balance, queued_balance, staked_amount)
SELECT i + 1, i / 3 + 1, i + 1, %(strategy)s[i + 1], 5e16, 1e18 + i * 1e16,
    18 - 10 * (mod(i, 3) / 2), (i + 3) * 37e18, (i + 1) * 5e18, 0
FROM generate_series(0, 11) AS i;
INSERT INTO operators_stakernode (id, lat_id, address, node_id, created_at_block, created_at,
    updated_at_block, updated_at)
SELECT i + 1, i / 8 + 1, %(node)s[i + 1], mod(i, 8), 20000000 + i, timestamptz '2024-06-01Z',
    22000000 + i, timestamptz '2025-03-28Z'
FROM generate_series(0, 31) AS i;
INSERT INTO operators_nodeasset (id, node_id, token_id, strategy_address, core_shares,
    staked_amount)
SELECT i + 1, i / 3 + 1, i / 24 * 3 + mod(i, 3) + 1, %(strategy)s[i / 24 * 3 + mod(i, 3) + 1],
    (i + 1) * 91e18, (i + 1) * 93e18
FROM generate_series(0, 95) AS i;
UPDATE lats_lattoken lt SET staked_amount = s.amount
FROM (
    SELECT n.lat_id, na.token_id, SUM(na.staked_amount) AS amount
    FROM operators_nodeasset na JOIN operators_stakernode n ON n.id = na.node_id
    GROUP BY n.lat_id, na.token_id
) s
WHERE s.lat_id = lt.lat_id AND s.token_id = lt.token_id;
SELECT setval(pg_get_serial_sequence(t, 'id'), 100) FROM unnest(ARRAY['lats_token', 'lats_avs',
    'lats_lat', 'lats_lattoken', 'operators_stakernode', 'operators_nodeasset']) AS t
"""
# ~2.6 blocks a deposit, now and then two in a block; over the LATs 45/20/20/15%; a tenth from
# user:0, a few other heavy depositors and a long tail; receivers the sender 85% of the time;
# amounts over four orders of magnitude; 3% legacy `Deposit` events.
DEPOSITS = """
INSERT INTO deposits_deposit (lat_id, chain_id, tx_hash, log_index, block_number, block_hash,
    created_at, kind, sender, receiver, asset, amount, shares)
SELECT lat + 1, 1, '0x' || md5('tx' || i) || md5('xt' || i), mod(i, 7) * 40, b,
    '0x' || md5('b' || b) || md5('h' || b), timestamptz '2024-06-01Z' + (b - 2e7) * interval '12 s',
    CASE WHEN random() < 0.03 THEN 'Deposit' ELSE 'AssetDeposited' END, s.a, coalesce(r.a, s.a),
    %(token)s[3 * lat + k + 1], floor(x * 10 ^ (18 - 10 * (k / 2))), floor(x * 0.97e18)
FROM (
    SELECT i, 20000000 + (i - (mod(i, 17) = 1)::int) * 13 / 5 AS b, floor(random() * 3)::int AS k,
        CASE WHEN r < 0.45 THEN 0 WHEN r < 0.65 THEN 1 WHEN r < 0.85 THEN 2 ELSE 3 END AS lat,
        CASE WHEN s < 0.1 THEN 0 ELSE floor(20000 * power(s, 3)) END AS s,
        CASE WHEN random() < 0.85 THEN -1 ELSE floor(random() * 20000) END AS r,
        0.001 + power(random(), 4) * 32 AS x
    FROM (SELECT i, random() AS r, random() AS s FROM generate_series(1, %(n)s) AS i) AS g
) AS d
JOIN unnest(%(user)s) WITH ORDINALITY AS s(a, n) ON s.n = d.s + 1
LEFT JOIN unnest(%(user)s) WITH ORDINALITY AS r(a, n) ON r.n = d.r + 1
ORDER BY i
"""
# Four events a block, addresses in lower case (the feed serves args as stored): deposits with
# their mints, transfers, some burns, and the rare others.
EVENTS_SQL = """
INSERT INTO deposits_event
    (lat_id, block_number, log_index, tx_hash, block_hash, created_at, type, args)
SELECT 1, b, li, '0x' || md5('tx' || i) || md5('xt' || i), '0x' || md5('b' || b) || md5('h' || b),
    timestamptz '2024-06-01Z' + (b - 20000000) * interval '12 s', kind,
    CASE WHEN kind = 'deposit' THEN jsonb_build_object('sender', a1, 'receiver', a1,
            'asset', %(asset)s, 'amount', v::text, 'shares', (v * 99 / 100)::text)
        WHEN kind IN ('mint', 'transfer', 'burn') THEN jsonb_build_object(
            'from', CASE WHEN kind = 'mint' THEN %(zero)s ELSE a2 END,
            'to', CASE WHEN kind = 'burn' THEN %(zero)s ELSE a1 END, 'value', v::text)
        WHEN kind = 'priceUpdated' THEN jsonb_build_object('token', %(asset)s,
            'oldPrice', '1000000000000000000', 'newPrice', '1001000000000000000', 'updater', a2)
        WHEN kind = 'nodeDelegated' THEN jsonb_build_object('nodeId', mod(i, 12), 'operator', a2)
        ELSE jsonb_build_object('account', a2) END
FROM (
    SELECT i, 20000000 + i / 4 AS b, mod(i, 4) * 3 AS li,
        CASE WHEN r < 0.32 THEN 'deposit' WHEN r < 0.64 THEN 'mint' WHEN r < 0.94 THEN 'transfer'
            WHEN r < 0.98 THEN 'burn' WHEN r < 0.99 THEN 'priceUpdated'
            WHEN r < 0.995 THEN 'nodeDelegated' WHEN r < 0.9975 THEN 'paused' ELSE 'unpaused'
        END AS kind,
        pg_temp.holder(mod(i * 7919, 100000)) AS a1, pg_temp.holder(mod(i * 104729, 100000)) AS a2,
        floor(random() * 1e21)::numeric + 1 AS v
    FROM (SELECT i, random() AS r FROM generate_series(0::bigint, 999999) AS i) AS g
) AS e
"""
HOLDERS_SQL = """
CREATE FUNCTION pg_temp.holder(k bigint) RETURNS text IMMUTABLE LANGUAGE sql
    AS $$ SELECT '0x' || substr(md5('holder' || k) || md5('redloh' || k), 1, 40) $$;
INSERT INTO deposits_holder (lat_id, address, balance, first_block)
SELECT 1, pg_temp.holder(i), CASE WHEN i < 100000 THEN floor(power(random(), 4) * 1e24)::numeric + 1
    ELSE 0 END,
    20000000 + floor(random() * 2500000)
FROM generate_series(0, 104999) AS i;
INSERT INTO deposits_holdertally (lat_id, holders, ever) VALUES (1, 100000, 105000)
"""
# The holders' rank buckets as the indexer keeps them (deposits.models.holder_bucket_floors).
BUCKETS = """
INSERT INTO deposits_holderbucket (lat_id, key, holders)
SELECT 1, width_bucket(balance, %(floors)s::numeric[]), count(*) FROM deposits_holder
WHERE balance > 0 GROUP BY 2
"""
# The secondary indexes and constraints (unique, foreign keys) of tables: (drop, create) each.
SECONDARY = """
SELECT format('ALTER TABLE %%s DROP CONSTRAINT %%I', conrelid::regclass, conname),
    format('ALTER TABLE %%s ADD CONSTRAINT %%I %%s', conrelid::regclass, conname,
        pg_get_constraintdef(oid))
FROM pg_constraint WHERE conrelid = ANY(%(tables)s::regclass[]) AND contype IN ('u', 'f')
UNION ALL
SELECT format('DROP INDEX %%s', indexrelid::regclass), pg_get_indexdef(indexrelid) FROM pg_index
WHERE indrelid = ANY(%(tables)s::regclass[]) AND NOT indisprimary
    AND indexrelid NOT IN (SELECT conindid FROM pg_constraint WHERE contype IN ('u', 'f'))
"""


def with_database(url: str, name: str) -> str:  # the same server and credentials
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def connect(url: str, **kwargs) -> psycopg.Connection:
    """psycopg on a django-environ URL (which may say pgsql://), Python's str sent as text."""
    conn = psycopg.connect(urlunsplit(urlsplit(url)._replace(scheme="postgresql")), **kwargs)
    conn.adapters.register_dumper(str, StrDumper)
    return conn


def manage(env: dict[str, str], db_url: str, *args: str) -> None:
    python("manage.py", *args, "-v", "0", env={**env, "DATABASE_URL": db_url})


def create_database(db_url: str, *, recreate: bool = False) -> None:
    name = urlsplit(db_url).path.lstrip("/")
    assert "bench" in name or not recreate, f"refusing to drop {name}"
    with connect(with_database(db_url, "postgres"), autocommit=True) as conn:
        if recreate:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def holds(db_url: str, check: str, params: dict) -> bool:
    with connect(db_url) as conn:
        return bool(conn.execute(check, params).fetchone()[0])


def bulk_load(db_url: str, tables: tuple[str, ...], statements: list[str], params: dict) -> float:
    """The statements with the secondary indexes and constraints of `tables` dropped and rebuilt
    after them (one sort each instead of an insertion per row), then VACUUM ANALYZE: seconds."""
    started = time.monotonic()
    with connect(db_url) as conn:
        conn.execute("SET maintenance_work_mem = '512MB'")
        secondary = conn.execute(SECONDARY, {"tables": list(tables)}).fetchall()
        for sql in [drop for drop, _ in secondary] + statements:
            conn.execute(sql, params if "%(" in sql else None)
        for _, create in secondary:
            conn.execute(create)
    with connect(db_url, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE)")
    return time.monotonic() - started


def prepare(db_url: str, env: dict[str, str], deposits: int, log) -> float | None:
    """The database migrated and holding the data set: the seconds seeding took, or None."""
    create_database(db_url)
    manage(env, db_url, "migrate", "--noinput")
    check = "SELECT array_agg(proxy_address::text ORDER BY id) = %(lat)s AND (SELECT sum(n) FROM"
    check += " deposits_depositcount WHERE field = '') = %(n)s FROM lats_lat"
    if holds(db_url, check, {"lat": MARKERS, "n": deposits}):
        return None
    log(f"dataset: seeding {db_url.rsplit('/', 1)[1]} afresh")
    create_database(db_url, recreate=True)
    manage(env, db_url, "migrate", "--noinput")
    params = {kind: addresses(kind, n) for kind, n in ADDRESSES.items()}
    params |= {"n": deposits, "apys": APYS, "deployments": [deployments(i) for i in range(LATS)]}
    seconds = bulk_load(db_url, ("deposits_deposit",), [*WORLD.split(";"), DEPOSITS], params)
    manage(env, db_url, "lat_recount_deposits")
    return seconds


def prepare_activity(db_url: str) -> float | None:
    """`activity`'s holders, their tally and rank buckets, and events: seconds it took, or None."""
    from deposits.models import holder_bucket_floors

    params = {"asset": TOKEN.lower(), "zero": "0x" + "0" * 40, "events": EVENTS, "holders": HOLDERS}
    check = "SELECT (SELECT count(*) FROM deposits_event WHERE lat_id = 1) = %(events)s AND (SELECT"
    check += " sum(holders) FROM deposits_holderbucket WHERE lat_id = 1) = %(holders)s"
    if holds(db_url, check, params):
        return None
    params["floors"] = [str(floor) for floor in holder_bucket_floors()]
    statements = [f"TRUNCATE {', '.join(ACTIVITY)}", *HOLDERS_SQL.split(";"), EVENTS_SQL, BUCKETS]
    return bulk_load(db_url, ACTIVITY, statements, params)
