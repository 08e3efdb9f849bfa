"""Admin for metric snapshots and AVS reward submissions: read-only (written by the jobs)."""

from __future__ import annotations

from django.contrib import admin

from lats.admin import ReadOnlyAdminMixin, model_field_names
from metrics.models import MetricSnapshot, RewardSubmission


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
    list_display = ("avs", "block_number", "token", "amount", "start_timestamp", "duration")
    list_filter = ("avs",)
    list_select_related = ("avs",)
    ordering = ("-block_number", "-log_index")
    fields = model_field_names(RewardSubmission)
    readonly_fields = fields
    show_facets = admin.ShowFacets.NEVER
