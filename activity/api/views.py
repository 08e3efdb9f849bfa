"""The activity endpoints: a LAT's holders, event feed and status, and a wallet's positions
(extensions.md). Their values come from the indexer and the refresh, never from a node."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from activity import selectors
from activity.api import serializers as s
from chain.activity import ACTIVITY_EVENTS, FEED_ARGS, PROXIES, UPGRADEABLE
from core.api import cursors
from core.api.conditional import ConditionalReadMixin
from core.api.params import (
    address_path_parameter,
    parse_address,
    parse_int,
    parse_skip,
    parse_take,
    skip_parameter,
    take_parameter,
)
from core.api.schema import OPTIONAL_API_KEY, READ_ERRORS, error_responses
from core.errors import InvalidInput
from lats.selectors import lat_row

TAG = "Activity"
MAX_BLOCK = 10**18 - 1
EVENT_CURSOR_VERSION = "e1"
_LAT_PATH = address_path_parameter("Proxy address of the LAT.")


def _int_parameter(name: str, minimum: int, maximum: int, description: str, **schema):
    return OpenApiParameter(
        name,
        {"type": "integer", "minimum": minimum, "maximum": maximum, **schema},
        OpenApiParameter.QUERY,
        description=description,
    )


class HolderListView(ConditionalReadMixin, APIView):
    @extend_schema(
        tags=[TAG],
        auth=OPTIONAL_API_KEY,
        operation_id="lat_holders",
        summary="Holders of a LAT",
        description=(
            "Every address whose LAT balance is above zero at the last indexed block, built "
            "from the LAT's `Transfer` events (mints from the zero address, burns to it; the "
            "zero address is never a holder). Ordered by balance descending, then address "
            "ascending in lower-case hex order. `meta.total` is the number of holders; a "
            "`skip` at or beyond it gives an empty `data`.\n\n"
            "Any depth costs about what the first page does: the service keeps, with the "
            "balances, how many holders fall in each narrow balance range (a range spans at "
            "most 1/16 of its lowest balance), and starts the page at the range where `skip` "
            "falls. The exception is a page deep inside many holders whose balances share one "
            "range (equal balances, e.g. an airdrop of one amount): it costs in proportion to "
            "how many of them come before it."
        ),
        parameters=[
            _LAT_PATH,
            skip_parameter("Holders"),
            take_parameter("Holders"),
        ],
        responses={200: s.HolderListSerializer, **error_responses(*READ_ERRORS)},
    )
    def get(self, request, address: str):
        lat = parse_address(address, field="address")
        skip, take = parse_skip(request.query_params), parse_take(request.query_params)
        rows, total = selectors.holder_page(lat_address=lat, skip=skip, take=take)
        return Response({"data": rows, "meta": {"total": total, "skip": skip, "take": take}})


_CONTRACT_NAMES = {
    "StakerNode": "StakerNode (each staker node)",
    PROXIES: "any of the LAT's proxies, the staker node beacon",
}


def _event_table() -> str:
    lines = ["| type | contract | event | args |", "|---|---|---|---|"]
    by_type: dict[str, list[tuple[str, str]]] = {}
    for contract, name, kind in ACTIVITY_EVENTS:
        by_type.setdefault(kind, []).append((contract, name))
    for kind, sources in by_type.items():
        names = " or ".join(f"`{name}`" for _, name in sources)
        contract = _CONTRACT_NAMES.get(sources[0][0], sources[0][0])
        args = ", ".join(f"`{arg}`" for arg in FEED_ARGS[kind])
        lines.append(f"| `{kind}` | {contract} | {names} | {args} |")
    notes = (
        "Events a staker node emits carry the node's address (`node`) and id (`nodeId`); a "
        "node's own `DelegatedToOperator` is the manager's `nodeDelegated` and is not listed "
        "twice. `upgraded`'s `contract` names the contract upgraded: "
        + ", ".join(f"`{name}`" for name in UPGRADEABLE.values())
        + " (the node beacon upgrades every staker node). `globalPricesUpdated`'s `timestamp` "
        "is ISO 8601."
    )
    return "\n".join(lines) + "\n\n" + notes


_ONE_TYPE = "(" + "|".join(selectors.FEED_TYPES) + ")"
_TYPES_PATTERN = f"^{_ONE_TYPE}(,{_ONE_TYPE})*$"


def _parse_types(params) -> tuple[str, ...]:
    raw = params.get("type")
    if raw is None:
        return selectors.FEED_TYPES
    types = tuple(dict.fromkeys(t.strip() for t in raw.split(",")))
    unknown = [t for t in types if t not in selectors.FEED_TYPES]
    if unknown or not types:
        allowed = ", ".join(selectors.FEED_TYPES)
        raise InvalidInput(f"type must be a comma-separated list of: {allowed}.")
    return types


class EventListView(ConditionalReadMixin, APIView):
    @extend_schema(
        tags=[TAG],
        auth=OPTIONAL_API_KEY,
        operation_id="lat_events",
        summary="Activity of a LAT",
        description=(
            "The LAT's events newest first (block number, then log index, both descending), "
            "paged by cursor: `meta.next` is an opaque cursor, or null on the last page; "
            "passed back as `cursor` (with the same filters) it returns the events that follow "
            "the last one of that page, whatever arrived meanwhile. A `Transfer` from or to "
            "the zero address (a mint or a burn) is not a `transfer`.\n\n" + _event_table()
        ),
        parameters=[
            _LAT_PATH,
            OpenApiParameter(
                "type",
                {"type": "string", "pattern": _TYPES_PATTERN},
                OpenApiParameter.QUERY,
                description="Comma-separated types: "
                + ", ".join(selectors.FEED_TYPES)
                + ". Default: all.",
            ),
            _int_parameter("fromBlock", 0, MAX_BLOCK, "Only events at or after this block."),
            _int_parameter("toBlock", 0, MAX_BLOCK, "Only events at or before this block."),
            take_parameter("Events"),
            cursors.cursor_parameter(),
        ],
        responses={200: s.EventListSerializer, **error_responses(*READ_ERRORS)},
    )
    def get(self, request, address: str):
        lat = parse_address(address, field="address")
        params = request.query_params
        types = _parse_types(params)
        bounds = {
            name: parse_int(params, name, default=0, minimum=0, maximum=MAX_BLOCK)
            if name in params
            else None
            for name in ("fromBlock", "toBlock")
        }
        low, high = bounds["fromBlock"], bounds["toBlock"]
        if low is not None and high is not None and low > high:
            raise InvalidInput("fromBlock must not be above toBlock.")
        after = None
        if "cursor" in params:
            after = selectors.EventKey(
                *cursors.cursor_decode(params["cursor"], EVENT_CURSOR_VERSION, 2)
            )
        query = selectors.EventQuery(types, low, high, parse_take(params), after)
        page = selectors.event_page(lat_address=lat, query=query)
        next_cursor = (
            cursors.cursor_encode(EVENT_CURSOR_VERSION, page.next.block_number, page.next.log_index)
            if page.next
            else None
        )
        return Response({"data": page.rows, "meta": {"next": next_cursor}})


class LatStatusView(APIView):
    @extend_schema(
        tags=[TAG],
        auth=OPTIONAL_API_KEY,
        operation_id="lat_status",
        summary="Is it safe to deposit now: a LAT's pause and price state, and its lag",
        description=(
            "Read from what the refresh and the indexer stored, never from a node. Not a "
            "conditional read (no ETag): the lag moves with every head the jobs see."
        ),
        parameters=[_LAT_PATH],
        responses={200: s.StatusResponseSerializer, **error_responses(*READ_ERRORS)},
    )
    def get(self, request, address: str):
        lat = lat_row(address=parse_address(address, field="address"))
        return Response({"data": selectors.lat_status(lat=lat)})


class WalletView(ConditionalReadMixin, APIView):
    @extend_schema(
        tags=[TAG],
        auth=OPTIONAL_API_KEY,
        operation_id="wallet_positions",
        summary="A wallet's LAT positions",
        description=(
            "One position per LAT in which the wallet holds a balance above zero or is the "
            "receiver of at least one deposit, ordered by `chainId`, then `latAddress` "
            "ascending (lower-case hex order). A wallet the service has never seen has no "
            "positions (200)."
        ),
        parameters=[address_path_parameter("The wallet's address.")],
        responses={200: s.WalletResponseSerializer, **error_responses("unprocessable_entity")},
    )
    def get(self, request, address: str):
        wallet = parse_address(address, field="address")
        positions = selectors.wallet_positions(address=wallet)
        return Response({"data": {"address": wallet, "positions": positions}})
