from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from core.addresses import ZERO_ADDRESS
from core.api.conditional import ConditionalReadMixin
from core.api.params import (
    address_path_parameter,
    parse_address,
    parse_toggle,
    toggle_parameter,
)
from core.api.schema import OPTIONAL_API_KEY, READ_ERRORS, error_responses
from lats.selectors import lat_get
from operators import selectors
from operators.api import serializers as s

TAG = "Operators"


class OperatorListView(ConditionalReadMixin, APIView):
    @extend_schema(
        tags=[TAG],
        auth=OPTIONAL_API_KEY,
        operation_id="operator_list",
        summary="Operators delegated to",
        description="Unique operator addresses of the current delegations of every staker node "
        "of every LAT, in address order.",
        responses={200: s.OperatorAddressListSerializer, **error_responses("rate_limit_exceeded")},
    )
    def get(self, request):
        return Response({"data": selectors.operator_addresses()})


class OperatorDetailView(ConditionalReadMixin, APIView):
    @extend_schema(
        tags=[TAG],
        auth=OPTIONAL_API_KEY,
        operation_id="operator_retrieve",
        summary="Read one operator",
        parameters=[
            address_path_parameter("Address of the operator."),
            toggle_parameter("withTvl", "Add `tvl`, computed from the nodes' shares."),
        ],
        responses={200: s.OperatorDetailResponseSerializer, **error_responses(*READ_ERRORS)},
    )
    def get(self, request, address: str):
        address = parse_address(address, field="address")
        with_tvl = parse_toggle(request.query_params, "withTvl")
        operator = selectors.operator_get(address=address)
        nodes = selectors.operator_nodes(operator=operator)
        tvl = selectors.nodes_tvl(nodes)
        # What OperatorDetailSerializer reads beside the model's fields.
        vars(operator).update(
            nodes=nodes,
            liquid_tokens=sorted({node.lat.proxy_address for node in nodes}),
            total_stakers=len(nodes),
            total_tvl=tvl.tvl,
            tvl=tvl,
        )
        return Response({"data": s.OperatorDetailSerializer(operator, with_tvl=with_tvl).data})


class LatOperatorsView(ConditionalReadMixin, APIView):
    @extend_schema(
        tags=[TAG],
        auth=OPTIONAL_API_KEY,
        operation_id="lat_operators",
        summary="Operators a LAT delegates to",
        parameters=[
            address_path_parameter("Proxy address of the LAT."),
            toggle_parameter("withTvl", "Add `tvl` per operator, computed from shares."),
        ],
        responses={200: s.LatOperatorListSerializer, **error_responses(*READ_ERRORS)},
    )
    def get(self, request, address: str):
        address = parse_address(address, field="address")
        with_tvl = parse_toggle(request.query_params, "withTvl")
        lat = lat_get(address=address)
        pricing = selectors.Pricing([lat])
        data = []
        for operator, nodes in selectors.lat_operator_groups(lat=lat):
            row = {
                "operator": operator.address,
                "allocations": s.OperatorAssetSerializer(
                    selectors.aggregate_allocations(nodes), many=True
                ).data,
            }
            if with_tvl:
                row["tvl"] = s.OperatorTvlSerializer(
                    selectors.nodes_tvl(nodes, pricing=pricing)
                ).data
            data.append(row)
        return Response({"data": data})


class StakerNodesView(ConditionalReadMixin, APIView):
    @extend_schema(
        tags=[TAG],
        auth=OPTIONAL_API_KEY,
        operation_id="lat_staker_nodes",
        summary="Staker nodes of a LAT",
        parameters=[address_path_parameter("Proxy address of the LAT.")],
        responses={200: s.StakerNodeListSerializer, **error_responses(*READ_ERRORS)},
    )
    def get(self, request, address: str):
        lat = lat_get(address=parse_address(address, field="address"))
        nodes = list(selectors.staker_nodes_of(lat=lat))
        for node in nodes:
            node.lat = lat
            # What StakerNodeSerializer reads beside the model's fields.
            vars(node)["operator_delegation"] = (
                node.operator.address if node.operator else ZERO_ADDRESS
            )
        return Response(
            {
                "address": lat.proxy_address,
                "maxNodes": lat.max_nodes,
                "stakerNodes": s.StakerNodeSerializer(nodes, many=True).data,
            }
        )
