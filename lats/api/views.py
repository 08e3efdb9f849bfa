from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, PolymorphicProxySerializer, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.conditional import ConditionalReadMixin
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

TAG = "LATs"


class LatListView(ConditionalReadMixin, APIView):
    def document_name(self, request) -> str | None:
        try:
            return f"lat-list:{parse_toggle(request.query_params, 'withGrouping')}"
        except ServiceError:
            return None

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
        def build() -> dict:
            grouped = parse_toggle(request.query_params, "withGrouping")
            documents = selectors.lat_list_documents()
            if grouped:
                return {"data": selectors.lat_list_grouped(documents)}
            return {"data": [document for _, document in documents]}

        return self.stored_document(request, build)


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
