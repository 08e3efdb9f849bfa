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
import subprocess
import time
from dataclasses import dataclass, field
from decimal import Decimal
from urllib.parse import urlsplit, urlunsplit

import psycopg

from bench import PYTHON, REPO

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
    cmd = [PYTHON, "manage.py", *args]
    env = {**env, "DATABASE_URL": db_url}
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}{done.stderr}")


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


def _migration_files() -> dict[str, str]:
    """The project's migration files and a hash of each."""
    return {
        str(path.relative_to(REPO)): hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        for path in sorted(REPO.glob("*/migrations/[0-9]*.py"))
    }


def _migrate(db_url: str, env: dict[str, str], files: dict[str, str]) -> None:
    """Migrate, and record the migration files on the database (as its comment)."""
    manage(env, db_url, "migrate", "--noinput", "-v", "0")
    comment = json.dumps(files, sort_keys=True).replace("'", "''")
    with connect(db_url, autocommit=True) as conn:
        conn.execute(f"COMMENT ON DATABASE \"{database_name(db_url)}\" IS '{comment}'")


def _rewritten(db_url: str, files: dict[str, str]) -> list[str]:
    """Migrations applied to the database whose files changed since (edited in place)."""
    with connect(db_url) as conn:
        comment, migrated = conn.execute(
            "SELECT shobj_description(oid, 'pg_database'), to_regclass('django_migrations')"
            " FROM pg_database WHERE datname = current_database()"
        ).fetchone()
    try:
        recorded = json.loads(comment) if comment else None
    except ValueError:
        recorded = None
    if recorded is None:  # migrated by something else, or never: unknown
        return ["not recorded"] if migrated else []
    return [name for name, digest in recorded.items() if files.get(name) != digest]


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
    name, files = database_name(db_url), _migration_files()
    create_database(db_url, recreate=reseed)
    rewritten = _rewritten(db_url, files)
    if rewritten:
        log(f"dataset: migrations changed in place ({', '.join(rewritten)}); recreating")
        create_database(db_url, recreate=True)
    _migrate(db_url, env, files)
    any_lat, lats = _seeded(db_url, deposits)
    if lats is not None:
        log(f"dataset: {name} already seeded ({deposits:,} deposits), reused")
        return Dataset(db_url, deposits, lats)
    if any_lat:
        log(f"dataset: {name} holds another data set; recreating it")
        create_database(db_url, recreate=True)
        _migrate(db_url, env, files)
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
        tokens = {
            symbol: Token.objects.create(
                chain_id=CHAIN_ID,
                address=address(f"token:{symbol}"),
                symbol=symbol,
                name=name,
                decimals=decimals,
                ref_id=1000 + i,
                base_apy=Decimal(apy),
            )
            for i, (symbol, (name, decimals, _, apy, _)) in enumerate(TOKENS.items())
        }
        operators = [
            Operator.objects.create(
                chain_id=CHAIN_ID,
                address=address(f"operator:{i}"),
                metadata_name=f"Operator {i:02d}" if i % 4 else "",
                metadata_website=f"https://operator{i}.example" if i % 3 else "",
            )
            for i in range(OPERATORS)
        ]
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

    base = tokens.get(spec.base_symbol)
    avs = Avs.objects.create(
        chain_id=CHAIN_ID,
        address=address(f"avs:{spec.avs_name}"),
        metadata_name=spec.avs_name,
        metadata_description=f"{spec.avs_name}, an actively validated service.",
        metadata_website=f"https://{spec.avs_name.lower().replace(' ', '')}.example",
        metadata_logo="https://avs.example/logo.png",
        metadata_social="https://x.com/avs",
        tags=["restaking", "avs"],
        metadata_token_address=base.address if base else None,
    )
    unit_eth = _unit_eth(spec)
    total_supply = _total_supply(spec)
    contracts = ("liquidToken", "liquidTokenManager", "stakerNodeCoordinator")
    lat = Lat.objects.create(
        chain_id=CHAIN_ID,
        proxy_address=address(f"lat:{spec.symbol}:proxy"),
        implementation_address=address(f"lat:{spec.symbol}:impl"),
        name=f"{spec.name} [bench v{DATASET_VERSION}]",
        symbol=spec.symbol,
        avs=avs,
        base_asset=BEACON_CHAIN_ETH if spec.base_symbol == "ETH" else base.address,
        base_asset_symbol=spec.base_symbol,
        max_nodes=spec.nodes + 4,
        deployment_block=FIRST_BLOCK - 1000,
        contract_deployments={
            kind: {name: address(f"lat:{spec.symbol}:{tag}:{name}") for name in contracts}
            for kind, tag in (("implementation", "impl"), ("proxy", "proxy"))
        },
        delegation_manager=address("eigenlayer:delegationManager"),
        strategy_manager=address("eigenlayer:strategyManager"),
        rewards_coordinator=address("eigenlayer:rewardsCoordinator"),
        avs_directory=address("eigenlayer:avsDirectory"),
        total_assets=total_supply * 1023 // 1000,
        total_supply=total_supply,
        unit_eth_price=int(unit_eth * WAD),
        apys={
            window: {
                "apy": f"{2.0 + n * 0.4 + w * 0.05:.4f}",
                "baseApy": "2.9",
                "nativeApy": f"{0.3 + w * 0.01:.4f}",
                "totalApy": f"{4.9 + n * 0.4 + w * 0.05:.4f}",
            }
            for w, window in enumerate(APY_WINDOWS)
        },
        state_block=FIRST_BLOCK + 2_700_000,
    )
    FeeStructure.objects.create(lat=lat, management_fee=Decimal("1.5"), performance_fee=10)
    return lat, avs


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

    links = [
        LatToken.objects.create(
            lat=lat,
            token=tokens[symbol],
            strategy_address=address(f"strategy:{symbol}"),
            volatility_threshold=5 * 10**16,
            price_per_unit=int(TOKENS[symbol][2] / _unit_eth(spec) * WAD),
            decimals=TOKENS[symbol][1],
            balance=(k + 3) * 37 * 10 ** TOKENS[symbol][1],
            queued_balance=(k + 1) * 5 * 10 ** TOKENS[symbol][1],
        )
        for k, symbol in enumerate(spec.tokens)
    ]
    for i in range(spec.nodes):
        operator = None if i == spec.nodes - 1 else operators[(n * 5 + i) % OPERATORS]
        node = StakerNode.objects.create(
            lat=lat,
            address=address(f"lat:{spec.symbol}:node:{i}"),
            node_id=i,
            operator=operator,
            created_at_block=FIRST_BLOCK + i * 1000,
            created_at=FIRST_BLOCK_AT + dt.timedelta(hours=i),
            updated_at_block=FIRST_BLOCK + 2_000_000 + i,
            updated_at=FIRST_BLOCK_AT + dt.timedelta(days=300, hours=i),
        )
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
    DepositCheckpoint.objects.create(
        lat=lat, block_number=FIRST_BLOCK + 2_700_000, block_hash="0x" + "ab" * 32
    )
    return links


def _seed_snapshots(spec: LatSpec, lat, deposits: int) -> None:
    """A year of daily snapshots of the LAT."""
    from metrics.models import MetricSnapshot

    supply, day0 = _total_supply(spec), dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    MetricSnapshot.objects.bulk_create(
        MetricSnapshot(
            lat=lat,
            timestamp=day0 + dt.timedelta(days=d),
            block_number=FIRST_BLOCK + 1_400_000 + d * 7200,
            total_assets=supply * (1000 + d // 16) // 1000,
            total_supply=supply,
            total_tvl_eth=Decimal(40_000 + d * 25),
            staked_tvl_eth=Decimal(30_000 + d * 20),
            unstaked_tvl_eth=Decimal(10_000 + d * 5),
            apy=Decimal("2.5"),
            base_apy=Decimal("2.9"),
            native_apy=Decimal("0.3"),
            total_apy=Decimal("5.4"),
            total_users=int(deposits * spec.share * (d + 1) / 2000),
        )
        for d in range(365)
    )


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


def _drop_secondary(conn: psycopg.Connection, table: str) -> list[str]:
    """Drop a table's indexes and constraints but its primary key; returns how to rebuild them."""
    constraints = conn.execute(
        "SELECT conname, pg_get_constraintdef(oid), conindid FROM pg_constraint"
        " WHERE conrelid = %s::regclass AND contype IN ('u', 'f')",
        [table],
    ).fetchall()
    backing = {indid for _, _, indid in constraints if indid}
    indexes = conn.execute(
        "SELECT i.indexrelid, c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i"
        " JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE i.indrelid = %s::regclass AND NOT i.indisprimary",
        [table],
    ).fetchall()
    rebuild: list[str] = []
    for name, definition, _ in constraints:
        conn.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
        rebuild.append(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')
    for oid, name, definition in indexes:
        if oid in backing:
            continue
        conn.execute(f'DROP INDEX "{name}"')
        rebuild.append(definition)
    return rebuild


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
    with connect(db_url) as conn, conn.cursor() as cur:
        cur.execute(SETUP_SQL)
        with cur.copy("COPY bench_addr (idx, address) FROM STDIN") as copy:
            for i in range(ADDRESS_POOL + 1):
                copy.write_row((i, address(f"user:{i}")))
        cur.executemany("INSERT INTO bench_lat VALUES (%s, %s, %s, %s, %s, %s)", lats)
        cur.executemany("INSERT INTO bench_asset VALUES (%s, %s, %s, %s, %s, %s)", assets)
        cur.execute("ANALYZE bench_addr; ANALYZE bench_lat; ANALYZE bench_asset")
        cur.execute("SELECT setseed(0.4242)")
        started = time.monotonic()
        # Bulk-load practice: drop the secondary indexes and constraints, insert, rebuild them
        # (one sort each instead of a million index insertions), all in one transaction.
        rebuild = _drop_secondary(conn, "deposits_deposit")
        first_at, pool = FIRST_BLOCK_AT.isoformat(), ADDRESS_POOL
        cur.execute(
            DEPOSITS_SQL.format(
                n=deposits, first_block=FIRST_BLOCK, first_at=first_at, pool=pool, whale=WHALE_SHARE
            )
        )
        inserted = time.monotonic()
        for statement in rebuild:
            cur.execute(statement)
        conn.commit()
        log(
            f"dataset: inserted {deposits:,} deposits in {inserted - started:.1f} s, "
            f"rebuilt {len(rebuild)} indexes and constraints in {time.monotonic() - inserted:.1f} s"
        )
    with connect(db_url, autocommit=True) as conn:
        started = time.monotonic()
        # What autovacuum would have done by now in production: statistics and a visibility map.
        conn.execute("VACUUM (ANALYZE) deposits_deposit")
        conn.execute("ANALYZE")
        log(f"dataset: VACUUM ANALYZE in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":  # python -m bench.dataset DATABASE_URL DEPOSITS: prepare it here
    # (A section whose process already set Django up on another database seeds this way.)
    import sys

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "latsite.settings")
    prepare(sys.argv[1], dict(os.environ), deposits=int(sys.argv[2]), reseed=False, log=print)
