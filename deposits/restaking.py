"""Direct Restaking: validate a deposit request, build its transaction, simulate it.

`deposit_request_parse` turns a path address and a parsed JSON body into a `DepositRequest`, or
raises the API's 404/422 with a message naming the field and index. `deposit_build` encodes
`deposit(address[],uint256[],address)` without calling any node; `deposit_simulate` runs it
through the node once (one JSON-RPC batch, sent from the request's own thread), under a total
deadline (`SIMULATE_TIMEOUT`) and with at most `SIMULATE_MAX_IN_FLIGHT` simulations waiting on a
node per process. Nothing here imports web3: calldata and the node go through
`chain.gateway`. Nothing is written to the database.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, NoReturn

from django.conf import settings
from django.db import connection

from chain.errors import ChainUnavailable
from chain.gateway import Gateway, gateway_for
from core.addresses import ZERO_ADDRESS, address_error, checksum, is_address
from core.api.documents import CacheRead, cached_document, document_keys
from core.api.params import parse_address
from core.db import fetch_prepared
from core.errors import Busy, InvalidInput, MalformedRequest, NotFound, Unavailable
from deposits.reverts import DepositFailure, deposit_failure
from lats.models import Lat

logger = logging.getLogger(__name__)

AMOUNT_PATTERN = r"^\d+$"
# fullmatch with explicit ASCII classes: `$` would also accept a trailing newline and `\d`
# any Unicode digit, which the documented (ECMA) patterns do not.
_AMOUNT_RE = re.compile(r"[0-9]+")
UINT256_MAX = 2**256 - 1
LAT_DECIMALS = 18  # every LiquidToken is an 18-decimal ERC-20
DEPOSIT_FUNCTION = "deposit"
NODE_UNREACHABLE = (
    "The chain node could not be reached to simulate the deposit (it did not answer in time, "
    "or answered something unusable). Nothing was simulated; try again later."
)
STALE_PRICES_NOTE = (
    "The LAT's prices are stale at this block: the deposit first refreshes every token's price "
    "from its source (amounts and the gas estimate include that refresh)."
)
NODE_TOO_SLOW = (
    "The chain node did not answer in time: the simulation was given up after {seconds:g} s. "
    "Nothing was simulated; try again later."
)


class SimulationsBusy(Busy):
    """Every simulation slot of this process is held by a simulation still waiting on a node:
    a 429 `rate_limit_exceeded` with `Retry-After`, answered at once, never queued."""

    def __init__(self, *, retry_after: int) -> None:
        super().__init__(
            "Too many simulations are waiting on the chain node right now; nothing was "
            f"simulated. Retry after {retry_after} s.",
            retry_after=retry_after,
        )


@dataclass(frozen=True)
class DepositTarget:
    """What building and simulating a deposit need of a LAT."""

    proxy_address: str  # checksummed, as stored
    chain_id: int
    tokens: frozenset[str]  # supported token addresses, lower-case
    management_fee: Decimal  # percent; 0 where staff set none
    performance_fee: Decimal
    # The LAT's price oracle (its manifest's tokenRegistryOracle proxy); "" where none is known.
    # A default, so that a target cached by an older release still reads.
    oracle: str = ""


@dataclass(frozen=True)
class DepositRequest:
    lat: DepositTarget
    assets: tuple[str, ...]  # lower-case hex, in the caller's order (duplicates kept)
    amounts: tuple[int, ...]  # raw token units, 0 < amount < 2**256
    receiver: str  # lower-case hex
    sender: str = ""  # lower-case hex; simulate-deposit only


@dataclass(frozen=True)
class DepositTransaction:
    to: str
    data: str
    value: str
    chain_id: int
    function_name: str = DEPOSIT_FUNCTION


@dataclass(frozen=True)
class DepositSimulation:
    success: bool
    amounts: tuple[Decimal, ...]  # LAT shares per entry, whole LAT units; empty on a revert
    gas_limit: int  # 0 on a revert
    gas_price: int
    management_fee: Decimal
    performance_fee: Decimal
    failure: DepositFailure | None = None  # why it would revert; None on success
    # The oracle's arePricesStale() at the simulated block: when true the deposit refreshes
    # every price first. None where the LAT has no oracle known or it has no such view.
    prices_stale: bool | None = None

    @property
    def reason(self) -> str:
        """Why the deposit would fail, in words; "" on success."""
        return self.failure.reason if self.failure else ""

    @property
    def reason_code(self) -> str:
        return self.failure.code if self.failure else ""

    @property
    def revert(self) -> str:
        """The revert as decoded ("Pausable: paused"); "" on success."""
        return self.failure.revert if self.failure else ""

    @property
    def revert_data(self) -> str:
        return self.failure.revert_data if self.failure else ""

    @property
    def note(self) -> str:
        return STALE_PRICES_NOTE if self.prices_stale else ""

    @property
    def gas_fee(self) -> int:
        return self.gas_limit * self.gas_price


# --- the one read ------------------------------------------------------------------------------


_TARGET_COLUMNS = (
    "proxy_address",
    "chain_id",
    "lat_tokens__token__address",
    "fee_structure__management_fee",
    "fee_structure__performance_fee",
    "contract_deployments",
)


@functools.cache
def _target_sql(vendor: str) -> str:
    """The ORM's SQL of the target query, with one placeholder for the proxy address."""
    query = Lat.objects.filter(proxy_address="").order_by().values_list(*_TARGET_COLUMNS).query
    sql, params = query.sql_with_params()
    if params != ("",):
        raise RuntimeError(f"unexpected parameters {params!r} in the deposit target query")
    return sql


def deposit_target_get(*, address: str, read: CacheRead | None = None) -> DepositTarget:
    """The deposit target, from the read-document cache while the data behind it is unchanged
    (`read`: the cache keys read ahead, as cached_document takes them)."""
    return cached_document(
        _target_document(address), lambda: _deposit_target_read(address), read=read
    )


def deposit_target_keys(address: str) -> list[str]:
    """The cache keys deposit_target_get reads for a path address (none for a malformed one),
    for the endpoints to read ahead with the rate limit's counters."""
    if not is_address(address):
        return []
    return document_keys(_target_document(checksum(address)))


def _target_document(address: str) -> str:
    return f"deposit-target:{address}"


def _deposit_target_read(address: str) -> DepositTarget:
    """The LAT, its supported tokens and its fees in one query (LEFT JOINs), or a 404.

    This is the hot path of both endpoints, so neither `lat_get` + `lat_fees` (model instances,
    prefetches, three queries) nor a `values_list` compiled on every request: the ORM writes the
    SQL once per process, prepared once per connection (core.db.fetch_prepared), and each
    request only executes it, which saves most of the cost of the
    read (bench/sections/restaking.py compares the build with the constant-JSON baseline).
    """
    rows = fetch_prepared(_target_sql(connection.vendor), [address])
    if not rows:
        raise NotFound(f"No LAT at {address}.")
    proxy_address, chain_id, _, management_fee, performance_fee, deployments = rows[0]
    return DepositTarget(
        proxy_address=proxy_address,
        chain_id=int(chain_id),
        tokens=frozenset(row[2].lower() for row in rows if row[2]),
        management_fee=Decimal(str(management_fee or 0)),
        performance_fee=Decimal(str(performance_fee or 0)),
        oracle=_oracle(deployments),
    )


def _oracle(deployments: Any) -> str:
    """The tokenRegistryOracle proxy of a LAT's contract_deployments, as the raw statement gives
    the column (JSON text, or already decoded where the driver does that); "" where none."""
    if isinstance(deployments, str | bytes):
        try:
            deployments = json.loads(deployments)
        except ValueError:
            return ""
    proxy = deployments.get("proxy") if isinstance(deployments, dict) else None
    oracle = proxy.get("tokenRegistryOracle") if isinstance(proxy, dict) else None
    return checksum(oracle) if isinstance(oracle, str) and is_address(oracle) else ""


# --- validation ---------------------------------------------------------------------------------


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _array(body: Mapping[str, Any], field: str, items: str, errors: list[str]) -> list | None:
    if body.get(field) is None:
        errors.append(f"{field} is required: an array of at least 1 {items}.")
        return None
    value = body[field]
    if not isinstance(value, list):
        errors.append(f"{field} must be an array of {items}, not {_json_type(value)}.")
        return None
    if not value:
        errors.append(f"{field} must have at least 1 item.")
        return None
    limit = settings.DEPOSIT_MAX_ASSETS
    if len(value) > limit:
        errors.append(f"{field} must have at most {limit} items.")
        return None
    return value


def _assets(body: Mapping[str, Any], errors: list[str]) -> list[str | None] | None:
    """Assets in lower case, None in place of each malformed one (already reported)."""
    items = _array(body, "assets", "token addresses", errors)
    if items is None:
        return None
    out: list[str | None] = []
    for index, item in enumerate(items):
        if is_address(item):
            out.append(item.lower())
        else:
            errors.append(address_error(f"assets[{index}]"))
            out.append(None)
    return out


def _amount(value: Any, field: str, errors: list[str]) -> int | None:
    if not isinstance(value, str):
        hint = (
            " (a JSON number is refused: large integers lose precision in many clients; "
            'send "1000000000000000000", not 1000000000000000000)'
            if isinstance(value, int | float) and not isinstance(value, bool)
            else f", not {_json_type(value)}"
        )
        errors.append(f"{field} must be a decimal integer string{hint}.")
        return None
    if not _AMOUNT_RE.fullmatch(value):
        errors.append(f"{field} must be a decimal integer string matching {AMOUNT_PATTERN}.")
        return None
    digits = value.lstrip("0")
    if not digits:
        errors.append(f"{field} must be above zero.")
        return None
    if len(digits) > len(str(UINT256_MAX)) or int(digits) > UINT256_MAX:
        errors.append(f"{field} must be below 2^256.")
        return None
    return int(digits)


def _amounts(body: Mapping[str, Any], errors: list[str]) -> list[int] | None:
    items = _array(body, "amounts", "decimal integer strings", errors)
    if items is None:
        return None
    out: list[int] = []
    for index, item in enumerate(items):
        amount = _amount(item, f"amounts[{index}]", errors)
        if amount is not None:
            out.append(amount)
    return out if len(out) == len(items) else None


def _party(body: Mapping[str, Any], field: str, role: str, errors: list[str]) -> str:
    value = body.get(field)
    if value is None:
        errors.append(f"{field} is required: {role}.")
        return ""
    if not is_address(value):
        errors.append(address_error(field))
        return ""
    return value.lower()


def deposit_request_parse(
    *,
    address: str,
    body: Mapping[str, Any],
    with_sender: bool,
    read: CacheRead | None = None,
) -> DepositRequest:
    """Validate a deposit (or simulate-deposit) request, in this order: the path address (422),
    the LAT (404), then every body field at once (one 422 listing each problem with its field
    and index). Unknown body members are ignored; repeated assets are allowed (the contract
    deposits each entry separately). `read`: as deposit_target_get takes it."""
    if not isinstance(body, Mapping):
        raise MalformedRequest("The request body must be a JSON object.")
    lat = deposit_target_get(address=parse_address(address, field="address"), read=read)

    errors: list[str] = []
    assets = _assets(body, errors)
    if assets is not None:
        for index, asset in enumerate(assets):
            if asset is not None and asset not in lat.tokens:
                errors.append(
                    f"assets[{index}] ({checksum(asset)}) is not a token this LAT supports."
                )
    amounts = _amounts(body, errors)
    if isinstance(body.get("assets"), list) and isinstance(body.get("amounts"), list):
        n_assets, n_amounts = len(body["assets"]), len(body["amounts"])
        if n_assets and n_amounts and n_assets != n_amounts:
            errors.append(
                f"assets and amounts must have the same length ({n_assets} assets, "
                f"{n_amounts} amounts)."
            )
    receiver = _party(body, "receiver", "the address that receives the minted LAT", errors)
    if receiver == ZERO_ADDRESS.lower():
        errors.append("receiver must not be the zero address (minting to it reverts).")
    sender = ""
    if with_sender:
        sender = _party(body, "sender", "the address that sends the deposit and is debited", errors)
    if errors or assets is None or amounts is None:
        raise InvalidInput("; ".join(errors))
    return DepositRequest(
        lat=lat,
        assets=tuple(a for a in assets if a is not None),
        amounts=tuple(amounts),
        receiver=receiver,
        sender=sender,
    )


# --- build and simulate ---------------------------------------------------------------------


def deposit_calldata(*, request: DepositRequest) -> str:
    return Gateway.deposit_calldata(
        assets=request.assets, amounts=request.amounts, receiver=request.receiver
    )


def deposit_build(*, request: DepositRequest) -> DepositTransaction:
    """The unsigned deposit transaction; no node is called."""
    return DepositTransaction(
        to=request.lat.proxy_address,
        data=deposit_calldata(request=request),
        value="0x0",
        chain_id=request.lat.chain_id,
    )


class _NodeCalls:
    """The simulations of this process waiting on a node, at most SIMULATE_MAX_IN_FLIGHT: a
    further one is refused at once rather than queued. Each waits in its own request's thread,
    its node call bounded by the deadline at the socket (chain/deadline.py), so a slot is
    held at most SIMULATE_TIMEOUT and a dead node never holds more than that many server
    threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = 0
        self._busy = 0

    @property
    def busy(self) -> int:
        return self._busy

    def acquire(self) -> bool:
        """Take a slot; False when every slot is taken."""
        limit = max(int(settings.SIMULATE_MAX_IN_FLIGHT), 1)
        with self._lock:
            if self._pid != os.getpid():  # a forked server worker starts with none in flight
                self._pid, self._busy = os.getpid(), 0
            if self._busy >= limit:
                return False
            self._busy += 1
            return True

    def release(self) -> None:
        with self._lock:
            self._busy = max(self._busy - 1, 0)


node_calls = _NodeCalls()


def _simulation_gateway(lat: DepositTarget, timeout: float) -> Gateway:
    try:
        return gateway_for(lat.chain_id, timeout=timeout)
    except ChainUnavailable as exc:
        logger.error("simulate-deposit %s: %s", lat.proxy_address, exc)
        raise Unavailable(
            f"Simulation is unavailable: the service has no chain node for chain {lat.chain_id}."
        ) from exc


def _node_unreachable(lat: DepositTarget, exc: ChainUnavailable) -> NoReturn:
    # The gateway's message names the failure, never the node's URL (it may hold a key).
    logger.warning(
        "simulate-deposit %s on chain %s: node unavailable: %s",
        lat.proxy_address,
        lat.chain_id,
        exc,
    )
    raise Unavailable(NODE_UNREACHABLE) from exc


def deposit_simulate(*, request: DepositRequest) -> DepositSimulation:
    """Run the deposit as eth_call from `sender` at the latest block (one JSON-RPC batch with
    eth_estimateGas and eth_gasPrice). A revert is a result (`success=False`). A node that
    cannot be reached, or does not answer within SIMULATE_TIMEOUT in all, is a 500
    `Unavailable` with a message for the caller, logged here; with every simulation slot of
    the process taken, `SimulationsBusy` (429) at once."""
    lat = request.lat
    timeout = float(settings.SIMULATE_TIMEOUT)
    gateway = _simulation_gateway(lat, timeout)
    calldata = deposit_calldata(request=request)
    if not node_calls.acquire():
        logger.warning("simulate-deposit %s: every simulation slot is taken", lat.proxy_address)
        raise SimulationsBusy(retry_after=max(math.ceil(timeout), 1))
    started = time.monotonic()
    try:
        simulation = gateway.simulate_deposit(
            lat=lat.proxy_address,
            calldata=calldata,
            sender=request.sender,
            deadline=started + timeout,
            oracle=lat.oracle,
        )
    except ChainUnavailable as exc:
        # Past the deadline the node did not answer in time, whatever the last socket saw.
        if time.monotonic() - started < timeout:
            _node_unreachable(lat, exc)
        logger.warning(
            "simulate-deposit %s on chain %s: no answer within %ss",
            lat.proxy_address,
            lat.chain_id,
            timeout,
        )
        raise Unavailable(NODE_TOO_SLOW.format(seconds=timeout)) from exc
    finally:
        node_calls.release()
    scale = Decimal(10) ** LAT_DECIMALS
    return DepositSimulation(
        success=simulation.success,
        amounts=tuple(Decimal(shares) / scale for shares in simulation.shares),
        gas_limit=simulation.gas.gas_limit,
        gas_price=simulation.gas.gas_price,
        management_fee=lat.management_fee,
        performance_fee=lat.performance_fee,
        failure=(
            None
            if simulation.success
            else deposit_failure(simulation.revert, text=simulation.reason)
        ),
        prices_stale=simulation.prices_stale,
    )
