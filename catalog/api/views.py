"""The documents that join several apps: the LAT detail (the registry's LAT with its TVL and APY
windows from metrics), its fees (staff's fee structure with its operators' average split), and
`/yields`, every LAT as DefiLlama's yield server lists a pool. The apps below know nothing of
each other's reads; this floor composes them."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import yields
from catalog.api import serializers as cs
from core.api.conditional import ConditionalReadMixin
from core.api.documents import cached_document
from core.api.params import (
    address_path_parameter,
    parse_address,
    parse_toggle,
    toggle_parameter,
)
from core.api.schema import OPTIONAL_API_KEY, READ_ERRORS, error_responses
from core.errors import ServiceError
from lats import selectors
from lats.api import serializers as s
from metrics import selectors as metrics_selectors

TAG = "LATs"


class LatDetailView(ConditionalReadMixin, APIView):
    def document_name(self, request) -> str | None:
        params = request.query_params
        try:
            address = parse_address(self.kwargs.get("address", ""), field="address")
            toggles = [
                parse_toggle(params, t) for t in ("withTvl", "withCuratedMetadata", "withRewards")
            ]
        except ServiceError:
            return None
        return ":".join(["lat", address, *map(str, toggles)])

    @extend_schema(
        tags=[TAG],
        auth=OPTIONAL_API_KEY,
        operation_id="lat_retrieve",
        summary="Read one LAT",
        description=(
            "The LAT with its per-token balances (`assets`, always present). The toggles add "
            "`tvl` (computed from the stored balances and node shares), `curatedMetadata` "
            "(the AVS metadata staff curate) and `apys` (APY windows)."
        ),
        parameters=[
            address_path_parameter("Proxy address of the LAT."),
            toggle_parameter("withTvl", "Add `tvl`, computed from shares."),
            toggle_parameter("withCuratedMetadata", "Add `curatedMetadata`."),
            toggle_parameter("withRewards", "Add `apys`."),
        ],
        responses={200: s.LatDetailSerializer, **error_responses(*READ_ERRORS)},
    )
    def get(self, request, address: str):
        def build() -> dict:
            params = request.query_params
            lat = parse_address(address, field="address")
            with_tvl = parse_toggle(params, "withTvl")
            with_metadata = parse_toggle(params, "withCuratedMetadata")
            with_rewards = parse_toggle(params, "withRewards")
            detail = metrics_selectors.lat_detail(address=lat)
            record = detail.record
            document = selectors.lat_document(record)
            document["assets"] = selectors.asset_documents(record)
            if with_tvl:
                tvl = metrics_selectors.lat_tvl(lat=record, links=record.tokens)
                document["tvl"] = metrics_selectors.tvl_document(tvl)
            if with_rewards:
                document["apys"] = metrics_selectors.lat_apys(lat=record)
            if with_metadata:
                document["curatedMetadata"] = detail.curated_metadata
            return document

        return self.stored_document(request, build)


class LatFeesView(ConditionalReadMixin, APIView):
    @extend_schema(
        tags=[TAG],
        auth=OPTIONAL_API_KEY,
        operation_id="lat_fees",
        summary="Fee structure of a LAT",
        parameters=[address_path_parameter("Proxy address of the LAT.")],
        responses={200: s.FeeStructureResponseSerializer, **error_responses(*READ_ERRORS)},
    )
    def get(self, request, address: str):
        lat = selectors.lat_get(address=parse_address(address, field="address"))
        average = metrics_selectors.lat_avg_operator_fee(lat=lat)
        fees = selectors.lat_fee_structure(lat=lat) | {
            "avgOperatorPerformanceFee": None if average is None else float(average)
        }
        return Response({"data": fees})


class YieldsView(ConditionalReadMixin, APIView):
    @extend_schema(
        tags=["Metrics"],
        auth=OPTIONAL_API_KEY,
        operation_id="yields",
        summary="Every LAT as a yield pool (DefiLlama's shape)",
        description=yields.DESCRIPTION,
        responses={
            200: OpenApiResponse(cs.YieldsSerializer, description="The pools and the omitted."),
            **error_responses("rate_limit_exceeded"),
        },
    )
    def get(self, request):
        base = request.build_absolute_uri("/").rstrip("/")
        template = settings.YIELDS_URL_TEMPLATE or base + "/lat/{address}"
        return Response(cached_document(f"yields:{template}", lambda: yields.pools(template)))
