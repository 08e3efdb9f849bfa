from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, PolymorphicProxySerializer, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.conditional import ConditionalReadMixin
from core.api.documents import cached_document
from core.api.params import (
    address_path_parameter,
    parse_address,
    parse_toggle,
    toggle_parameter,
)
from core.api.schema import OPTIONAL_API_KEY, READ_ERRORS, error_responses
from lats import selectors
from lats.api import serializers as s
from metrics import selectors as metrics_selectors
from operators import selectors as operator_selectors

TAG = "LATs"


class LatListView(ConditionalReadMixin, APIView):
    @extend_schema(
        tags=[TAG],
        auth=OPTIONAL_API_KEY,
        operation_id="lat_list",
        summary="List all LATs",
        description=(
            "Every LAT the service knows, ordered by chain id then proxy address. With "
            "`withGrouping=true` the LATs are grouped by token type under the keys `ETH`, `BTC` "
            "and `Native`, each always present and possibly empty."
        ),
        parameters=[toggle_parameter("withGrouping", "Group the LATs by token type.")],
        responses={
            200: OpenApiResponse(
                PolymorphicProxySerializer(
                    component_name="LatListResponse",
                    serializers=[s.LatListSerializer, s.LatGroupedListSerializer],
                    resource_type_field_name=None,
                ),
                description="Ungrouped: `{data: [LAT]}`. Grouped: `{data: {ETH, BTC, Native}}`.",
            ),
            **error_responses("unprocessable_entity", "rate_limit_exceeded"),
        },
    )
    def get(self, request):
        grouped = parse_toggle(request.query_params, "withGrouping")

        def build() -> dict:
            documents = selectors.lat_list_documents()
            if grouped:
                return {"data": selectors.lat_list_grouped(documents)}
            return {"data": [document for _, document in documents]}

        return Response(cached_document(f"lat-list:{grouped}", build))


class LatDetailView(ConditionalReadMixin, APIView):
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
        params = request.query_params
        address = parse_address(address, field="address")
        with_tvl = parse_toggle(params, "withTvl")
        with_metadata = parse_toggle(params, "withCuratedMetadata")
        with_rewards = parse_toggle(params, "withRewards")

        def build() -> dict:
            detail = metrics_selectors.lat_detail(address=address)
            record = detail.record
            document = selectors.lat_document(record)
            document["assets"] = selectors.asset_documents(record)
            if with_tvl:
                tvl = metrics_selectors.lat_tvl(
                    lat=record, links=record.tokens, staked=detail.staked
                )
                document["tvl"] = metrics_selectors.tvl_document(tvl)
            if with_rewards:
                document["apys"] = metrics_selectors.lat_apys(lat=record)
            if with_metadata:
                document["curatedMetadata"] = detail.curated_metadata
            return document

        key = f"lat:{address}:{with_tvl}:{with_metadata}:{with_rewards}"
        return Response(cached_document(key, build))


class LatTokensView(ConditionalReadMixin, APIView):
    @extend_schema(
        tags=[TAG],
        auth=OPTIONAL_API_KEY,
        operation_id="lat_tokens",
        summary="Tokens a LAT supports",
        parameters=[address_path_parameter("Proxy address of the LAT.")],
        responses={200: s.LatTokenListSerializer, **error_responses(*READ_ERRORS)},
    )
    def get(self, request, address: str):
        lat = selectors.lat_record(address=parse_address(address, field="address"))
        return Response(
            {
                "data": [
                    selectors.token_document(link) | {"refId": link.ref_id} for link in lat.tokens
                ]
            }
        )


class SupportedTokensView(ConditionalReadMixin, APIView):
    @extend_schema(
        tags=[TAG],
        auth=OPTIONAL_API_KEY,
        operation_id="lat_assets",
        summary="Every supported token with the LATs that support it",
        responses={
            200: s.SupportedTokenListSerializer,
            **error_responses("rate_limit_exceeded"),
        },
    )
    def get(self, request):
        tokens = selectors.token_list_with_lats()
        return Response({"data": s.SupportedTokenSerializer(tokens, many=True).data})


class ExchangeRatesView(ConditionalReadMixin, APIView):
    @extend_schema(
        tags=[TAG],
        auth=OPTIONAL_API_KEY,
        operation_id="lat_exchange_rates",
        summary="Exchange rates of a LAT or a token",
        description=(
            "For a LAT proxy: how many of each supported token one whole LAT is worth now "
            "(`calculateAmount`). For a token: how many of each supporting LAT one whole "
            "token buys now (`calculateShares`). Computed from the stored total assets, total "
            "supply and token prices."
        ),
        parameters=[address_path_parameter("A LAT proxy or a token address.")],
        responses={200: s.ExchangeRatesSerializer, **error_responses(*READ_ERRORS)},
    )
    def get(self, request, address: str):
        address = parse_address(address, field="address")
        rates = selectors.exchange_rates(address=address)
        return Response({"address": address, "exchangeRates": rates})


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
        average = operator_selectors.lat_avg_operator_fee(lat=lat)
        fees = selectors.lat_fee_structure(lat=lat) | {
            "avgOperatorPerformanceFee": None if average is None else float(average)
        }
        return Response({"data": fees})


class AvsLatsView(ConditionalReadMixin, APIView):
    @extend_schema(
        tags=[TAG],
        auth=OPTIONAL_API_KEY,
        operation_id="lat_avs",
        summary="LATs of an AVS",
        parameters=[address_path_parameter("Address of the AVS.")],
        responses={200: s.AvsLatListSerializer, **error_responses(*READ_ERRORS)},
    )
    def get(self, request, address: str):
        lats = selectors.avs_lats(address=parse_address(address, field="address"))
        return Response({"data": s.AvsLatSerializer(lats, many=True).data})
