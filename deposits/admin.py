"""Admin for deposits: read-only, searchable by transaction hash or sender, and cheap on a table
of millions of rows (no COUNT(*) over the table per page, no OFFSET scans when unfiltered)."""

from __future__ import annotations

import re
from functools import cached_property

from django.contrib import admin
from django.core.paginator import Paginator
from django.db.models import Q, QuerySet

from core.addresses import checksum, is_address
from deposits.models import Deposit, DepositCheckpoint, Event, Holder, HolderTally
from deposits.selectors import deposit_key_at, deposit_total
from lats.admin import ReadOnlyAdminMixin, model_field_names
from lats.models import Lat

TX_HASH = re.compile(r"0x[0-9a-fA-F]{64}")


class CappedPaginator(Paginator):
    """Counts at most COUNT_CAP rows: beyond that, pages are not offered; narrow the filter
    or search (a COUNT(*) over a table of millions per page view would be the page's cost)."""

    COUNT_CAP = 10_000
    object_list: QuerySet  # the admin's changelist queryset

    @cached_property
    def count(self) -> int:
        return self.object_list.order_by()[: self.COUNT_CAP].count()


class DepositPaginator(CappedPaginator):
    """Counts and pages the unfiltered deposit list without COUNT(*) or OFFSET over the table.

    Unfiltered and in the listing's own order, the count is the sum of the LATs' counts and a
    page starts at the key deposits/selectors.py finds from the per-span counts (the API's
    deep pages do the same). A filtered or searched list is counted as CappedPaginator counts.
    Django's Paginator can do neither, hence this class.
    """

    object_list: QuerySet[Deposit]  # the admin's changelist queryset

    def _unfiltered(self) -> bool:
        query = self.object_list.query
        if query.where or query.distinct or query.is_sliced:
            return False
        listing = tuple(Deposit._meta.ordering or ())
        order = tuple(query.order_by) or listing
        # The changelist appends the primary key for a total order; the listing key is one.
        return order in (listing, (*listing, "-pk"))

    @cached_property
    def count(self) -> int:
        return deposit_total() if self._unfiltered() else super().count

    def page(self, number):
        if not self._unfiltered():
            return super().page(number)
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        top = min(bottom + self.per_page, self.count)
        if top + self.orphans >= self.count:
            top = self.count
        key = deposit_key_at(bottom)
        if key is None:
            return self._get_page(self.object_list.none(), number, self)
        b, log, chain = key.block_number, key.log_index, key.chain_id
        rows = self.object_list.filter(
            Q(block_number__lt=b)
            | Q(block_number=b, log_index__lt=log)
            | Q(block_number=b, log_index=log, chain_id__lte=chain)
        )
        return self._get_page(rows[: top - bottom], number, self)


class LargeTableAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Read-only lists of tables of millions of rows: capped counts, no facets, and only the
    exact, index-friendly searches that `search` allows (anything else finds nothing)."""

    list_select_related = ("lat",)
    list_per_page = 100
    paginator = CappedPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER

    def search(self, queryset: QuerySet, term: str) -> QuerySet:
        return queryset.none()

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if not term:
            return queryset, False
        return self.search(queryset, term), False


@admin.register(Deposit)
class DepositAdmin(LargeTableAdmin):
    list_display = (
        "lat",
        "block_number",
        "tx_hash",
        "log_index",
        "sender",
        "receiver",
        "asset",
        "amount",
        "shares",
        "created_at",
    )
    list_display_links = ("tx_hash",)
    list_filter = ("lat",)
    sortable_by = ()  # the listing's own order only: the one the paginator serves cheaply
    paginator = DepositPaginator
    search_fields = ("tx_hash", "sender")  # see search: exact, index-friendly
    search_help_text = "A transaction hash (0x + 64 hex digits) or a sender address."
    fields = model_field_names(Deposit)
    readonly_fields = fields

    def search(self, queryset, term):
        if TX_HASH.fullmatch(term):
            # The unique key (chain_id, tx_hash, log_index) serves the lookup once the chain ids
            # are named; the node answers hashes in lower case.
            chains = Lat.objects.values_list("chain_id", flat=True).distinct()
            return queryset.filter(chain_id__in=list(chains), tx_hash=term.lower())
        if is_address(term):
            return queryset.filter(sender=checksum(term))
        return queryset.none()


@admin.register(DepositCheckpoint)
class DepositCheckpointAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("lat", "block_number", "block_hash", "updated_at")
    fields = model_field_names(DepositCheckpoint)
    readonly_fields = fields


ADDRESS_ARGS = ("sender", "receiver", "from", "to", "account", "operator", "node", "token")


@admin.register(Event)
class EventAdmin(LargeTableAdmin):
    list_display = ("lat", "block_number", "log_index", "type", "tx_hash", "created_at")
    list_display_links = ("block_number", "tx_hash")
    list_filter = ("lat", "type")
    sortable_by = ()
    search_fields = ("tx_hash",)  # see search: exact, index-friendly
    search_help_text = (
        "A transaction hash (0x + 64 hex digits), or an address: the events that name it."
    )
    fields = model_field_names(Event)
    readonly_fields = fields

    def search(self, queryset, term):
        if TX_HASH.fullmatch(term):
            return queryset.filter(tx_hash=term.lower())
        if is_address(term):
            # Arguments are stored checksummed, under the names of extensions.md's table.
            address = checksum(term)
            matches = Q()
            for name in ADDRESS_ARGS:
                matches |= Q(**{f"args__{name}": address})
            return queryset.filter(matches)
        return queryset.none()


@admin.register(Holder)
class HolderAdmin(LargeTableAdmin):
    list_display = ("lat", "address", "balance", "first_block")
    list_filter = ("lat",)
    sortable_by = ()
    search_fields = ("address",)  # see search: exact, index-friendly
    search_help_text = "An address: its balance in each LAT."
    fields = model_field_names(Holder)
    readonly_fields = fields

    def get_queryset(self, request):
        return super().get_queryset(request).filter(balance__gt=0)

    def search(self, queryset, term):
        if is_address(term):
            return queryset.filter(address=term.lower())
        return queryset.none()


@admin.register(HolderTally)
class HolderTallyAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("lat", "holders", "ever")
    list_select_related = ("lat",)
    fields = model_field_names(HolderTally)
    readonly_fields = fields
