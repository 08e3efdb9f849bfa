"""Schemathesis against a live server: the OpenAPI schema tells the truth.

A live server (pytest-django's `live_server`) serves a database filled from the devnet
(`lat_import` + `lat_sync`, after a real deposit into each LAT), with the rate limits set out of
reach and `RPC_URL` on the devnet's anvil, so that simulate-deposit reaches a node (and funded,
approving wallets, so that some simulations succeed). Schemathesis loads the schema the server
serves and runs every phase (examples, coverage, fuzzing; stateful, which finds no links between
these operations) with every check, in positive and negative mode. `map_case` mixes the real
LAT, token, operator, AVS and wallet addresses into the generated requests, with edge values of
the historical window (0001-01-01, 9999-12-31T23:59:59-05:00) and of paging (skip up to 10^18-1),
so that the endpoints' real logic runs, not only their 404s; and one request in four carries an
X-API-Token: a key the service knows, a disabled one, or an unknown or malformed one.

Schemathesis's own `positive_data_acceptance` (which lets any 401, 403, 404, 409 or 429 through)
is replaced by a stricter check: a request the schema allows gets a 2xx, except a refusal
`excuse` names from the request alone:
- 401 for an X-API-Token the service does not know, 403 for the disabled key;
- on the webhook operations (nine in ten of which get the known key, its endpoint and
  delivery, and a receiver's URL): 401 without a key, 404 for another endpoint or delivery,
  422 for a URL breaking a rule (one that does not resolve, here) or a deliveries cursor the
  service did not make;
- 404 for a path address that names nothing the service knows (the schema cannot list them);
- 400 for a body over DEPOSIT_BODY_MAX_BYTES (OpenAPI has no byte limit);
- 422 for a documented rule OpenAPI cannot state: `assets` and `amounts` of unequal length, an
  asset the LAT does not support, a zero amount or one of 2^256 or more, a zero receiver, a
  historical window reversed or too long, a startAt/endAt outside 1970-01-01..9999-12-30, or
  a deposits or events `cursor` the service did not return in `meta.next` (or sent with a
  non-zero skip), an events `fromBlock` above its `toBlock`; for the rates, a `from`/`to`
  outside 1970-01-01..9999-12-30 or reversed, or a `cursor` the service did not make.
"""

from __future__ import annotations

import os
import random
import threading
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from typing import Any

import pytest
import requests
import schemathesis
from django.conf import settings
from django.core.management import call_command
from hypothesis.configuration import set_hypothesis_home_dir
from rest_framework_api_key.models import APIKey
from schemathesis.config import SchemathesisConfig
from schemathesis.core.failures import Failure
from schemathesis.engine import events

from devchain.devnet import make_deposits, write_manifests
from tests.webhooks.receivers import Receiver
from webhooks.services import EndpointFields, endpoint_create, endpoint_test

pytestmark = [pytest.mark.chain, pytest.mark.xdist_group("schemathesis")]

WAD = 10**18
UINT256_MAX = 2**256 - 1
ZERO = "0x" + "0" * 40
API_KEY_HEADER = "X-API-Token"
MAX_EXAMPLES = int(os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "50"))
SEED = int(os.environ.get("SCHEMATHESIS_SEED", "20260501"))
# Instants the historical endpoint serves (its documented range) and its window rules.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 12, 31, tzinfo=UTC)  # exclusive
DEFAULT_WINDOW = {"1d": timedelta(days=31), "7d": timedelta(days=365)}
MAX_WINDOW = {"1d": timedelta(days=365), "7d": timedelta(days=720)}
# Edge values mixed into generated queries.
EDGE_INSTANTS = [
    "0001-01-01",
    "9999-12-31T23:59:59-05:00",
    "9999-12-30",
    "1970-01-01T00:00:00Z",
    "2026-05-01",
    "2026-05-01T12:30:00",
]
EDGE_SKIPS = [0, 1, 10**15, 10**18 - 1]
OK = (200, 201, 204)


# --- the world the server knows ---------------------------------------------------------------


@dataclass
class World:
    lats: dict[str, set[str]]  # LAT proxy (lower case) -> supported tokens (lower case)
    tokens: set[str]
    operators: set[str]
    avss: set[str]
    wallets: list[str]
    api_key: str = ""  # a key the service knows
    revoked_key: str = ""  # a known key, disabled
    api_key_id: str = ""
    webhook_id: str = ""  # the known key's webhook endpoint
    webhook_url: str = ""  # a receiver on loopback that answers 200
    delivery_id: int = 0  # a delivery to that endpoint

    def known(self, path: str) -> set[str]:
        """Addresses the path's {address} may name without a 404."""
        if path.startswith("/lat/operators/"):
            return self.operators
        if path.startswith("/lat/avs/"):
            return self.avss
        if path.startswith("/lat/exchange/"):
            return set(self.lats) | self.tokens
        return set(self.lats)


def _world(chain) -> World:
    from lats.models import Avs, Lat, LatToken, Token
    from operators.models import Operator

    lats: dict[str, set[str]] = {lat.proxy_address.lower(): set() for lat in Lat.objects.all()}
    for link in LatToken.objects.select_related("lat", "token"):
        lats[link.lat.proxy_address.lower()].add(link.token.address.lower())
    return World(
        lats=lats,
        tokens={a.lower() for a in Token.objects.values_list("address", flat=True)},
        operators={a.lower() for a in Operator.objects.values_list("address", flat=True)},
        avss={a.lower() for a in Avs.objects.values_list("address", flat=True)},
        wallets=[chain.account(i) for i in (1, 2, 3)],
    )


def _fund(chain, wallet: str) -> None:
    """Give `wallet` plenty of every token, each approved to its LATs, so that simulated
    deposits from it can succeed."""
    for manifest in chain.manifests:
        for token in manifest["tokens"]:
            erc20 = chain.contract("TestERC20", token["address"])
            for call in (
                erc20.functions.mint(wallet, 10**30),
                erc20.functions.approve(manifest["proxyAddress"], UINT256_MAX),
            ):
                chain.w3.eth.wait_for_transaction_receipt(call.transact({"from": wallet}))


@pytest.fixture
def _hypothesis_home(tmp_path) -> Iterator[None]:
    """Hypothesis keeps its files under the test's tmp_path, not in the work tree."""
    set_hypothesis_home_dir(str(tmp_path / "hypothesis"))
    yield
    set_hypothesis_home_dir(None)


@pytest.fixture
def served(
    chain,
    settings,
    tmp_path,
    transactional_db,
    _hypothesis_home,
    live_server,
    receiver,
) -> World:
    """The devnet's LATs, imported and synced after a deposit into each, served live."""
    settings.RPC_URL = chain.url
    for name in ("RATE_LIMIT_ANON", "RATE_LIMIT_KEYED", "RATE_LIMIT_SIMULATE"):
        setattr(settings, name, "1000000/min")
    for index, manifest in enumerate(chain.manifests):
        token = manifest["tokens"][0]["address"]
        make_deposits(chain.url, manifest, 1 + index % 3, [token], [WAD])
    for wallet in (1, 2, 3):  # every wallet the requests name (World.wallets)
        _fund(chain, chain.account(wallet))
    call_command("lat_import", *map(str, write_manifests(chain.manifests, tmp_path)))
    call_command("lat_sync", "--no-progress")
    world = _world(chain)
    _, world.api_key = APIKey.objects.create_key(name="schemathesis")
    _, world.revoked_key = APIKey.objects.create_key(name="schemathesis-revoked", revoked=True)
    _webhooks_world(world, settings, receiver)
    assert world.lats
    assert world.tokens
    assert world.operators
    assert world.avss
    return world


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.stop()


def _webhooks_world(world: World, settings, receiver: Receiver) -> None:
    """A webhook endpoint of the known key, on a receiver on loopback (allowed here), with one
    delivery."""
    settings.WEBHOOK_ALLOW_HTTP = True
    settings.WEBHOOK_ALLOW_PRIVATE_HOSTS = True
    settings.WEBHOOK_ALLOWED_PORTS = [receiver.port]
    settings.WEBHOOKS_PER_KEY = 10**6
    settings.WEBHOOK_TIMEOUT = 2.0
    key = APIKey.objects.get_from_key(world.api_key)
    world.api_key_id = key.pk
    world.webhook_url = receiver.url()
    endpoint = endpoint_create(api_key=key, fields=EndpointFields(url=world.webhook_url))
    world.webhook_id = endpoint.public_id
    world.delivery_id = endpoint_test(endpoint=endpoint).delivery_id


def _spare_webhook(world: World) -> str:
    """An endpoint of the known key for a DELETE to remove (the world's own one stays)."""
    key = APIKey.objects.get(pk=world.api_key_id)
    return endpoint_create(api_key=key, fields=EndpointFields(url=world.webhook_url)).public_id


def _webhooks_case(case, world: World, rng: random.Random) -> None:
    """Webhook operations need the key and the key's own endpoint: nine cases in ten get them
    (and a URL the service accepts), whatever the mode."""
    if not case.operation.path.startswith("/webhooks"):
        return
    headers = case.headers or {}
    if API_KEY_HEADER not in headers and rng.random() < 0.9:
        case.headers = {**headers, API_KEY_HEADER: world.api_key}
    params = case.path_parameters
    if params and "id" in params and rng.random() < 0.9:
        delete = case.method.upper() == "DELETE"
        params["id"] = _spare_webhook(world) if delete else world.webhook_id
    if params and "deliveryId" in params and rng.random() < 0.9:
        params["deliveryId"] = world.delivery_id
    body = case.body if isinstance(case.body, dict) else None
    if body is not None and "url" in body and rng.random() < 0.9:
        body["url"] = world.webhook_url


# --- real addresses and edge values in generated requests ------------------------------------


def _pick(rng: random.Random, options: list[str], generated: Any) -> Any:
    """Three times in four a real value, else what Schemathesis generated."""
    return rng.choice(options) if options and rng.random() < 0.75 else generated


def _realistic(case, world: World, rng: random.Random) -> None:
    """Put real addresses and edge values into a positive case, in place."""
    path = case.operation.path
    if case.path_parameters and "address" in case.path_parameters:
        known = sorted(world.known(path))
        case.path_parameters["address"] = _pick(rng, known, case.path_parameters["address"])
    query = case.query if isinstance(case.query, dict) else None
    if query is not None:
        for name in ("startAt", "endAt", "from", "to"):
            if name in query:
                query[name] = _pick(rng, EDGE_INSTANTS, query[name])
        if "skip" in query:
            query["skip"] = _pick(rng, EDGE_SKIPS, query["skip"])
        if "liquidTokenAddress" in query:
            query["liquidTokenAddress"] = _pick(
                rng, sorted(world.lats), query["liquidTokenAddress"]
            )
        if "asset" in query:
            query["asset"] = _pick(rng, sorted(world.tokens), query["asset"])
        for name in ("sender", "receiver"):
            if name in query:
                query[name] = _pick(rng, world.wallets, query[name])
    body = case.body if isinstance(case.body, dict) else None
    if body is not None and isinstance(body.get("assets"), list):
        tokens = sorted(world.lats.get(str(case.path_parameters.get("address", "")).lower(), ()))
        body["assets"] = [_pick(rng, tokens, asset) for asset in body["assets"]]
        if isinstance(body.get("amounts"), list) and rng.random() < 0.75:
            body["amounts"] = body["amounts"][: len(body["assets"])]
            body["amounts"] += ["1000"] * (len(body["assets"]) - len(body["amounts"]))
        for name in ("receiver", "sender"):
            if name in body:
                body[name] = _pick(rng, world.wallets, body[name])


# Keys the service does not know: well formed (prefix.secret) or not.
UNKNOWN_KEYS = ["Abcd1234.notasecretatall0000000000000000", "no-dot-at-all", "", ".", "x" * 200]


def _with_api_key(case, world: World, rng: random.Random) -> None:
    """One case in four carries an X-API-Token: the known key, a disabled one, or unknown."""
    roll = rng.random()
    if roll >= 0.25:
        return
    keys = [world.api_key, world.api_key, world.revoked_key, rng.choice(UNKNOWN_KEYS)]
    case.headers = {**(case.headers or {}), API_KEY_HEADER: keys[int(roll * 16)]}


# --- excuses: documented rules OpenAPI cannot state, decided from the request alone ----------


def _instant(raw: Any, *, end_of_day: bool) -> datetime | None:
    """The instant a documented startAt/endAt value names (None if it is no such value)."""
    if not isinstance(raw, str):
        return None
    try:
        if len(raw) == 10:
            day = datetime.fromisoformat(raw).date()
            return datetime.combine(day, time.max if end_of_day else time.min, tzinfo=UTC)
        value = datetime.fromisoformat(raw)
    except ValueError:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        return datetime.max.replace(tzinfo=UTC) if value.year > 1 else EARLIEST - timedelta(1)


def _window_excuse(query: dict[str, Any]) -> str | None:
    frequency = query.get("frequency", "1d")
    end = _instant(query.get("endAt"), end_of_day=True) if "endAt" in query else None
    start = _instant(query.get("startAt"), end_of_day=False) if "startAt" in query else None
    for value in (start, end):
        if value is not None and not (EARLIEST <= value < LATEST):
            return "instant outside 1970-01-01..9999-12-30"
    end = end or datetime.now(UTC)
    if start is None:
        try:
            start = end - DEFAULT_WINDOW[frequency]
        except OverflowError:
            return "instant outside 1970-01-01..9999-12-30"
    if start > end:
        return "historical window reversed"
    if end - start > MAX_WINDOW[frequency]:
        return "historical window too long"
    return None


def _rates_excuse(query: dict[str, Any], message: str) -> str | None:
    if "cursor" in query and message.startswith("cursor "):
        return "a cursor the service did not make"
    end = _instant(query.get("to"), end_of_day=True) if "to" in query else None
    start = _instant(query.get("from"), end_of_day=False) if "from" in query else None
    for value in (start, end):
        if value is not None and not (EARLIEST <= value < LATEST):
            return "instant outside 1970-01-01..9999-12-30"
    end = end or datetime.now(UTC)
    try:
        start = start or end - timedelta(days=90)
    except OverflowError:
        return "instant outside 1970-01-01..9999-12-30"
    return "rates range reversed" if start > end else None


def _deposit_excuse(body: dict[str, Any], supported: set[str]) -> str | None:
    assets, amounts = body.get("assets", []), body.get("amounts", [])
    if len(assets) != len(amounts):
        return "assets and amounts of unequal length"
    if any(str(asset).lower() not in supported for asset in assets):
        return "asset the LAT does not support"
    if any(int(amount) == 0 for amount in amounts):
        return "zero amount"
    if any(int(amount) > UINT256_MAX for amount in amounts):
        return "amount of 2^256 or more"
    if str(body.get("receiver", "")).lower() == ZERO:
        return "receiver is the zero address"
    return None


def _webhooks_excuse(case, response, world: World) -> str | None:
    status = response.status_code
    params = case.path_parameters or {}
    if status == 401 and API_KEY_HEADER not in (case.headers or {}):
        return "no API key (webhooks)"
    if status == 404 and (
        params.get("id", world.webhook_id) != world.webhook_id
        or params.get("deliveryId", world.delivery_id) != world.delivery_id
    ):
        return "a webhook endpoint or delivery the key does not have"
    if status == 422:
        message = response.json()["error"]["message"]
        if message.startswith("url: "):
            return "a webhook URL breaking a rule"
        if "cursor" in (case.query or {}) and "cursor" in message:
            return "a cursor the service did not make"
    return None


def excuse(case, response, world: World) -> str | None:
    """Why a request the schema allows may be refused with this response's status, or None."""
    status = response.status_code
    key = (case.headers or {}).get(API_KEY_HEADER)
    if case.operation.path.startswith("/webhooks") and (
        reason := _webhooks_excuse(case, response, world)
    ):
        return reason
    if status == 401 and key is not None and key not in (world.api_key, world.revoked_key):
        return "unknown API key"
    if status == 403 and key == world.revoked_key:
        return "disabled API key"
    path = case.operation.path
    address = str((case.path_parameters or {}).get("address", "")).lower()
    if status == 404 and "{address}" in path and address not in world.known(path):
        return "address the service does not know"
    sent = response.request.body or b""
    if status == 400 and len(sent) > settings.DEPOSIT_BODY_MAX_BYTES:
        return "body larger than DEPOSIT_BODY_MAX_BYTES"
    if status != 422:
        return None
    if path.startswith("/metrics/historical/"):
        return _window_excuse(case.query or {})
    if path == "/lat/{address}/rates":
        return _rates_excuse(case.query or {}, response.json()["error"]["message"])
    if case.method.upper() == "POST" and isinstance(case.body, dict):
        return _deposit_excuse(case.body, world.lats.get(address, set()))
    return _listing_excuse(path, case.query or {}, response.json()["error"]["message"])


def _listing_excuse(path: str, query: dict[str, Any], message: str) -> str | None:
    """A listing's rules OpenAPI cannot state; the message must name the parameter broken."""
    reasons = {}
    if path in ("/metrics/deposits", "/lat/{address}/events") and "cursor" in query:
        # OpenAPI cannot say which strings the service made, nor forbid cursor with skip.
        reasons["cursor"] = "a cursor the service did not make, or one with a non-zero skip"
    low, high = query.get("fromBlock"), query.get("toBlock")
    if path == "/lat/{address}/events" and None not in (low, high) and int(low) > int(high):
        reasons["fromBlock"] = "a reversed block range"
    named = [reason for parameter, reason in reasons.items() if parameter in message]
    assert named or not reasons, message
    return named[0] if named else None


# --- the run -----------------------------------------------------------------------------------


@dataclass
class Tally:
    """What the run saw: refusals excused (by reason), statuses (by operation), checks run."""

    world: World | None = None
    excused: Counter = field(default_factory=Counter)
    statuses: Counter = field(default_factory=Counter)  # (method, path, status) -> count
    checks: Counter = field(default_factory=Counter)
    simulations: Counter = field(default_factory=Counter)  # success -> count
    phases: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


TALLY = Tally()


@schemathesis.check
def accepted_unless_excused(ctx, response, case) -> bool | None:
    """A request the schema allows gets a 2xx, or a refusal named by `excuse` (Schemathesis's
    own positive_data_acceptance lets any 401, 403, 404, 409 and 429 through)."""
    with TALLY.lock:
        method, path = response.request.method, case.operation.path
        TALLY.statuses[(method, path, response.status_code)] += 1
        if (method, response.status_code) == ("POST", 200) and path.endswith("/simulate-deposit"):
            TALLY.simulations[response.json()["success"]] += 1
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or response.status_code < 400:
        return None
    if response.status_code >= 500:
        return None  # not_a_server_error reports it
    reason = excuse(case, response, TALLY.world)
    if reason is None:
        raise Failure(
            operation=case.operation.label,
            title="Schema-valid request refused",
            message=f"{response.status_code}: {response.text[:300]}",
        )
    with TALLY.lock:
        TALLY.excused[reason] += 1
    return None


def _config(base_url: str) -> SchemathesisConfig:
    generation = {"max-examples": MAX_EXAMPLES, "mode": "all", "database": "none"}
    return SchemathesisConfig.from_dict(
        {
            "seed": SEED,
            "base-url": base_url,
            # One connection per request: on a kept-alive connection Django's development
            # server answers each request some 40 ms late (Nagle's algorithm meeting delayed
            # ACKs), five times the cost of the request itself.
            "headers": {"Connection": "close"},
            # One worker: Hypothesis parses lambdas with `ast` to describe its strategies, and
            # CPython 3.11's parser is not safe in two threads at once ("AST constructor
            # recursion depth mismatch").
            "workers": 1,
            "generation": generation,
            "checks": {"positive_data_acceptance": {"enabled": False}},
            # The webhook operations get the known key from map_case, which Schemathesis takes
            # for a key it generated (and so expects refused): its auth checks would flag every
            # success. tests/webhooks/test_api.py checks their 401s without a key, with an
            # unknown one, and the 403 of a disabled one.
            "operations": [
                # The live stream never ends, and the web process answers it with a 404 naming
                # the stream process: tests/stream runs it on its own server.
                {"include-path-regex": "^/stream/", "enabled": False},
                {
                    "include-path-regex": "^/webhooks",
                    "checks": {
                        "ignored_auth": {"enabled": False},
                        "missing_required_header": {"enabled": False},
                    },
                },
            ],
            "phases": {
                "examples": {"enabled": True},
                "coverage": {"enabled": True},
                "fuzzing": {"enabled": True},
                # No operation links to another (nothing is created): Schemathesis infers none
                # and skips the phase, but it is asked for, so that a future link is tested.
                "stateful": {"enabled": True, "max-steps": 10},
            },
        }
    )


def _failures(event) -> list[str]:
    """Every failed check of a finished scenario, and every error of the engine, as text."""
    out = []
    if isinstance(event, events.ScenarioFinished | events.FuzzScenarioFinished):
        for checks in event.recorder.checks.values():
            for check in checks:
                TALLY.checks[check.name] += 1
                info = check.failure_info
                if info is not None:
                    curl = info.steps[-1].curl if info.steps else ""
                    out.append(
                        f"{check.name} on {info.failure.operation}: {info.failure.title}\n"
                        f"{info.failure.message}\n{curl}"
                    )
    elif isinstance(event, events.PhaseFinished):
        TALLY.phases[event.phase.name.value] = event.status.value
    elif isinstance(event, events.NonFatalError):
        trace = "".join(traceback.format_exception(event.value, limit=-3))[-3000:]
        out.append(f"error in {event.label}: {trace}")
    elif isinstance(event, events.FatalError):
        out.append("fatal: " + "".join(traceback.format_exception(event.exception))[-3000:])
    return out


def _run(schema, world: World) -> list[str]:
    """Run every phase; the failures, as text."""
    rng = random.Random(SEED)
    webhooks_rng = random.Random(SEED + 1)

    @schema.hook
    def map_case(context, case):
        if case.meta is not None:
            if case.operation.path.startswith("/webhooks"):
                # A generator of their own: the other operations' cases stay as they were.
                _with_api_key(case, world, webhooks_rng)
                _webhooks_case(case, world, webhooks_rng)
            else:
                _with_api_key(case, world, rng)
            if case.meta.generation.mode.is_positive:
                _realistic(case, world, rng)
        return case

    TALLY.__init__(world=world)
    failures: list[str] = []
    for event in schemathesis.engine.from_schema(schema).execute():
        failures.extend(_failures(event))
    return failures


# One devnet is enough here: the read endpoints serve the database, not the chain.
@pytest.mark.parametrize("devnet_kind", ["multicall3"], indirect=True)
def test_schemathesis_finds_nothing(served, live_server):
    raw = requests.get(f"{live_server.url}/api/schema/?format=json", timeout=10).json()
    schema = schemathesis.openapi.from_dict(raw, config=_config(live_server.url))

    failures = _run(schema, served)

    print(
        f"simulations: {dict(TALLY.simulations)}\nexcused: {dict(TALLY.excused)}\n"
        f"checks: {dict(TALLY.checks)}\nphases: {TALLY.phases}"
    )
    assert not failures, f"{len(failures)} failures:\n\n" + "\n\n".join(failures[:25])
    # The run reached the endpoints' real logic: every operation answered 2xx at least once.
    operations = {
        (method.upper(), path)
        for path, item in raw["paths"].items()
        for method in item
        if not path.startswith("/stream/")  # not run here (see the configuration)
    }
    answered = {(method, path) for (method, path, status) in TALLY.statuses if status in OK}
    assert operations <= answered, operations - answered
    for check in ("not_a_server_error", "response_schema_conformance", "negative_data_rejection"):
        assert TALLY.checks[check] > 0, check
    assert {status for (_, _, status) in TALLY.statuses} >= {200, 401, 403, 404, 405, 422}
    assert TALLY.phases["examples"] == TALLY.phases["coverage"] == "success"
    assert TALLY.phases["fuzzing"] == "success"
    # Simulations ran on the node, and both ways: deposits that would succeed and revert.
    assert TALLY.simulations[True] > 0
    assert TALLY.simulations[False] > 0
