"""Admin for operators (metadata editable) and staker nodes (read-only, from the chain)."""

from __future__ import annotations

from django.contrib import admin

from lats.admin import ReadOnlyAdminMixin, model_field_names
from operators.models import NodeAsset, Operator, OperatorAvsSplit, StakerNode


class StakerNodeInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = StakerNode
    fields = ("lat", "node_id", "address", "updated_at_block", "updated_at")
    readonly_fields = fields
    extra = 0
    verbose_name_plural = "staker nodes delegating to this operator"

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("lat")


class OperatorAvsSplitInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = OperatorAvsSplit
    fields = ("avs", "split_bips")
    readonly_fields = fields
    extra = 0
    verbose_name_plural = "rewards splits (from the chain)"

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("operator", "avs")


@admin.register(Operator)
class OperatorAdmin(admin.ModelAdmin):
    list_display = ("address", "metadata_name", "chain_id", "metadata_website")
    list_filter = ("chain_id",)
    search_fields = ("address", "metadata_name")
    readonly_fields = ("chain_id", "address")
    inlines = (OperatorAvsSplitInline, StakerNodeInline)

    def has_add_permission(self, request) -> bool:
        return False  # operators come from the delegations of staker nodes

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class NodeAssetInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = NodeAsset
    fields = ("token", "strategy_address", "core_shares", "staked_amount")
    readonly_fields = fields
    extra = 0

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("token", "node__lat")


@admin.register(StakerNode)
class StakerNodeAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("address", "lat", "node_id", "operator", "created_at_block", "updated_at_block")
    list_filter = ("lat",)
    list_select_related = ("lat", "operator")
    search_fields = ("address",)
    fields = model_field_names(StakerNode)
    readonly_fields = fields
    inlines = (NodeAssetInline,)
