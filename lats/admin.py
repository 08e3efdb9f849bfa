"""Admin for staff and ops: LATs (grouping, fees, sync status), curated AVS metadata, tokens and
price feeds. What the refresh jobs read from the chain is shown read-only."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.validators import URLValidator
from django.db import models, transaction
from django.db.models import Prefetch
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from simple_history.admin import SimpleHistoryAdmin

from core.addresses import checksum, is_address
from core.admin_site import guard_third_party_actions
from core.tasknames import enqueue_metadata_refresh, enqueue_refresh_now
from lats.curation import avs_metadata_lat_ids, avs_release_curated, avs_update_curated
from lats.models import Avs, FeeStructure, Lat, LatToken, PriceFeed, SyncStatus, Token
from lats.networks import EIGENLAYER_CONTRACTS
from lats.sync_status import lat_gaps


class ReadOnlyAdminMixin:
    """Shown, never written through admin: the refresh jobs own these rows."""

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        return {}  # as `actions = None` would do

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


def model_field_names(model, *, exclude: tuple[str, ...] = ()) -> tuple[str, ...]:
    return tuple(f.name for f in model._meta.fields if not f.primary_key and f.name not in exclude)


class AddressFormField(forms.CharField):
    """An address typed in any letter case, stored EIP-55 checksummed (as the services look it
    up); blank is None when the field is optional."""

    def to_python(self, value):
        value = super().to_python(value)
        return value or None

    def validate(self, value) -> None:
        super().validate(value)
        if value is not None and not is_address(value):
            raise forms.ValidationError("Enter an address 0x + 40 hex digits.", code="address")

    def clean(self, value):
        value = super().clean(value)
        return None if value is None else checksum(value)


# --- LAT --------------------------------------------------------------------------------------


class FeeStructureInline(admin.TabularInline):
    model = FeeStructure
    fields = ("management_fee", "performance_fee")
    extra = 1
    max_num = 1
    can_delete = False
    verbose_name = "fee structure (percent)"
    verbose_name_plural = "fee structure (percent)"


class LatTokenInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = LatToken
    fields = (
        "token",
        "strategy_address",
        "decimals",
        "price_per_unit",
        "volatility_threshold",
        "balance",
        "queued_balance",
    )
    readonly_fields = fields
    extra = 0
    verbose_name_plural = "supported tokens (from the chain)"

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("lat", "token")


class SyncStatusInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = SyncStatus
    fields = (
        "job",
        "last_success_at",
        "last_block",
        "consecutive_failures",
        "last_error_at",
        "last_error",
    )
    readonly_fields = fields
    extra = 0
    verbose_name_plural = "last run of each refresh job"

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("lat")


def _sync_line(status: SyncStatus) -> tuple[str, str]:
    if status.consecutive_failures:
        return status.job, f"failing ({status.consecutive_failures}x since last success)"
    if status.last_success_at is None:
        return status.job, "never run"
    age = int((timezone.now() - status.last_success_at).total_seconds())
    return status.job, f"ok {age} s ago, block {status.last_block}"


# What staff may set on a LAT besides its group: the unit of account (a manifest may lack it)
# and the EigenLayer core contracts (overrides of the network's preset).
LAT_EDITABLE = ("group_override", "base_asset", *Lat.OVERRIDE_FIELDS.values())


class LatAdminForm(forms.ModelForm):
    base_asset = AddressFormField(
        help_text="Unit of account: beacon-chain ETH 0xbeaC0eeEeeeeEEeEeEEEEeeEEeEeeeEeeEEBEaC0 "
        "or a token (give it a price feed for its values in ETH)."
    )
    delegation_manager = AddressFormField(required=False)
    strategy_manager = AddressFormField(required=False)
    rewards_coordinator = AddressFormField(required=False)
    avs_directory = AddressFormField(required=False)
    allocation_manager = AddressFormField(required=False)

    class Meta:
        model = Lat
        fields = LAT_EDITABLE

    def clean(self):
        cleaned = super().clean()
        for name in Lat.OVERRIDE_FIELDS.values():  # blank: the preset (the model stores "")
            if name in cleaned and cleaned[name] is None:
                cleaned[name] = ""
        return cleaned


@admin.register(Lat)
class LatAdmin(admin.ModelAdmin):
    form = LatAdminForm
    list_display = (
        "symbol",
        "name",
        "chain_id",
        "proxy_address",
        "avs",
        "effective_group",
        "group_override",
        "paused",
        "state_block",
        "sync_summary",
    )
    list_display_links = ("symbol",)
    list_editable = ("group_override",)
    list_filter = ("chain_id", "group_override", "paused")
    list_select_related = ("avs",)
    search_fields = ("symbol", "name", "proxy_address")
    ordering = ("chain_id", "symbol", "id")
    inlines = (FeeStructureInline, SyncStatusInline, LatTokenInline)
    actions = ("refresh_now",)
    fieldsets = (
        (
            None,
            {"fields": ("symbol", "name", "chain_id", "proxy_address", "implementation_address")},
        ),
        (
            "Grouping",
            {"fields": ("base_asset", "base_asset_symbol", "effective_group", "group_override")},
        ),
        (
            "State read from the chain",
            {
                "fields": (
                    "state_block",
                    "total_assets",
                    "total_supply",
                    "unit_eth_price",
                    "paused",
                    "max_nodes",
                    "apys",
                )
            },
        ),
        (
            "EigenLayer core contracts (blank: the network's preset, else what the "
            "LiquidTokenManager names)",
            {
                "fields": (
                    *Lat.OVERRIDE_FIELDS.values(),
                    "core_contracts_in_use",
                    "eigenlayer_from_chain",
                    "gaps",
                )
            },
        ),
        (
            "Deployment (from the manifest)",
            {
                "classes": ("collapse",),
                "fields": (
                    "avs",
                    "deployment_block",
                    "contract_deployments",
                    "manifest_version",
                    "manifest_as_imported",
                    "created_at",
                ),
            },
        ),
    )
    readonly_fields = (
        *model_field_names(Lat, exclude=LAT_EDITABLE),
        "eigenlayer_from_chain",
        "manifest_version",
        "effective_group",
        "core_contracts_in_use",
        "gaps",
        "manifest_as_imported",
    )

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .prefetch_related(
                Prefetch("sync_statuses", queryset=SyncStatus.objects.order_by("job"))
            )
        )

    def has_add_permission(self, request) -> bool:
        return False  # LATs come from `manage.py lat_import`

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # would cascade to every deposit and snapshot of the LAT

    @admin.display(description="group")
    def effective_group(self, obj: Lat) -> str:
        return obj.group

    @admin.display(description="sync")
    def sync_summary(self, obj: Lat):
        lines = [_sync_line(status) for status in obj.sync_statuses.all()]
        lines += [("unknown", gap) for gap in lat_gaps(lat=obj)]
        if not lines:
            return "never synced"
        return format_html_join("", "<div>{}: {}</div>", lines)

    @admin.display(description="in use")
    def core_contracts_in_use(self, obj: Lat):
        rows = [(name, obj.core_contract(name) or "unknown") for name in EIGENLAYER_CONTRACTS]
        return format_html_join("", "<div>{}: {}</div>", rows)

    @admin.display(description="what the service cannot know yet")
    def gaps(self, obj: Lat):
        return format_html_join("", "<div>{}</div>", ((gap,) for gap in lat_gaps(lat=obj))) or "-"

    @admin.display(description="manifest as imported (every member, unknown ones too)")
    def manifest_as_imported(self, obj: Lat):
        return format_html("<pre>{}</pre>", json.dumps(obj.manifest, indent=2, sort_keys=True))

    def has_refresh_permission(self, request) -> bool:
        """A refresh rewrites the LAT's chain state: staff who may change LATs."""
        return self.has_change_permission(request)

    @admin.action(
        description="Refresh now (state, deposits, snapshot, AVS metadata)",
        permissions=["refresh"],
    )
    def refresh_now(self, request, queryset):
        ids = list(queryset.values_list("id", flat=True))
        transaction.on_commit(partial(enqueue_refresh_now, ids))
        self.message_user(request, f"Refresh queued for {len(ids)} LAT(s).", messages.SUCCESS)


# --- AVS ----------------------------------------------------------------------------------------


def _enqueue_metadata_refresh(avs_ids: list[int]) -> None:
    """Refresh the metadata of each AVS through one of its LATs (by task name)."""
    enqueue_metadata_refresh(avs_metadata_lat_ids(avs_ids))


WEB_SCHEMES = ("http", "https")


def is_web_url(value: object) -> bool:
    """An http(s) link (what a browser may load as the logo)."""
    if not isinstance(value, str):
        return False
    try:
        URLValidator(schemes=list(WEB_SCHEMES))(value)
    except forms.ValidationError:
        return False
    return True


def _https_urls(field, **kwargs):
    """Curated links without a scheme get https (Django 6's default; silences its warning)."""
    if isinstance(field, models.URLField):
        kwargs.setdefault("assume_scheme", "https")
    return field.formfield(**kwargs)


class TagListField(forms.CharField):
    """Tags edited as a list: one per line or comma-separated; stored as a JSON list of strings
    (each trimmed, duplicates dropped, order kept)."""

    MAX_TAGS = 20
    MAX_LENGTH = 40
    widget = forms.Textarea(attrs={"rows": 3})

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault("help_text", "One tag per line or separated by commas.")
        kwargs.pop("encoder", None)
        kwargs.pop("decoder", None)
        super().__init__(**kwargs)

    def prepare_value(self, value):
        return "\n".join(value) if isinstance(value, list | tuple) else value

    # JSONField.to_python returns any JSON value; its stub inherits CharField's `str | None`.
    def to_python(self, value) -> list[str]:  # type: ignore[override]
        if isinstance(value, list | tuple):
            return [str(tag) for tag in value]
        text = "" if value in self.empty_values else str(value)
        tags: list[str] = []
        for tag in (part.strip() for part in text.replace(",", "\n").splitlines()):
            if tag and tag not in tags:
                tags.append(tag)
        return tags

    def validate(self, value: list[str]) -> None:
        if len(value) > self.MAX_TAGS:
            raise forms.ValidationError(f"At most {self.MAX_TAGS} tags.", code="max_tags")
        for tag in value:
            if len(tag) > self.MAX_LENGTH or not tag.isprintable():
                raise forms.ValidationError(
                    f"Each tag is at most {self.MAX_LENGTH} printable characters: {tag!r:.60}",
                    code="tag",
                )

    def run_validators(self, value) -> None:
        return None  # CharField's length validators would measure the list, not each tag

    def has_changed(self, initial, data) -> bool:
        return self.to_python(initial) != self.to_python(data)


class AvsAdminForm(forms.ModelForm):
    metadata_token_address = AddressFormField(required=False, label="Metadata token address")
    tags = TagListField()
    release_fields = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Release to the metadata document",
        help_text=(
            "Ticked fields go back to the AVS's metadata document: the metadata refresh queued "
            "on save overwrites them again."
        ),
    )

    class Meta:
        model = Avs
        fields = Avs.CURATED_FIELDS
        formfield_callback = _https_urls

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            if isinstance(field, forms.URLField):  # Django's also takes ftp: links
                field.validators.append(
                    URLValidator(schemes=list(WEB_SCHEMES), message="Enter an http(s) URL.")
                )
        edited = self.instance.staff_edited_fields if self.instance.pk else []
        self.fields["release_fields"].choices = [
            (name, Avs._meta.get_field(name).verbose_name) for name in edited
        ]


@admin.register(Avs)
class AvsAdmin(SimpleHistoryAdmin):
    form = AvsAdminForm
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    list_display = (
        "address",
        "metadata_name",
        "chain_id",
        "metadata_website",
        "edited_by_staff",
        "metadata_updated_block",
    )
    list_filter = ("chain_id",)
    search_fields = ("address", "metadata_name")
    actions = ("reset_to_onchain_metadata",)
    readonly_fields = (
        "chain_id",
        "address",
        "metadata_uri",
        "metadata_updated_block",
        "staff_edited_fields",
        "logo_preview",
    )
    fieldsets = (
        (None, {"fields": readonly_fields}),
        (
            "Curated metadata (a field staff change is kept by the metadata refresh)",
            {"fields": (*Avs.CURATED_FIELDS, "release_fields")},
        ),
    )

    @admin.display(description="logo")
    def logo_preview(self, obj: Avs) -> str:
        """The logo as an image; only an http(s) link is loaded (never javascript: or data:)."""
        if not is_web_url(obj.metadata_logo):
            return "-"
        return format_html(
            '<img src="{}" alt="logo of {}" style="max-height:64px;max-width:240px">',
            obj.metadata_logo,
            obj,
        )

    def has_add_permission(self, request) -> bool:
        return False  # AVSs come with the LATs that secure them

    @admin.display(description="edited by staff")
    def edited_by_staff(self, obj: Avs) -> str:
        return ", ".join(obj.staff_edited_fields) or "-"

    def save_model(self, request, obj, form, change):
        changes = {
            name: form.cleaned_data[name]
            for name in form.changed_data
            if name in Avs.CURATED_FIELDS
        }
        avs_update_curated(avs=obj, changes=changes, by_staff=True)
        release = [
            name for name in form.cleaned_data.get("release_fields", ()) if name not in changes
        ]
        if release and avs_release_curated(avs=obj, fields=release):
            transaction.on_commit(partial(_enqueue_metadata_refresh, [obj.pk]))

    @admin.action(
        description="Reset to on-chain metadata (release every staff edit)",
        permissions=["change"],
    )
    def reset_to_onchain_metadata(self, request, queryset):
        avss = list(queryset)
        released = [avs.pk for avs in avss if avs_release_curated(avs=avs)]
        transaction.on_commit(partial(_enqueue_metadata_refresh, [avs.pk for avs in avss]))
        self.message_user(
            request,
            f"Released the staff edits of {len(released)} AVS(s); a metadata refresh is queued.",
            messages.SUCCESS,
        )


# --- tokens and price feeds -------------------------------------------------------------------


@admin.register(Token)
class TokenAdmin(SimpleHistoryAdmin):
    list_display = ("symbol", "name", "chain_id", "address", "decimals", "ref_id", "base_apy")
    list_editable = ("ref_id", "base_apy")
    list_filter = ("chain_id",)
    search_fields = ("symbol", "name", "address")
    fields = ("symbol", "name", "chain_id", "address", "decimals", "ref_id", "base_apy")
    readonly_fields = ("symbol", "name", "chain_id", "address", "decimals")

    def has_add_permission(self, request) -> bool:
        return False  # tokens come from the LATs that support them

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class PriceFeedForm(forms.ModelForm):
    token_address = AddressFormField()
    feed_address = AddressFormField()

    class Meta:
        model = PriceFeed
        fields = ("chain_id", "token_address", "feed_address")


@admin.register(PriceFeed)
class PriceFeedAdmin(SimpleHistoryAdmin):
    form = PriceFeedForm
    list_display = ("token_address", "chain_id", "feed_address", "answer", "decimals", "updated_at")
    list_filter = ("chain_id",)
    search_fields = ("token_address", "feed_address")

    def get_fields(self, request, obj=None):
        fields = ("chain_id", "token_address", "feed_address")
        return fields if obj is None else (*fields, "answer", "decimals", "updated_at")

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return ()
        return ("chain_id", "token_address", "answer", "decimals", "updated_at")


@admin.register(FeeStructure)
class FeeStructureAdmin(SimpleHistoryAdmin):
    """The fees of each LAT, also edited inline on the LAT's page; here with their history."""

    list_display = ("lat", "management_fee", "performance_fee")
    list_select_related = ("lat",)
    search_fields = ("lat__symbol", "lat__proxy_address")
    fields = ("lat", "management_fee", "performance_fee")
    ordering = ("lat__chain_id", "lat__symbol", "id")

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else ("lat",)


@admin.register(SyncStatus)
class SyncStatusAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "lat",
        "job",
        "last_success_at",
        "last_block",
        "consecutive_failures",
        "last_error_at",
    )
    list_filter = ("job",)
    list_select_related = ("lat",)
    search_fields = ("lat__symbol", "lat__proxy_address")


# Schedules (django-celery-beat) and login attempts (django-axes): their own admins run actions
# without asking for a permission; these replacements ask.
guard_third_party_actions(admin.site)
