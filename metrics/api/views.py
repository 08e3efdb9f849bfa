from __future__ import annotations

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.conditional import ConditionalReadMixin
from core.api.params import (
    INSTANT_RANGE_TEXT,
    address_path_parameter,
    parse_address,
    parse_choice,
    parse_instant,
)
from core.api.schema import INSTANT_SCHEMA, OPTIONAL_API_KEY, READ_ERRORS, error_responses
from core.errors import InvalidInput
from lats.selectors import lat_get
from metrics import selectors
from metrics.api.serializers import HistoricalListSerializer, HistoricalPointSerializer

_RANGE = f"Must fall {INSTANT_RANGE_TEXT}, else a 422 naming the parameter."


class HistoricalView(ConditionalReadMixin, APIView):
    def etag_extra(self, request) -> str:
        # Without endAt the window ends at the current minute: the answer moves with the clock.
        return "" if "endAt" in request.query_params else timezone.now().strftime("%Y%m%d%H%M")

    @extend_schema(
        tags=["Metrics"],
        auth=OPTIONAL_API_KEY,
        operation_id="lat_historical",
        summary="Historical metrics of a LAT",
        description=(
            "One data point per period, from `endAt` back to `startAt`, `frequency` apart: the "
            "LAT's metrics as last recorded at or before the point. TVL and APY are levels "
            "(the same in both variants); `totalUsers` counts holders (balance above zero) at the "
            "point for `cumulative`, and addresses that first became holders in the period for "
            "`discrete`. The window "
            "may span at most 365 days for `1d` and 720 days for `7d`."
        ),
        parameters=[
            address_path_parameter("Proxy address of the LAT."),
            OpenApiParameter(
                "frequency",
                OpenApiTypes.STR,
                OpenApiParameter.QUERY,
                enum=["1d", "7d"],
                default="1d",
                description="Spacing of the data points.",
            ),
            OpenApiParameter(
                "variant",
                OpenApiTypes.STR,
                OpenApiParameter.QUERY,
                enum=["discrete", "cumulative"],
                default="cumulative",
                description="Tally type.",
            ),
            OpenApiParameter(
                "startAt",
                INSTANT_SCHEMA,
                OpenApiParameter.QUERY,
                description="ISO 8601 date or date-time; no zone means UTC; a date alone "
                f"means the start of that day (00:00:00). {_RANGE} Default: endAt minus 31 "
                "days (1d) or 365 days (7d).",
            ),
            OpenApiParameter(
                "endAt",
                INSTANT_SCHEMA,
                OpenApiParameter.QUERY,
                description="ISO 8601 date or date-time; no zone means UTC. A date alone "
                "means the end of that day, 23:59:59.999999 UTC, so that the last point falls "
                f"on that date (`2026-05-01` ends at `2026-05-01T23:59:59.999999Z`). {_RANGE} "
                "Default: now, to the minute.",
            ),
        ],
        responses={200: HistoricalListSerializer, **error_responses(*READ_ERRORS)},
    )
    def get(self, request, address: str):
        params = request.query_params
        address = parse_address(address, field="address")
        frequency = parse_choice(params, "frequency", choices=("1d", "7d"), default="1d")
        variant = parse_choice(
            params, "variant", choices=("discrete", "cumulative"), default="cumulative"
        )
        end = parse_instant(params, "endAt", end_of_day=True) or timezone.now().replace(
            second=0, microsecond=0
        )
        start = parse_instant(params, "startAt") or end - selectors.DEFAULT_WINDOW[frequency]
        if start > end:
            raise InvalidInput("startAt must not be after endAt.")
        limit = selectors.MAX_WINDOW[frequency]
        if end - start > limit:
            raise InvalidInput(
                f"The window from startAt to endAt may span at most {limit.days} days "
                f"for frequency {frequency}."
            )
        lat = lat_get(address=address)
        points = selectors.lat_history(
            lat=lat, frequency=frequency, variant=variant, start=start, end=end
        )
        return Response({"data": HistoricalPointSerializer(points, many=True).data})
