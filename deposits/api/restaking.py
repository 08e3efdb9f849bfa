"""Direct Restaking endpoints: POST /lat/{address}/deposit and POST /lat/{address}/simulate-deposit.

Thin: read the body (JSON object, size-capped), let `deposits.restaking` validate, build or
simulate, shape the answer. simulate-deposit answers its members at the top level (no `data`
wrapper, unlike deposit) and has a stricter rate limit of its own (RATE_LIMIT_SIMULATE).
"""

from __future__ import annotations

import functools
import json
from typing import Any

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chain.reverts import selector
from core.api.documents import CacheRead
from core.api.fields import ErrorSerializer
from core.api.params import address_path_parameter
from core.api.schema import OPTIONAL_API_KEY, error_responses
from core.api.throttling import SimulateThrottle, prefetched
from core.errors import MalformedRequest
from core.jsonlimits import MAX_JSON_NESTING, nested_deeper_than
from deposits import restaking
from deposits.api import restaking_serializers as s
from deposits.restaking import STALE_PRICES_NOTE

TAG = "Direct Restaking"
ERRORS = ("bad_request", "not_found", "unprocessable_entity", "rate_limit_exceeded")

_LAT = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
_ASSETS = [
    "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
    "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0",
]
_WALLET = "0x71bE63f3384f5fb98995898A86B02Fb2426c5788"
_EXAMPLE_BODY = {
    "assets": _ASSETS,
    "amounts": ["1000000000000000000", "2500000"],
    "receiver": _WALLET,
}
_BODY_RULES = (
    "Send a JSON object as `application/json`, at most `DEPOSIT_BODY_MAX_BYTES` bytes "
    "(default 16 KiB) and nested at most 32 levels; anything else is a 400 `bad_request`. "
    "Validation, all before anything is built: the path address is well formed (422) and "
    "names a known LAT (404); `assets` and `amounts` are non-empty arrays of equal length, "
    f"each of at most {settings.DEPOSIT_MAX_ASSETS} entries (setting `DEPOSIT_MAX_ASSETS`; more "
    "is a 422 naming the field); "
    "each amount is a JSON string of digits, above 0 and below 2^256 (a JSON number is a 422: "
    "large integers lose precision in many clients); every address matches "
    "`^0x[a-fA-F0-9]{40}$` in any letter case; every asset is supported by this LAT; "
    "`receiver` is not the zero address. One 422 lists every problem, each naming its field "
    'and index ("amounts[1] must be a decimal integer string"). Members the endpoint does '
    "not know are ignored. An asset may be repeated: the contract deposits each entry "
    "separately."
)


class DepositBodyParser(BaseParser):
    """JSON, refused with a 400 when larger than settings.DEPOSIT_BODY_MAX_BYTES: first by the
    declared Content-Length, before reading anything, then by the bytes actually read.

    Not a JSONParser subclass on purpose: DRF reads the whole body (`request.body`, up to
    DATA_UPLOAD_MAX_MEMORY_SIZE) before calling a JSONParser; this one gets the raw stream.
    """

    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        limit = settings.DEPOSIT_BODY_MAX_BYTES
        context = parser_context or {}
        request = context.get("request")
        meta = getattr(request, "META", {})
        try:
            declared = int(meta.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0
        too_large = MalformedRequest(f"The request body is larger than {limit} bytes.")
        if declared > limit:
            raise too_large
        raw = stream.read(limit + 1)
        if len(raw) > limit:
            raise too_large
        if nested_deeper_than(raw, MAX_JSON_NESTING):
            raise MalformedRequest(
                f"The request body is nested deeper than {MAX_JSON_NESTING} levels."
            )
        try:
            text = raw.decode("utf-8")  # the only charset accepted (decisions: a 400 otherwise)
            return json.loads(text, parse_constant=_refuse_constant)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError, JSONDecodeError
            raise ParseError("The request body is not valid JSON.") from exc


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def json_object_body(request: Request) -> dict[str, Any]:
    """The body as a JSON object, or a 400 (wrong content type, empty, too large, not JSON,
    or JSON that is not an object)."""
    media_type = (request.content_type or "").split(";")[0].strip().lower()
    if media_type != "application/json":
        raise MalformedRequest(
            "Send the body as a JSON object with Content-Type: application/json."
        )
    body = request.data
    if request.stream is None:
        raise MalformedRequest("The request body is empty; send a JSON object.")
    if not isinstance(body, dict):
        raise MalformedRequest("The request body must be a JSON object.")
    return body


class _TargetReadAhead:
    """The LAT's deposit target is read from the document cache in the rate limit's round
    trip to Redis (core.api.throttling.count_windows), not in one of its own."""

    def prefetch_cache_keys(self, request) -> list[str]:
        return restaking.deposit_target_keys(self.kwargs.get("address", ""))  # type: ignore[attr-defined]

    @staticmethod
    def read_ahead(request) -> CacheRead:
        return functools.partial(prefetched, request)


class DepositBuildView(_TargetReadAhead, APIView):
    parser_classes = [DepositBodyParser]

    @extend_schema(
        tags=[TAG],
        auth=OPTIONAL_API_KEY,
        operation_id="lat_deposit_build",
        summary="Build an unsigned deposit transaction",
        description=(
            "Builds the transaction that deposits `amounts` of `assets` into the LAT and mints "
            "LAT to `receiver`; the caller signs and sends it from a wallet that has approved "
            "the LAT proxy for each amount. `transaction.to` is the LAT proxy (checksummed), "
            "`transaction.data` the ABI-encoded call of "
            "`deposit(address[] assets, uint256[] amounts, address receiver)`, "
            '`transaction.value` is `"0x0"`, `chainId` the LAT\'s chain id as a decimal '
            'string and `functionName` `"deposit"`. No node is called.\n\n' + _BODY_RULES
        ),
        parameters=[address_path_parameter("Proxy address of the LAT.")],
        request=s.DepositBodySerializer,
        responses={
            200: s.DepositBuildResponseSerializer,
            **error_responses(*ERRORS),
        },
        examples=[
            OpenApiExample(
                "Two tokens",
                request_only=True,
                value=_EXAMPLE_BODY,
            ),
        ],
    )
    def post(self, request, address: str):
        body = json_object_body(request)
        deposit = restaking.deposit_request_parse(
            address=address, body=body, with_sender=False, read=self.read_ahead(request)
        )
        tx = restaking.deposit_build(request=deposit)
        return Response({"data": s.DepositBuildSerializer(tx).data})


_SIMULATE_DESCRIPTION = (
    "Runs the deposit that POST /lat/{address}/deposit would build as an `eth_call` from "
    "`sender` at the node's latest block, together with `eth_estimateGas` and `eth_gasPrice`, "
    "in one JSON-RPC batch. The members are at the top level of the body (no `data` wrapper, "
    "unlike the deposit endpoint):\n\n"
    "- `success`: whether the deposit would succeed now.\n"
    "- `amounts`: the LAT shares the call returns, one per entry of `assets`, in whole LAT "
    "units (numbers).\n"
    "- `fees.gas`: `gasLimit` (estimateGas), `gasPrice` (the node's) and `gasFee` (their "
    "product), decimal strings in wei.\n"
    "- `fees.service`: the LAT's `managementFee` and `performanceFee` (percent, 0 when staff "
    "set none), as GET /lat/{address}/fees.\n"
    "- `pricesStale`: the LAT oracle's `arePricesStale()` at the same block (null where the "
    "deployment has no such view). The deposit runs exactly as the chain will run it, never "
    "`calculateShares` in its place: when prices are stale it first refreshes every token's "
    "price from its source, so `amounts` follow the refreshed prices and `fees.gas` includes "
    "the refresh's gas; `note` then says so. Whether prices are stale depends on the block "
    "(on Mainnet v1, a threshold of 1 to 4 hours derived from the block): GET "
    "/lat/{address}/status shows it as of the last refresh.\n"
    "- `reason`, `reasonCode`, `revert`, `revertData`: only on a revert.\n\n"
    "A deposit that would revert is still a 200 (the simulation itself worked): "
    "`success: false`, `amounts: []`, `reason` saying in words a wallet can show why (the LAT "
    "is paused, a price refresh failed, an unsupported asset, a balance or allowance too "
    "low, ...), `reasonCode` the kind of failure for programs, `revert` the revert decoded "
    "whatever its kind (the string of an `Error(string)`, such as Mainnet v1's "
    '"Pausable: paused"; a `Panic` with its meaning; a custom error with its arguments, such '
    'as "PriceUpdateFailed()" or "ERC20InsufficientAllowance(0x…, 0, 1000)"; or "unknown '
    'error 0x…"), `revertData` the raw revert data, and `fees.gas` with `gasLimit` and '
    '`gasFee` `"0"` (there is nothing to estimate) and `gasPrice` still the node\'s current '
    "price.\n\n"
    "Limits, because each simulation calls a node: a rate limit of its own, "
    "`RATE_LIMIT_SIMULATE` (default 20/min) per API key or client IP, on top of the general "
    "one; a total deadline of `SIMULATE_TIMEOUT` seconds (default 5) per simulation, past which "
    "the answer is a 500 `internal_server_error` saying the chain node did not answer in time; "
    "and at most `SIMULATE_MAX_IN_FLIGHT` simulations (default 4) waiting on the node per "
    "server process: a further one is refused at once with a 429 `rate_limit_exceeded` and "
    "`Retry-After`, never queued. A node that cannot be reached is a 500 "
    "`internal_server_error` whose message says so.\n\n" + _BODY_RULES
)
_SIMULATE_429 = (
    "`rate_limit_exceeded`: over the general rate limit or `RATE_LIMIT_SIMULATE` (default "
    "20/min) for this client; or every simulation slot of the server process "
    "(`SIMULATE_MAX_IN_FLIGHT`, default 4) is held by a simulation still waiting on the node, "
    "and this one was refused at once rather than queued. Retry after the number of seconds in "
    "`Retry-After`."
)
_SIMULATE_500 = (
    "`internal_server_error`: the chain node could not be reached, answered something "
    "unusable, or did not answer within `SIMULATE_TIMEOUT` seconds (default 5) in all; the "
    "message says which, without internals. Also anything unexpected."
)
_FEES_EXAMPLE = {"managementFee": 2.5, "performanceFee": 10.0}
_PRICE_UPDATE_FAILED = selector("PriceUpdateFailed()")


def _error_string_data(text: str) -> str:
    """`Error(string)` revert data: its selector 0x08c379a0, the string's offset (32), its
    length and its bytes padded to a word, as Solidity encodes `revert("...")`."""
    raw = text.encode()
    padded = raw + bytes(-len(raw) % 32)
    return (
        "0x08c379a0"
        + (32).to_bytes(32, "big").hex()
        + len(raw).to_bytes(32, "big").hex()
        + (padded.hex())
    )


def _reverted(
    reason: str, code: str, revert: str, data: str, *, prices_stale: bool = False
) -> dict:
    example: dict = {
        "success": False,
        "amounts": [],
        "fees": {
            "gas": {"gasLimit": "0", "gasPrice": "1875000000", "gasFee": "0"},
            "service": _FEES_EXAMPLE,
        },
        "pricesStale": prices_stale,
    }
    if prices_stale:
        example["note"] = STALE_PRICES_NOTE
    return {**example, "reason": reason, "reasonCode": code, "revert": revert, "revertData": data}


class DepositSimulateView(_TargetReadAhead, APIView):
    parser_classes = [DepositBodyParser]
    # The general limit and RATE_LIMIT_SIMULATE, counted in one round trip to Redis.
    throttle_classes = [SimulateThrottle]

    @extend_schema(
        tags=[TAG],
        auth=OPTIONAL_API_KEY,
        operation_id="lat_deposit_simulate",
        summary="Simulate a deposit without executing it",
        description=_SIMULATE_DESCRIPTION,
        parameters=[
            address_path_parameter("Proxy address of the LAT."),
            OpenApiParameter(
                "Retry-After",
                OpenApiTypes.INT,
                location=OpenApiParameter.HEADER,
                response=[429],
                description="Seconds to wait before retrying.",
            ),
        ],
        request=s.SimulateDepositBodySerializer,
        responses={
            200: OpenApiResponse(
                s.DepositSimulationSerializer,
                description="The simulation ran; `success` tells whether the deposit would "
                "succeed.",
            ),
            **error_responses(*ERRORS),
            429: OpenApiResponse(ErrorSerializer, description=_SIMULATE_429),
            500: OpenApiResponse(ErrorSerializer, description=_SIMULATE_500),
        },
        examples=[
            OpenApiExample(
                "Two tokens",
                request_only=True,
                value={**_EXAMPLE_BODY, "sender": _WALLET},
            ),
            OpenApiExample(
                "Would succeed",
                response_only=True,
                status_codes=["200"],
                value={
                    "success": True,
                    "amounts": [0.998, 2.725],
                    "fees": {
                        "gas": {
                            "gasLimit": "201532",
                            "gasPrice": "1875000000",
                            "gasFee": "377872500000000",
                        },
                        "service": _FEES_EXAMPLE,
                    },
                    "pricesStale": False,
                },
            ),
            OpenApiExample(
                "Would succeed after refreshing stale prices",
                response_only=True,
                status_codes=["200"],
                value={
                    "success": True,
                    "amounts": [0.997, 2.719],
                    "fees": {
                        "gas": {
                            "gasLimit": "287114",
                            "gasPrice": "1875000000",
                            "gasFee": "538338750000000",
                        },
                        "service": _FEES_EXAMPLE,
                    },
                    "pricesStale": True,
                    "note": STALE_PRICES_NOTE,
                },
            ),
            OpenApiExample(
                "Would revert: paused (Mainnet v1)",
                response_only=True,
                status_codes=["200"],
                value=_reverted(
                    "The LAT is paused: it accepts no deposits until it is unpaused.",
                    "paused",
                    "Pausable: paused",
                    _error_string_data("Pausable: paused"),
                ),
            ),
            OpenApiExample(
                "Would revert: a price source failed (Mainnet v1)",
                response_only=True,
                status_codes=["200"],
                value=_reverted(
                    "The LAT's prices are stale and refreshing them failed (a token's price "
                    "source gave no price): it accepts no deposits until its prices are updated.",
                    "price_refresh_failed",
                    "PriceUpdateFailed()",
                    _PRICE_UPDATE_FAILED,
                    prices_stale=True,
                ),
            ),
            OpenApiExample(
                "Would revert: allowance too low (an OpenZeppelin 4 token)",
                response_only=True,
                status_codes=["200"],
                value=_reverted(
                    "The sender has not approved the LAT to take this amount of the token: "
                    "approve it first.",
                    "insufficient_allowance",
                    "ERC20: insufficient allowance",
                    _error_string_data("ERC20: insufficient allowance"),
                ),
            ),
        ],
    )
    def post(self, request, address: str):
        body = json_object_body(request)
        deposit = restaking.deposit_request_parse(
            address=address, body=body, with_sender=True, read=self.read_ahead(request)
        )
        simulation = restaking.deposit_simulate(request=deposit)
        return Response(s.deposit_simulation_data(simulation))
