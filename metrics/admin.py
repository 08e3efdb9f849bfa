"""Admin for metric snapshots and AVS reward submissions: read-only (written by the jobs); and
the LAT's page with its history drawn above its fields."""

from __future__ import annotations

from django.contrib import admin

from lats.admin import LatAdmin, ReadOnlyAdminMixin, model_field_names
from lats.models import Lat
from metrics.charts import lat_charts
from metrics.models import AvsDay, AvsEvent, LatDay, MetricSnapshot, RewardSubmission, UsdPrice


class LatChartsAdmin(LatAdmin):
    """lats.admin's LatAdmin with the LAT's charts (metrics/charts.py) on its change page. It
    is registered here, in place of LatAdmin, because lats may not import metrics; metrics'
    admin module is discovered after lats' (INSTALLED_APPS' order)."""

    # Extends admin/change_form.html, the template LatAdmin renders.
    change_form_template = "admin/metrics/lat_change_form.html"

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        if obj is not None:
            context["lat_charts"] = lat_charts(lat=obj)
        return super().render_change_form(request, context, add, change, form_url, obj)


admin.site.unregister(Lat)
admin.site.register(Lat, LatChartsAdmin)


@admin.register(MetricSnapshot)
class MetricSnapshotAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "lat",
        "timestamp",
        "block_number",
        "total_tvl_eth",
        "native_apy",
        "total_apy",
        "total_users",
    )
    list_filter = ("lat",)
    list_select_related = ("lat",)
    ordering = ("-timestamp", "lat_id")
    fields = model_field_names(MetricSnapshot)
    readonly_fields = fields
    show_facets = admin.ShowFacets.NEVER


@admin.register(RewardSubmission)
class RewardSubmissionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "avs",
        "kind",
        "block_number",
        "token",
        "amount",
        "start_timestamp",
        "duration",
    )
    list_filter = ("kind", "avs")
    list_select_related = ("avs",)
    ordering = ("-block_number", "-log_index")
    fields = model_field_names(RewardSubmission)
    readonly_fields = fields
    show_facets = admin.ShowFacets.NEVER


@admin.register(AvsEvent)
class AvsEventAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("avs", "kind", "name", "block_number", "operator", "value")
    list_filter = ("kind", "avs")
    list_select_related = ("avs",)
    ordering = ("-block_number", "-log_index")
    fields = model_field_names(AvsEvent)
    readonly_fields = fields
    show_facets = admin.ShowFacets.NEVER


@admin.register(AvsDay)
class AvsDayAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("avs", "day", "block_number", "operators", "default_split")
    list_filter = ("avs",)
    list_select_related = ("avs",)
    ordering = ("-day", "avs_id")
    fields = model_field_names(AvsDay)
    readonly_fields = fields
    show_facets = admin.ShowFacets.NEVER


@admin.register(LatDay)
class LatDayAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("lat", "day", "block_number", "tvl_eth")
    list_filter = ("lat",)
    list_select_related = ("lat",)
    ordering = ("-day", "lat_id")
    fields = model_field_names(LatDay)
    readonly_fields = fields
    show_facets = admin.ShowFacets.NEVER


@admin.register(UsdPrice)
class UsdPriceAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("chain_id", "feed_address", "answer", "decimals", "block_number", "updated_at")
    fields = model_field_names(UsdPrice)
    readonly_fields = fields
