"""The bench database: created, migrated and seeded once, then reused while its marker LATs and
deposit counts match. The world (4 LATs, their tokens, staker nodes, operators, a year of daily
snapshots) goes through the ORM; the deposits, and the holders and events of `activity`, are
`INSERT ... SELECT generate_series(...)` with the secondary indexes rebuilt around them."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import sys
import time
from dataclasses import dataclass
from decimal import Decimal
from urllib.parse import urlsplit, urlunsplit

import psycopg

from bench import python

# Bump when the seeded world changes: the marker addresses change with it, forcing a reseed.
DATASET_VERSION = 2
CHAIN_ID = 1
FIRST_BLOCK = 20_000_000  # mainnet, early June 2024
FIRST_BLOCK_AT = dt.datetime(2024, 6, 1, tzinfo=dt.UTC)
ADDRESS_POOL = 20_000  # distinct depositor addresses
WHALE_SHARE = 0.1  # the deposits of address(user:0): 100,000 of a million
BEACON_CHAIN_ETH = "0xbeaC0eeEeeeeEEeEeEEEEeeEEeEeeeEeeEEBEaC0"
WAD = 10**18
OPERATORS = 16
# symbol: (name, decimals, unit price in ETH, base APY %, typical largest deposit in tokens)
TOKENS = {
    "stETH": ("Liquid staked Ether 2.0", 18, Decimal("1.0"), "2.9", Decimal(32)),
    "rETH": ("Rocket Pool ETH", 18, Decimal("1.12"), "2.7", Decimal(32)),
    "cbETH": ("Coinbase Wrapped Staked ETH", 18, Decimal("1.09"), "3.0", Decimal(32)),
    "ETHx": ("Stader ETHx", 18, Decimal("1.04"), "3.2", Decimal(32)),
    "tBTC": ("tBTC v2", 18, Decimal("28.5"), "0", Decimal(2)),
    "WBTC": ("Wrapped BTC", 8, Decimal("28.5"), "0", Decimal(2)),
    "cbBTC": ("Coinbase Wrapped BTC", 8, Decimal("28.5"), "0", Decimal(2)),
    "ARPA": ("ARPA Token", 18, Decimal("0.000012"), "0", Decimal(250_000)),
    "stARPA": ("Staked ARPA", 18, Decimal("0.0000126"), "4.1", Decimal(250_000)),
}


@dataclass(frozen=True)
class LatSpec:
    symbol: str
    name: str
    base_symbol: str  # "ETH" for the beacon-chain unit, else a token of TOKENS
    tokens: tuple[str, ...]
    share: float  # fraction of all deposits
    nodes: int
    avs_name: str


LATS = (
    LatSpec("lEDA", "Liquid EigenDA", "ETH", ("stETH", "rETH", "cbETH"), 0.45, 12, "EigenDA"),
    LatSpec("lLGR", "Liquid Lagrange BTC", "tBTC", ("tBTC", "WBTC", "cbBTC"), 0.20, 6, "Lagrange"),
    LatSpec("lEORA", "Liquid eOracle", "ETH", ("stETH", "ETHx"), 0.20, 8, "eOracle"),
    LatSpec("lARPA", "Liquid ARPA Network", "ARPA", ("ARPA", "stARPA"), 0.15, 4, "ARPA Network"),
)


def address(tag: str) -> str:
    """A deterministic, EIP-55 checksummed address for a tag."""
    from eth_utils import to_checksum_address

    digest = hashlib.sha256(f"lat-bench-v{DATASET_VERSION}:{tag}".encode()).hexdigest()
    return to_checksum_address("0x" + digest[:40])


MARKERS = [address(f"lat:{spec.symbol}:proxy") for spec in LATS]


@dataclass
class Dataset:
    db_url: str
    deposits: int
    seed_seconds: float | None = None  # None: reused
    lats: tuple = tuple(MARKERS)

    @property
    def primary_lat(self) -> str:
        return self.lats[0]


def with_database(url: str, name: str) -> str:
    """The same server and credentials as `url`, another database name."""
    parts = urlsplit(url)
    if parts.scheme not in {"postgres", "postgresql", "pgsql"}:
        raise SystemExit(f"bench: DATABASE_URL must be a PostgreSQL URL, got {parts.scheme!r}.")
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


def database_name(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def connect(url: str, **kwargs) -> psycopg.Connection:
    """psycopg on a django-environ URL (which may say pgsql://)."""
    return psycopg.connect(urlunsplit(("postgresql", *urlsplit(url)[1:])), **kwargs)


def manage(env: dict[str, str], db_url: str, *args: str) -> None:
    """`manage.py <args>` in a subprocess on `db_url`."""
    python("manage.py", *args, "-v", "0", env={**env, "DATABASE_URL": db_url})


def create_database(db_url: str, *, recreate: bool = False) -> None:
    """Create the database if missing (drop it first when asked, if its name ends in _bench)."""
    name = database_name(db_url)
    if recreate and not name.endswith("_bench"):
        raise RuntimeError(f"bench: refusing to drop {name!r}: its name does not end in _bench")
    with connect(with_database(db_url, "postgres"), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if exists and recreate:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        if recreate or not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


def _seeded(db_url: str, deposits: int) -> bool:
    """Whether the database holds exactly this data set: its markers, `deposits` counted."""
    with connect(db_url) as conn:
        return conn.execute(
            "SELECT (SELECT count(*) FROM lats_lat WHERE proxy_address = ANY(%s)) = %s"
            " AND (SELECT count(*) FROM lats_lat) = %s"
            " AND (SELECT count(*) FROM deposits_deposit) = %s"
            " AND (SELECT sum(n) FROM deposits_depositcount WHERE field = '') = %s",
            [MARKERS, len(MARKERS), len(MARKERS), deposits, deposits],
        ).fetchone()[0]


def prepare(db_url: str, env: dict[str, str], deposits: int, log) -> Dataset:
    """The bench database holding the data set: migrated, and recreated and seeded unless it
    already holds it."""
    create_database(db_url)
    manage(env, db_url, "migrate", "--noinput")
    if _seeded(db_url, deposits):
        log(f"dataset: {database_name(db_url)} already seeded ({deposits:,} deposits), reused")
        return Dataset(db_url, deposits)
    log(f"dataset: seeding {database_name(db_url)} afresh")
    create_database(db_url, recreate=True)
    manage(env, db_url, "migrate", "--noinput")
    started = time.monotonic()
    setup_django(db_url, env)
    world = _seed_world(deposits)
    log(f"dataset: world (LATs, tokens, nodes, operators) in {time.monotonic() - started:.1f} s")
    _seed_deposits(db_url, world, deposits, log)
    from deposits.services import deposit_recount

    deposit_recount()
    if not _seeded(db_url, deposits):
        raise SystemExit("bench: seeding finished but the data set does not check out.")
    log(f"dataset: seeded {deposits:,} deposits in {time.monotonic() - started:.1f} s")
    return Dataset(db_url, deposits, seed_seconds=time.monotonic() - started)


def setup_django(db_url: str, env: dict[str, str]) -> None:
    """Django set up in this process on `db_url` (Django reads its settings from os.environ)."""
    os.environ.update({**env, "DATABASE_URL": db_url})
    import django

    django.setup()
    from django.conf import settings

    if (configured := settings.DATABASES["default"]["NAME"]) != database_name(db_url):
        raise SystemExit(f"bench: Django is already set up on {configured!r}, not the bench DB.")


def _seed_world(deposits: int) -> list[tuple]:
    """Tokens, operators, then each LAT with all that hangs from it (ORM, one transaction):
    (LAT id, spec, [(LatToken, its typical largest deposit)])."""
    from django.db import transaction

    from lats.models import Token
    from operators.models import Operator

    with transaction.atomic():
        tokens = {}
        for i, (symbol, (name, decimals, _, apy, _)) in enumerate(TOKENS.items()):
            fields = dict(chain_id=CHAIN_ID, address=address(f"token:{symbol}"), symbol=symbol)
            fields |= dict(name=name, decimals=decimals, ref_id=1000 + i, base_apy=Decimal(apy))
            tokens[symbol] = Token.objects.create(**fields)
        operators = []
        for i in range(OPERATORS):
            fields = dict(chain_id=CHAIN_ID, address=address(f"operator:{i}"))
            fields |= dict(metadata_name=f"Operator {i:02d}" if i % 4 else "")
            fields |= dict(metadata_website=f"https://operator{i}.example" if i % 3 else "")
            operators.append(Operator.objects.create(**fields))
        world = []
        for n, spec in enumerate(LATS):
            lat, avs = _seed_lat(n, spec, tokens)
            links = _seed_holdings(n, spec, lat, avs, tokens, operators)
            _seed_snapshots(spec, lat, deposits)
            world.append((lat.id, spec, [(k, TOKENS[k.token.symbol][4]) for k in links]))
        return world


def _seed_lat(n: int, spec: LatSpec, tokens: dict):
    """The LAT's AVS, the LAT and its fees."""
    from lats.models import Avs, FeeStructure, Lat
    from metrics.selectors import APY_WINDOWS

    base, name, tag = tokens.get(spec.base_symbol), spec.avs_name, f"lat:{spec.symbol}"
    avs = dict(chain_id=CHAIN_ID, address=address(f"avs:{name}"), metadata_name=name)
    avs |= dict(metadata_description=f"{name}, an actively validated service.")
    avs |= dict(metadata_website=f"https://{name.lower().replace(' ', '')}.example")
    avs |= dict(metadata_logo="https://avs.example/logo.png", metadata_social="https://x.com/avs")
    avs |= dict(tags=["restaking", "avs"], metadata_token_address=base.address if base else None)
    avs = Avs.objects.create(**avs)
    supply, contracts = _total_supply(spec), ("liquidToken", "liquidTokenManager")
    contracts += ("stakerNodeCoordinator",)
    eigenlayer = ("delegation_manager", "strategy_manager", "rewards_coordinator", "avs_directory")
    lat = dict(chain_id=CHAIN_ID, proxy_address=address(f"{tag}:proxy"), symbol=spec.symbol)
    lat |= dict(implementation_address=address(f"{tag}:impl"), avs=avs)
    lat |= dict(name=f"{spec.name} [bench v{DATASET_VERSION}]", base_asset_symbol=spec.base_symbol)
    lat |= dict(base_asset=BEACON_CHAIN_ETH if spec.base_symbol == "ETH" else base.address)
    lat |= dict(max_nodes=spec.nodes + 4, deployment_block=FIRST_BLOCK - 1000)
    lat["contract_deployments"] = {
        kind: {name: address(f"{tag}:{short}:{name}") for name in contracts}
        for kind, short in (("implementation", "impl"), ("proxy", "proxy"))
    }
    lat |= {f: address("eigenlayer:" + _camel(f)) for f in eigenlayer}
    lat |= dict(total_assets=supply * 1023 // 1000, total_supply=supply)
    lat |= dict(unit_eth_price=int(_unit_eth(spec) * WAD), state_block=FIRST_BLOCK + 2_700_000)
    lat["apys"] = {}
    for w, window in enumerate(APY_WINDOWS):
        apys = {"apy": f"{2.0 + n * 0.4 + w * 0.05:.4f}", "baseApy": "2.9"}
        apys |= {
            "nativeApy": f"{0.3 + w * 0.01:.4f}",
            "totalApy": f"{4.9 + n * 0.4 + w * 0.05:.4f}",
        }
        lat["apys"][window] = apys
    lat = Lat.objects.create(**lat)
    FeeStructure.objects.create(lat=lat, management_fee=Decimal("1.5"), performance_fee=10)
    return lat, avs


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


def _unit_eth(spec: LatSpec) -> Decimal:
    return Decimal(1) if spec.base_symbol == "ETH" else TOKENS[spec.base_symbol][2]


def _total_supply(spec: LatSpec) -> int:
    return 50_000 * WAD // max(1, int(_unit_eth(spec) * 10))


def _seed_holdings(n, spec, lat, avs, tokens, operators) -> list:
    """The LAT's tokens, staker nodes and their assets, AVS splits and checkpoint: its
    LatTokens."""
    from deposits.models import DepositCheckpoint
    from lats.models import LatToken
    from operators.models import NodeAsset, OperatorAvsSplit, StakerNode

    links = []
    for k, symbol in enumerate(spec.tokens):
        one, price = 10 ** TOKENS[symbol][1], int(TOKENS[symbol][2] / _unit_eth(spec) * WAD)
        link = dict(lat=lat, token=tokens[symbol], strategy_address=address(f"strategy:{symbol}"))
        link |= dict(volatility_threshold=5 * 10**16, decimals=TOKENS[symbol][1])
        link |= dict(price_per_unit=price, balance=(k + 3) * 37 * one)
        links.append(LatToken.objects.create(**link, queued_balance=(k + 1) * 5 * one))
    for i in range(spec.nodes):
        operator = None if i == spec.nodes - 1 else operators[(n * 5 + i) % OPERATORS]
        node = dict(lat=lat, address=address(f"lat:{spec.symbol}:node:{i}"), node_id=i)
        node |= dict(created_at_block=FIRST_BLOCK + i * 1000, operator=operator)
        node |= dict(updated_at_block=FIRST_BLOCK + 2_000_000 + i)
        node |= dict(created_at=FIRST_BLOCK_AT + dt.timedelta(hours=i))
        node = StakerNode.objects.create(
            **node, updated_at=FIRST_BLOCK_AT + dt.timedelta(days=300, hours=i)
        )
        for k, link in enumerate(links):
            asset = dict(node=node, token=link.token, strategy_address=link.strategy_address)
            one = (i + k + 1) * 10**link.decimals
            NodeAsset.objects.create(**asset, core_shares=one * 91, staked_amount=one * 93)
        if operator is not None and i % 2 == 0:
            split = {"split_bips": 500 + 100 * (i % 5)}
            OperatorAvsSplit.objects.get_or_create(operator=operator, avs=avs, defaults=split)
    block, block_hash = FIRST_BLOCK + 2_700_000, "0x" + "ab" * 32
    DepositCheckpoint.objects.create(lat=lat, block_number=block, block_hash=block_hash)
    return links


def _seed_snapshots(spec: LatSpec, lat, deposits: int) -> None:
    """A year of daily snapshots of the LAT."""
    from metrics.models import MetricSnapshot

    supply, day0 = _total_supply(spec), dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    snapshots = []
    for d in range(365):
        row = dict(lat=lat, timestamp=day0 + dt.timedelta(days=d), total_supply=supply)
        row |= dict(block_number=FIRST_BLOCK + 1_400_000 + d * 7200)
        row |= dict(total_assets=supply * (1000 + d // 16) // 1000)
        row |= dict(total_tvl_eth=Decimal(40_000 + d * 25), staked_tvl_eth=Decimal(30_000 + d * 20))
        row |= dict(unstaked_tvl_eth=Decimal(10_000 + d * 5), apy=Decimal("2.5"))
        row |= dict(base_apy=Decimal("2.9"), native_apy=Decimal("0.3"), total_apy=Decimal("5.4"))
        row |= dict(total_users=int(deposits * spec.share * (d + 1) / 2000))
        snapshots.append(MetricSnapshot(**row))
    MetricSnapshot.objects.bulk_create(snapshots)


DEPOSITS_SQL = """
INSERT INTO deposits_deposit (lat_id, chain_id, tx_hash, log_index, block_number, block_hash,
    created_at, kind, sender, receiver, asset, amount, shares)
WITH raw AS (
    SELECT g, random() AS r_lat, random() AS r_tok, random() AS r_snd, random() AS r_rcv,
           random() AS r_own, random() AS r_blk, random() AS r_log, random() AS r_amt,
           random() AS r_px, random() AS r_kind
    FROM generate_series(0, {n} - 1) AS g
), keyed AS (
    SELECT raw.*, l.lat_id, l.chain_id, l.pos, l.ntokens,
           -- ~2.6 blocks a deposit on average; a block now and then holds two deposits
           {first_block} + floor(g * 2.6 + r_blk * 4)::bigint AS block_number,
           -- distinct for the (at most adjacent) deposits that share a block
           (g % 7) * 40 + floor(r_log * 40)::int AS log_index
    FROM raw JOIN bench_lat l ON raw.r_lat >= l.lo AND raw.r_lat < l.hi
)
SELECT k.lat_id, k.chain_id, '0x' || md5('tx' || k.g) || md5('xt' || k.g),
       k.log_index, k.block_number,
       '0x' || md5('b' || k.block_number) || md5('h' || k.block_number),
       timestamptz '{first_at}' + (k.block_number - {first_block}) * interval '12 seconds',
       CASE WHEN k.r_kind < 0.03 THEN 'Deposit' ELSE 'AssetDeposited' END,
       s.address, CASE WHEN k.r_own < 0.85 THEN s.address ELSE r.address END, a.address,
       amt.amount, floor(amt.amount * a.unit_factor * (0.95 + 0.05 * k.r_px)::numeric)
FROM keyed k
JOIN bench_asset a ON a.pos = k.pos AND a.k = LEAST(floor(k.r_tok * k.ntokens)::int, k.ntokens - 1)
-- one depositor of a tenth of the deposits (WHALE_SHARE), a few heavy ones and a long tail
JOIN bench_addr s ON s.idx = CASE WHEN k.r_snd < {whale} THEN 0
                                  ELSE floor({pool} * power(k.r_snd, 3))::int END
JOIN bench_addr r ON r.idx = floor({pool} * k.r_rcv)::int
CROSS JOIN LATERAL (
    SELECT floor((0.001 + power(k.r_amt, 4)::numeric * a.max_whole) * a.one)::numeric AS amount
) amt
ORDER BY k.block_number, k.log_index
"""
SETUP_SQL = """
CREATE TEMP TABLE bench_addr (idx int PRIMARY KEY, address varchar(42));
CREATE TEMP TABLE bench_lat (
    pos int PRIMARY KEY, lat_id bigint, chain_id bigint, lo float8, hi float8, ntokens int);
CREATE TEMP TABLE bench_asset (pos int, k int, address varchar(42), max_whole numeric,
    one numeric, unit_factor numeric, PRIMARY KEY (pos, k));
"""
# The secondary indexes and constraints (unique, foreign keys) of some tables: kind "c" for a
# constraint, "i" for an index that backs none.
SECONDARY_SQL = """
SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid), 'c' FROM pg_constraint
WHERE conrelid = ANY(%(tables)s::regclass[]) AND contype IN ('u', 'f')
UNION ALL
SELECT indrelid::regclass::text, c.relname, pg_get_indexdef(indexrelid), 'i'
FROM pg_index JOIN pg_class c ON c.oid = indexrelid
WHERE indrelid = ANY(%(tables)s::regclass[]) AND NOT indisprimary
  AND indexrelid NOT IN (SELECT conindid FROM pg_constraint WHERE contype IN ('u', 'f'))
"""


def bulk_insert(db_url: str, tables: tuple[str, ...], fill, log) -> None:
    """`fill(cursor)` with the secondary indexes and constraints of `tables` dropped and rebuilt
    after it (one sort each instead of an index insertion per row), in one transaction; then
    VACUUM ANALYZE, what autovacuum would have done by now in production."""
    with connect(db_url) as conn, conn.cursor() as cur:
        cur.execute("SET synchronous_commit = off; SET work_mem = '256MB'")
        cur.execute("SET maintenance_work_mem = '512MB'")
        rebuild = []
        for table, name, definition, kind in conn.execute(SECONDARY_SQL, {"tables": list(tables)}):
            if kind == "c":
                cur.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
                rebuild.append(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')
            else:
                cur.execute(f'DROP INDEX "{name}"')
                rebuild.append(definition)
        started = time.monotonic()
        fill(cur)
        inserted = time.monotonic()
        for statement in rebuild:
            cur.execute(statement)
        conn.commit()
    with connect(db_url, autocommit=True) as conn:
        vacuum = time.monotonic()
        for table in tables:
            conn.execute(f"VACUUM (ANALYZE) {table}")
        conn.execute("ANALYZE")
    log(
        f"dataset: {', '.join(tables)} filled in {inserted - started:.1f} s, {len(rebuild)} "
        f"indexes and constraints rebuilt in {vacuum - inserted:.1f} s, VACUUM ANALYZE in "
        f"{time.monotonic() - vacuum:.1f} s"
    )


def _seed_deposits(db_url: str, world: list[tuple], deposits: int, log) -> None:
    lats, assets, low = [], [], 0.0
    for pos, (lat_id, spec, links) in enumerate(world):
        high = 1.0 if pos == len(world) - 1 else low + spec.share
        lats.append((pos, lat_id, CHAIN_ID, low, high, len(links)))
        low = high
        for k, (link, max_whole) in enumerate(links):
            # shares (1e18) per smallest token unit: to the unit of account, 1:1 supply
            factor = Decimal(10) ** (18 - link.decimals) * Decimal(link.price_per_unit) / WAD
            assets.append((pos, k, link.token.address, max_whole, 10**link.decimals, factor))
    at, pool, whale = FIRST_BLOCK_AT.isoformat(), ADDRESS_POOL, WHALE_SHARE
    sql = DEPOSITS_SQL.format(
        n=deposits, first_block=FIRST_BLOCK, first_at=at, pool=pool, whale=whale
    )

    def fill(cur) -> None:
        cur.execute(SETUP_SQL)
        with cur.copy("COPY bench_addr (idx, address) FROM STDIN") as copy:
            for i in range(ADDRESS_POOL + 1):
                copy.write_row((i, address(f"user:{i}")))
        cur.executemany("INSERT INTO bench_lat VALUES (%s, %s, %s, %s, %s, %s)", lats)
        cur.executemany("INSERT INTO bench_asset VALUES (%s, %s, %s, %s, %s, %s)", assets)
        cur.execute("ANALYZE bench_addr; ANALYZE bench_lat; ANALYZE bench_asset")
        cur.execute("SELECT setseed(0.4242)")
        cur.execute(sql)

    bulk_insert(db_url, ("deposits_deposit",), fill, log)


# --- the activity section's holders and events -----------------------------------------------

HOLDERS = 100_000
FORMER = 5_000  # rows at a zero balance: held once, not holders (not listed, not counted)
EVENTS = 1_000_000
ACTIVITY_TABLES = ("deposits_event", "deposits_holder", "deposits_holdertally")
ACTIVITY_TABLES += ("deposits_holderbucket",)
HOLDERS_SQL = """
INSERT INTO deposits_holder (lat_id, address, balance, first_block)
SELECT %(lat)s, '0x' || substr(md5('holder' || i) || md5('redloh' || i), 1, 40),
       CASE WHEN i < %(holders)s
            THEN floor(power(random(), 4) * 1e24)::numeric + 1 + (i %% 3) ELSE 0 END,
       %(first)s + floor(random() * 2500000)::bigint
FROM generate_series(0, %(holders)s + %(former)s - 1) AS i
"""
# Four events a block; the mix of a busy LAT: deposits with their mints, transfers, some burns,
# and the rare others. Addresses lower-case (the feed serves args as stored).
EVENTS_SQL = """
INSERT INTO deposits_event
    (lat_id, block_number, log_index, tx_hash, block_hash, created_at, type, args)
SELECT %(lat)s, b, li, '0x' || md5('tx' || g) || md5('xt' || g),
       '0x' || md5('b' || b) || md5('h' || b),
       timestamptz '2024-06-01T00:00:00Z' + (b - %(first)s) * interval '12 seconds', kind,
       CASE WHEN kind = 'deposit' THEN jsonb_build_object('sender', a1, 'receiver', a1,
                'asset', %(asset)s::text, 'amount', v::text, 'shares', (v * 99 / 100)::text)
            WHEN kind IN ('mint', 'transfer', 'burn') THEN jsonb_build_object(
                'from', CASE WHEN kind = 'mint' THEN %(zero)s::text ELSE a2 END,
                'to', CASE WHEN kind = 'burn' THEN %(zero)s::text ELSE a1 END, 'value', v::text)
            WHEN kind = 'priceUpdated' THEN jsonb_build_object('token', %(asset)s::text,
                'oldPrice', '1000000000000000000', 'newPrice', '1001000000000000000',
                'updater', a2)
            WHEN kind = 'nodeDelegated' THEN jsonb_build_object('nodeId', g %% 12, 'operator', a2)
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
# The tally, and the holders' rank buckets as the indexer keeps them: width_bucket over the
# buckets' floors (deposits.models.holder_bucket_floors) is each balance's key.
COUNTS_SQL = """
INSERT INTO deposits_holdertally (lat_id, holders, ever)
SELECT %(lat)s, count(*) FILTER (WHERE balance > 0), count(*)
FROM deposits_holder WHERE lat_id = %(lat)s;
INSERT INTO deposits_holderbucket (lat_id, key, holders)
SELECT %(lat)s, width_bucket(balance, %(floors)s::numeric[]), count(*)
FROM deposits_holder WHERE lat_id = %(lat)s AND balance > 0 GROUP BY 2
"""
# Whether the tables hold exactly this data set, for this LAT.
LOADED_SQL = """
SELECT (SELECT count(*) FROM deposits_event) = %(events)s
   AND (SELECT count(*) FROM deposits_event WHERE lat_id = %(lat)s) = %(events)s
   AND (SELECT count(*) FROM deposits_holder) = %(holders)s + %(former)s
   AND (SELECT holders FROM deposits_holdertally WHERE lat_id = %(lat)s) = %(holders)s
   AND (SELECT sum(holders) FROM deposits_holderbucket WHERE lat_id = %(lat)s) = %(holders)s
"""


def prepare_activity(db_url: str, proxy_address: str, log) -> float | None:
    """HOLDERS holders (and FORMER at a zero balance) with their tally and rank buckets, and
    EVENTS events, of the LAT, loaded unless the tables already hold exactly them: the seconds
    it took, or None when reused."""
    from deposits.models import holder_bucket_floors

    with connect(db_url) as conn:
        lat_id, asset = conn.execute(
            "SELECT l.id, lower(t.address) FROM lats_lat l"
            " JOIN lats_lattoken lt ON lt.lat_id = l.id JOIN lats_token t ON t.id = lt.token_id"
            " WHERE l.proxy_address = %s ORDER BY lt.id LIMIT 1",
            [proxy_address],
        ).fetchone()
        params = dict(lat=lat_id, holders=HOLDERS, former=FORMER, events=EVENTS, asset=asset)
        params |= dict(first=FIRST_BLOCK, zero="0x" + "0" * 40)
        if conn.execute(LOADED_SQL, params).fetchone()[0]:
            log(f"activity: {EVENTS:,} events and {HOLDERS:,} holders already loaded, reused")
            return None
    params["floors"] = [str(floor) for floor in holder_bucket_floors()]
    started = time.monotonic()

    def fill(cur) -> None:
        cur.execute(f"TRUNCATE {', '.join(ACTIVITY_TABLES)}")
        cur.execute("SELECT setseed(0.1717)")
        for sql in (HOLDERS_SQL, EVENTS_SQL, *COUNTS_SQL.split(";")):
            cur.execute(sql, params)

    bulk_insert(db_url, ACTIVITY_TABLES, fill, log)
    return time.monotonic() - started


if __name__ == "__main__":  # python -m bench.dataset DATABASE_URL DEPOSITS: prepare it here
    # (A section whose process already set Django up on another database seeds this way.)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "latsite.settings")
    prepare(sys.argv[1], dict(os.environ), int(sys.argv[2]), log=print)
