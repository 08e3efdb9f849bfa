from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from core.addresses import ADDRESS_PATTERN
from core.api import cursors
from core.api.conditional import ConditionalReadMixin
from core.api.params import (
    parse_address,
    parse_skip,
    parse_take,
    skip_parameter,
    take_parameter,
)
from core.api.schema import OPTIONAL_API_KEY, error_responses
from core.errors import InvalidInput
from deposits import selectors
from deposits.api.serializers import DepositListSerializer

CURSOR_VERSION = "d1"


def cursor_encode(key: selectors.DepositKey) -> str:
    """An opaque cursor: the last record's place in the listing."""
    return cursors.cursor_encode(CURSOR_VERSION, key.block_number, key.log_index, key.chain_id)


def cursor_decode(value: str) -> selectors.DepositKey:
    """The key a cursor names; InvalidInput (422) for anything this service did not make."""
    block, log, chain = cursors.cursor_decode(value, CURSOR_VERSION, 3)
    return selectors.DepositKey(block_number=block, log_index=log, chain_id=chain)


def _filter_parameter(name: str, description: str) -> OpenApiParameter:
    return OpenApiParameter(
        name,
        OpenApiTypes.STR,
        OpenApiParameter.QUERY,
        description=description,
        pattern=ADDRESS_PATTERN,
    )


class DepositListView(ConditionalReadMixin, APIView):
    @extend_schema(
        tags=["Metrics"],
        auth=OPTIONAL_API_KEY,
        operation_id="deposit_list",
        summary="Every deposit into every LAT",
        description=(
            "Deposits newest first (`createdAtBlock` desc, then `logIndex` desc, then chain id "
            "desc), paged with `skip`/`take` or by cursor: `meta.next` is an opaque cursor, "
            "or null on the last page; passed back as `cursor` (with the same filters), it "
            "returns the records that follow the last record of that page, whatever was "
            "inserted at the head meanwhile. `cursor` with a non-zero `skip`, or a cursor that "
            "does not parse, is a 422. `meta.total` counts the deposits matching the filters. "
            "Filters combine with AND.\n\n"
            "Cost at depth: a cursor page costs the same at any depth, with or without "
            "filters. A `skip` page without `sender`, `receiver` or `asset` does too (the "
            "service keeps per-span counts of deposits); with one of those filters, a `skip` "
            "page walks `skip` rows of that filter's index, so clients that go deep should "
            "follow `meta.next`. `meta.total` is read from counts kept at indexing, except "
            "when two or more of `sender`, `receiver` and `asset` are given together, when "
            "it is counted."
        ),
        parameters=[
            skip_parameter("Deposits"),
            take_parameter("Deposits"),
            cursors.cursor_parameter(
                "`meta.next` of the previous page; not with a non-zero `skip`."
            ),
            _filter_parameter("liquidTokenAddress", "Only deposits into this LAT (proxy)."),
            _filter_parameter("sender", "Only deposits sent by this address."),
            _filter_parameter("receiver", "Only deposits whose LATs went to this address."),
            _filter_parameter("asset", "Only deposits of this token."),
        ],
        responses={
            200: DepositListSerializer,
            **error_responses("unprocessable_entity", "rate_limit_exceeded"),
        },
    )
    def get(self, request):
        params = request.query_params
        skip, take = parse_skip(params), parse_take(params)
        filters = {
            name: parse_address(params[name], field=name)
            for name in selectors.FILTERS
            if name in params
        }
        after = None
        if "cursor" in params:
            if skip:
                raise InvalidInput("cursor cannot be combined with a non-zero skip.")
            after = cursor_decode(params["cursor"])
        page = selectors.deposit_page(skip=skip, take=take, filters=filters, after=after)
        next_cursor = cursor_encode(page.next) if page.next else None
        return Response(
            {
                "data": page.rows,  # already in DepositSerializer's shape
                "meta": {"total": page.total, "skip": skip, "take": take, "next": next_cursor},
            }
        )
