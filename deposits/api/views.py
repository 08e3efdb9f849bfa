from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from deposits import selectors
from deposits.api.serializers import DepositListSerializer
from latsite.addresses import ADDRESS_PATTERN
from latsite.api.params import parse_address, parse_int
from latsite.api.schema import OPTIONAL_API_KEY, error_responses

MAX_TAKE = 100
DEFAULT_TAKE = 12
MAX_SKIP = 10**18 - 1  # parse_int takes at most 18 digits


def _filter_parameter(name: str, description: str) -> OpenApiParameter:
    return OpenApiParameter(
        name,
        OpenApiTypes.STR,
        OpenApiParameter.QUERY,
        description=description,
        pattern=ADDRESS_PATTERN,
    )


class DepositListView(APIView):
    @extend_schema(
        tags=["Metrics"],
        auth=OPTIONAL_API_KEY,
        operation_id="deposit_list",
        summary="Every deposit into every LAT",
        description=(
            "Deposits newest first (`createdAtBlock` desc, then log index desc), paged with "
            "`skip`/`take`; `meta.total` counts the deposits matching the filters. Filters "
            "combine with AND."
        ),
        parameters=[
            OpenApiParameter(
                "skip",
                {"type": "integer", "minimum": 0, "maximum": MAX_SKIP, "default": 0},
                OpenApiParameter.QUERY,
                description=f"Deposits to skip; an integer 0..{MAX_SKIP} (at most 18 digits).",
            ),
            OpenApiParameter(
                "take",
                {"type": "integer", "minimum": 1, "maximum": MAX_TAKE, "default": DEFAULT_TAKE},
                OpenApiParameter.QUERY,
                description=f"Deposits to return; an integer 1..{MAX_TAKE}.",
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
        skip = parse_int(params, "skip", default=0, minimum=0, maximum=MAX_SKIP)
        take = parse_int(params, "take", default=DEFAULT_TAKE, minimum=1, maximum=MAX_TAKE)
        filters = {
            name: parse_address(params[name], field=name)
            for name in selectors.FILTERS
            if name in params
        }
        page = selectors.deposit_page(skip=skip, take=take, filters=filters)
        return Response(
            {
                "data": page.rows,  # already in DepositSerializer's shape
                "meta": {"total": page.total, "skip": skip, "take": take},
            }
        )
