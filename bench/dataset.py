"""The bench database: created, migrated and seeded once, then reused while it still matches.

The world (4 LATs, 2-3 tokens each, staker nodes, operators, a year of daily snapshots) goes
through the ORM; the deposits are one `INSERT ... SELECT generate_series(...)`, then counted
into the listing's counts (deposits.services.deposit_recount) as the indexer would have.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from decimal import Decimal
from urllib.parse import urlsplit, urlunsplit

import psycopg

from bench import REPO, python

# Bump when the seeded world changes: the marker addresses change with it, forcing a reseed.
DATASET_VERSION = 2
CHAIN_ID = 1
FIRST_BLOCK = 20_000_000  # mainnet, early June 2024
FIRST_BLOCK_AT = dt.datetime(2024, 6, 1, tzinfo=dt.UTC)
ADDRESS_POOL = 20_000  # distinct depositor addresses
WHALE_SHARE = 0.1  # the deposits of address(user:0): 100,000 of a million
BEACON_CHAIN_ETH = "0xbeaC0eeEeeeeEEeEeEEEEeeEEeEeeeEeeEEBEaC0"
WAD = 10**18

# symbol: (name, decimals, unit price in ETH, base APY %, typical largest deposit in tokens)
TOKENS: dict[str, tuple[str, int, Decimal, str, Decimal]] = {
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
OPERATORS = 16


def address(tag: str) -> str:
    """A deterministic, EIP-55 checksummed address for a tag."""
    from eth_utils import to_checksum_address

    digest = hashlib.sha256(f"lat-bench-v{DATASET_VERSION}:{tag}".encode()).hexdigest()
    return to_checksum_address("0x" + digest[:40])


@dataclass
class Dataset:
    db_url: str
    deposits: int
    lats: list[str] = field(default_factory=list)  # the marker LATs' proxy addresses
    seed_seconds: float | None = None  # None: reused

    @property
    def primary_lat(self) -> str:
        return self.lats[0]


# --- the database ---------------------------------------------------------------------------


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


def _migrate(db_url: str, env: dict[str, str], log) -> None:
    """Migrate: afresh when a migration applied to the database changed since (edited in place,
    which `migrate` would not notice), then record the migration files' hashes as the
    database's comment."""
    files = {
        str(path.relative_to(REPO)): hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        for path in sorted(REPO.glob("*/migrations/[0-9]*.py"))
    }
    with connect(db_url) as conn:
        comment, migrated = conn.execute(
            "SELECT shobj_description(oid, 'pg_database'), to_regclass('django_migrations')"
            " FROM pg_database WHERE datname = current_database()"
        ).fetchone()
    try:
        recorded = json.loads(comment) if comment else None
    except ValueError:
        recorded = None
    rewritten = [n for n, digest in (recorded or {}).items() if files.get(n) != digest]
    if rewritten or (migrated and recorded is None):  # or migrated by something else
        log(f"dataset: migrations changed in place ({', '.join(rewritten)}); recreating")
        create_database(db_url, recreate=True)
    manage(env, db_url, "migrate", "--noinput")
    comment = json.dumps(files, sort_keys=True).replace("'", "''")
    with connect(db_url, autocommit=True) as conn:
        conn.execute(f"COMMENT ON DATABASE \"{database_name(db_url)}\" IS '{comment}'")


def _seeded(db_url: str, deposits: int) -> tuple[bool, list[str] | None]:
    """(whether the database holds any LAT, the marker LATs if it holds exactly this data set)."""
    markers = [address(f"lat:{spec.symbol}:proxy") for spec in LATS]
    with connect(db_url) as conn:
        found, any_lat = conn.execute(
            "SELECT count(*) FILTER (WHERE proxy_address = ANY(%s)), count(*) > 0 FROM lats_lat",
            [markers],
        ).fetchone()
        rows, counted = conn.execute(
            "SELECT (SELECT count(*) FROM deposits_deposit),"
            " (SELECT sum(n) FROM deposits_depositcount WHERE field = '')"
        ).fetchone()
    same = found == len(markers) and rows == counted == deposits
    return any_lat, markers if same else None


def prepare(db_url: str, env: dict[str, str], *, deposits: int, reseed: bool, log) -> Dataset:
    """Make the bench database hold the data set; seed it only when it does not already.

    New migrations are applied to the seeded data; a migration edited in place since the
    database was migrated (which `migrate` would not notice) makes it start afresh.
    """
    name = database_name(db_url)
    create_database(db_url, recreate=reseed)
    _migrate(db_url, env, log)
    any_lat, lats = _seeded(db_url, deposits)
    if lats is not None:
        log(f"dataset: {name} already seeded ({deposits:,} deposits), reused")
        return Dataset(db_url, deposits, lats)
    if any_lat:
        log(f"dataset: {name} holds another data set; recreating it")
        create_database(db_url, recreate=True)
        _migrate(db_url, env, log)
    started = time.monotonic()
    setup_django(db_url, env)
    world = _seed_world(deposits)
    log(f"dataset: world (LATs, tokens, nodes, operators) in {time.monotonic() - started:.1f} s")
    _seed_deposits(db_url, world, deposits, log)
    counting = time.monotonic()
    from deposits.services import deposit_recount

    deposit_recount()
    log(f"dataset: counted the deposits per filter and span in {time.monotonic() - counting:.1f} s")
    lats = _seeded(db_url, deposits)[1]
    if lats is None:
        raise SystemExit("bench: seeding finished but the data set does not check out.")
    elapsed = time.monotonic() - started
    log(f"dataset: seeded {deposits:,} deposits in {elapsed:.1f} s")
    return Dataset(db_url, deposits, lats, seed_seconds=elapsed)


# --- seeding --------------------------------------------------------------------------------


def setup_django(db_url: str, env: dict[str, str]) -> None:
    """Django set up in this process on `db_url`: Django reads its settings from os.environ."""
    os.environ.update({**env, "DATABASE_URL": db_url})
    import django

    django.setup()
    from django.conf import settings

    configured = settings.DATABASES["default"]["NAME"]
    if configured != database_name(db_url):
        raise SystemExit(f"bench: Django is already set up on {configured!r}, not the bench DB.")


def _seed_world(deposits: int) -> list[dict]:
    """Tokens, operators, then each LAT with all that hangs from it (ORM, one transaction)."""
    from django.db import transaction

    from lats.models import Token
    from operators.models import Operator

    with transaction.atomic():
        tokens = {}
        for i, (symbol, (name, decimals, _, apy, _)) in enumerate(TOKENS.items()):
            tokens[symbol] = Token.objects.create(
                chain_id=CHAIN_ID, address=address(f"token:{symbol}"), symbol=symbol, name=name,
                decimals=decimals, ref_id=1000 + i, base_apy=Decimal(apy),
            )  # fmt: skip
        operators = []
        for i in range(OPERATORS):
            operators.append(Operator.objects.create(
                chain_id=CHAIN_ID, address=address(f"operator:{i}"),
                metadata_name=f"Operator {i:02d}" if i % 4 else "",
                metadata_website=f"https://operator{i}.example" if i % 3 else "",
            ))  # fmt: skip
        world = []
        for n, spec in enumerate(LATS):
            lat, avs = _seed_lat(n, spec, tokens)
            links = _seed_holdings(n, spec, lat, avs, tokens, operators)
            _seed_snapshots(spec, lat, deposits)
            links = [(link, TOKENS[link.token.symbol][4]) for link in links]
            world.append({"lat_id": lat.id, "spec": spec, "links": links})
        return world


def _seed_lat(n: int, spec: LatSpec, tokens: dict):
    """The LAT's AVS, the LAT and its fees."""
    from lats.models import Avs, FeeStructure, Lat
    from metrics.selectors import APY_WINDOWS

    base, name = tokens.get(spec.base_symbol), spec.avs_name
    avs = Avs.objects.create(
        chain_id=CHAIN_ID, address=address(f"avs:{name}"), metadata_name=name,
        metadata_description=f"{name}, an actively validated service.",
        metadata_website=f"https://{name.lower().replace(' ', '')}.example",
        metadata_logo="https://avs.example/logo.png", metadata_social="https://x.com/avs",
        tags=["restaking", "avs"], metadata_token_address=base.address if base else None,
    )  # fmt: skip
    supply, tag = _total_supply(spec), f"lat:{spec.symbol}"
    contracts = ("liquidToken", "liquidTokenManager", "stakerNodeCoordinator")
    eigenlayer = ("delegation_manager", "strategy_manager", "rewards_coordinator", "avs_directory")
    lat = Lat.objects.create(
        chain_id=CHAIN_ID, proxy_address=address(f"{tag}:proxy"),
        implementation_address=address(f"{tag}:impl"), symbol=spec.symbol, avs=avs,
        name=f"{spec.name} [bench v{DATASET_VERSION}]", base_asset_symbol=spec.base_symbol,
        base_asset=BEACON_CHAIN_ETH if spec.base_symbol == "ETH" else base.address,
        max_nodes=spec.nodes + 4, deployment_block=FIRST_BLOCK - 1000,
        contract_deployments={
            kind: {name: address(f"{tag}:{short}:{name}") for name in contracts}
            for kind, short in (("implementation", "impl"), ("proxy", "proxy"))
        },
        **{field: address("eigenlayer:" + _camel(field)) for field in eigenlayer},
        total_assets=supply * 1023 // 1000, total_supply=supply,
        unit_eth_price=int(_unit_eth(spec) * WAD), state_block=FIRST_BLOCK + 2_700_000,
        apys={
            window: {
                "apy": f"{2.0 + n * 0.4 + w * 0.05:.4f}", "baseApy": "2.9",
                "nativeApy": f"{0.3 + w * 0.01:.4f}", "totalApy": f"{4.9 + n * 0.4 + w * 0.05:.4f}",
            }
            for w, window in enumerate(APY_WINDOWS)
        },
    )  # fmt: skip
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
    """The LAT's tokens, staker nodes and their assets, AVS splits and checkpoint; returns its
    LatTokens."""
    from deposits.models import DepositCheckpoint
    from lats.models import LatToken
    from operators.models import NodeAsset, OperatorAvsSplit, StakerNode

    links = []
    for k, symbol in enumerate(spec.tokens):
        decimals = TOKENS[symbol][1]
        links.append(LatToken.objects.create(
            lat=lat, token=tokens[symbol], strategy_address=address(f"strategy:{symbol}"),
            volatility_threshold=5 * 10**16, decimals=decimals,
            price_per_unit=int(TOKENS[symbol][2] / _unit_eth(spec) * WAD),
            balance=(k + 3) * 37 * 10**decimals, queued_balance=(k + 1) * 5 * 10**decimals,
        ))  # fmt: skip
    for i in range(spec.nodes):
        operator = None if i == spec.nodes - 1 else operators[(n * 5 + i) % OPERATORS]
        node = StakerNode.objects.create(
            lat=lat, address=address(f"lat:{spec.symbol}:node:{i}"), node_id=i, operator=operator,
            created_at_block=FIRST_BLOCK + i * 1000, updated_at_block=FIRST_BLOCK + 2_000_000 + i,
            created_at=FIRST_BLOCK_AT + dt.timedelta(hours=i),
            updated_at=FIRST_BLOCK_AT + dt.timedelta(days=300, hours=i),
        )  # fmt: skip
        NodeAsset.objects.bulk_create(
            NodeAsset(
                node=node,
                token=link.token,
                strategy_address=link.strategy_address,
                core_shares=(i + k + 1) * 91 * 10**link.decimals,
                staked_amount=(i + k + 1) * 93 * 10**link.decimals,
            )
            for k, link in enumerate(links)
        )
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
        snapshots.append(MetricSnapshot(
            lat=lat, timestamp=day0 + dt.timedelta(days=d), total_supply=supply,
            block_number=FIRST_BLOCK + 1_400_000 + d * 7200,
            total_assets=supply * (1000 + d // 16) // 1000, total_tvl_eth=Decimal(40_000 + d * 25),
            staked_tvl_eth=Decimal(30_000 + d * 20), unstaked_tvl_eth=Decimal(10_000 + d * 5),
            apy=Decimal("2.5"), base_apy=Decimal("2.9"), native_apy=Decimal("0.3"),
            total_apy=Decimal("5.4"), total_users=int(deposits * spec.share * (d + 1) / 2000),
        ))  # fmt: skip
    MetricSnapshot.objects.bulk_create(snapshots)


DEPOSITS_SQL = """
INSERT INTO deposits_deposit (
    lat_id, chain_id, tx_hash, log_index, block_number, block_hash, created_at, kind,
    sender, receiver, asset, amount, shares
)
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
SELECT k.lat_id, k.chain_id,
       '0x' || md5('tx' || k.g) || md5('xt' || k.g),
       k.log_index, k.block_number,
       '0x' || md5('b' || k.block_number) || md5('h' || k.block_number),
       timestamptz '{first_at}' + (k.block_number - {first_block}) * interval '12 seconds',
       CASE WHEN k.r_kind < 0.03 THEN 'Deposit' ELSE 'AssetDeposited' END,
       s.address,
       CASE WHEN k.r_own < 0.85 THEN s.address ELSE r.address END,
       a.address,
       amt.amount,
       floor(amt.amount * a.unit_factor * (0.95 + 0.05 * k.r_px)::numeric)
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


def bulk_insert(db_url: str, tables: tuple[str, ...], fill, log) -> None:
    """Bulk-load practice: `fill(cursor)` runs with the secondary indexes and constraints of
    `tables` dropped (the primary keys kept) and rebuilt after it, one sort each instead of an
    index insertion per row, all in one transaction; then VACUUM ANALYZE, what autovacuum would
    have done by now in production (statistics and a visibility map)."""
    with connect(db_url) as conn, conn.cursor() as cur:
        cur.execute("SET synchronous_commit = off; SET work_mem = '256MB'")
        cur.execute("SET maintenance_work_mem = '512MB'")
        rebuild = []
        secondary = conn.execute(SECONDARY_SQL, {"tables": list(tables)}).fetchall()
        for table, name, definition, kind in secondary:
            drop = "ALTER TABLE {} DROP CONSTRAINT" if kind == "c" else "DROP INDEX"
            cur.execute(f'{drop.format(table)} "{name}"')
            rebuild.append(
                f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}'
                if kind == "c"
                else definition
            )
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


SETUP_SQL = """
SET synchronous_commit = off; SET work_mem = '256MB'; SET maintenance_work_mem = '512MB';
CREATE TEMP TABLE bench_addr (idx int PRIMARY KEY, address varchar(42));
CREATE TEMP TABLE bench_lat (
    pos int PRIMARY KEY, lat_id bigint, chain_id bigint, lo float8, hi float8, ntokens int
);
CREATE TEMP TABLE bench_asset (
    pos int, k int, address varchar(42), max_whole numeric, one numeric, unit_factor numeric,
    PRIMARY KEY (pos, k)
);
"""


def _seed_deposits(db_url: str, world: list[dict], deposits: int, log) -> None:
    lats, assets, low = [], [], 0.0
    for pos, item in enumerate(world):
        high = 1.0 if pos == len(world) - 1 else low + item["spec"].share
        lats.append((pos, item["lat_id"], CHAIN_ID, low, high, len(item["links"])))
        low = high
        for k, (link, max_whole) in enumerate(item["links"]):
            # shares (1e18) per smallest token unit: to the unit of account, 1:1 supply
            factor = Decimal(10) ** (18 - link.decimals) * Decimal(link.price_per_unit) / WAD
            assets.append((pos, k, link.token.address, max_whole, 10**link.decimals, factor))
    sql = DEPOSITS_SQL.format(
        n=deposits, first_block=FIRST_BLOCK, first_at=FIRST_BLOCK_AT.isoformat(),
        pool=ADDRESS_POOL, whale=WHALE_SHARE,
    )  # fmt: skip

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
SELECT (SELECT count(*) FROM deposits_event),
       (SELECT count(*) FROM deposits_event WHERE lat_id = %(lat)s),
       (SELECT count(*) FROM deposits_holder),
       (SELECT holders FROM deposits_holdertally WHERE lat_id = %(lat)s),
       (SELECT sum(holders) FROM deposits_holderbucket WHERE lat_id = %(lat)s)
"""


def prepare_activity(db_url: str, proxy_address: str, log) -> float | None:
    """HOLDERS holders (and FORMER former ones at a zero balance) with their tally and rank
    buckets, and EVENTS events, of the LAT, loaded unless the tables already hold exactly them:
    the seconds it took, or None when reused."""
    from deposits.models import holder_bucket_floors

    with connect(db_url) as conn:
        lat_id, asset = conn.execute(
            "SELECT l.id, lower(t.address) FROM lats_lat l"
            " JOIN lats_lattoken lt ON lt.lat_id = l.id JOIN lats_token t ON t.id = lt.token_id"
            " WHERE l.proxy_address = %s ORDER BY lt.id LIMIT 1",
            [proxy_address],
        ).fetchone()
        if conn.execute(LOADED_SQL, {"lat": lat_id}).fetchone() == (
            EVENTS, EVENTS, HOLDERS + FORMER, HOLDERS, HOLDERS
        ):  # fmt: skip
            log(f"activity: {EVENTS:,} events and {HOLDERS:,} holders already loaded, reused")
            return None
    params = {
        "lat": lat_id, "holders": HOLDERS, "former": FORMER, "events": EVENTS,
        "first": FIRST_BLOCK, "asset": asset, "zero": "0x" + "0" * 40,
        "floors": [str(floor) for floor in holder_bucket_floors()],
    }  # fmt: skip
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
    prepare(sys.argv[1], dict(os.environ), deposits=int(sys.argv[2]), reseed=False, log=print)
