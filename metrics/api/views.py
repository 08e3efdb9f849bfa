from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import cursors
from core.api.conditional import ConditionalReadMixin
from core.api.params import (
    INSTANT_RANGE_TEXT,
    address_path_parameter,
    parse_address,
    parse_choice,
    parse_instant,
)
from core.api.schema import INSTANT_SCHEMA, OPTIONAL_API_KEY, READ_ERRORS, error_responses
from core.errors import InvalidInput, ServiceError
from lats.selectors import lat_get
from metrics import selectors
from metrics.api.serializers import (
    HistoricalListSerializer,
    HistoricalPointSerializer,
    RatesSerializer,
)

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


RATES_CURSOR_VERSION = "r1"
RATES_DEFAULT_WINDOW = timedelta(days=90)


class RatesView(ConditionalReadMixin, APIView):
    def etag_extra(self, request) -> str:
        # Without `to` the range ends now: the answer moves with the clock.
        return "" if "to" in request.query_params else timezone.now().strftime("%Y%m%d%H")

    def _query(self, request) -> tuple[str, str, datetime, datetime, Any]:
        """The address, interval, range and cursor the request asks for (InvalidInput else)."""
        params = request.query_params
        address = parse_address(self.kwargs.get("address", ""), field="address")
        interval = parse_choice(params, "interval", choices=("day", "hour"), default="day")
        end = parse_instant(params, "to", end_of_day=True) or timezone.now().replace(
            second=0, microsecond=0
        )
        start = parse_instant(params, "from") or end - RATES_DEFAULT_WINDOW
        if start > end:
            raise InvalidInput("from must not be after to.")
        after = (
            cursors.cursor_decode(params["cursor"], RATES_CURSOR_VERSION, 1)[0]
            if "cursor" in params
            else None
        )
        return address, interval, start, end, after

    def document_name(self, request) -> str | None:
        try:
            address, interval, start, end, after = self._query(request)
        except ServiceError:
            return None
        return f"rates:{address}:{interval}:{start.isoformat()}:{end.isoformat()}:{after}"

    @extend_schema(
        tags=["Metrics"],
        auth=OPTIONAL_API_KEY,
        operation_id="lat_rates",
        summary="Exchange rate of a LAT over time",
        description=(
            "The LAT's exchange rate (units of account per whole LAT) at the last block of "
            "every UTC day or hour whose start falls within `from`..`to`, oldest first, back to "
            "the LAT's first block (read from the chain's history when the LAT was imported). "
            "An interval is listed once it has ended. At most 1,000 points a page: `meta.next` "
            "is an opaque cursor, or null on the last page; passed back as `cursor` (with the "
            "same parameters) it returns the points that follow."
        ),
        parameters=[
            address_path_parameter("Proxy address of the LAT."),
            OpenApiParameter(
                "interval",
                OpenApiTypes.STR,
                OpenApiParameter.QUERY,
                enum=["day", "hour"],
                default="day",
                description="One point per UTC day or per UTC hour.",
            ),
            OpenApiParameter(
                "from",
                INSTANT_SCHEMA,
                OpenApiParameter.QUERY,
                description="ISO 8601 date or date-time; no zone means UTC. The first "
                f"interval's start at or after it. {_RANGE} Default: `to` minus 90 days.",
            ),
            OpenApiParameter(
                "to",
                INSTANT_SCHEMA,
                OpenApiParameter.QUERY,
                description="ISO 8601 date or date-time; no zone means UTC; a date alone means "
                f"the end of that day. The last interval's start at or before it. {_RANGE} "
                "Default: now.",
            ),
            cursors.cursor_parameter(),
        ],
        responses={200: RatesSerializer, **error_responses(*READ_ERRORS)},
    )
    def get(self, request, address: str):
        address, interval, start, end, after = self._query(request)

        def build() -> dict:  # an unknown LAT raises its 404 here: nothing is stored
            page = selectors.rate_page(
                lat=lat_get(address=address), interval=interval, start=start, end=end, after=after
            )
            next_after = page.next_after
            return {
                "data": RatesSerializer({"data": page.points}).data["data"],
                "meta": {
                    "next": None
                    if next_after is None
                    else cursors.cursor_encode(RATES_CURSOR_VERSION, next_after)
                },
            }

        return self.stored_document(request, build)
