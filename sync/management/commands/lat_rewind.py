"""python manage.py lat_rewind --lat ADDRESS --to-block N [--yes] : index a LAT again from a block.

A reorg deeper than REORG_MAX_DEPTH stops a LAT's indexing (ReorgTooDeep on its sync status in
admin) rather than delete that much history by itself. Once ops have found a block at or below
the fork (any earlier block will do: more is read again), this removes what was stored above it
(deposits, events, the holders' balances moved by them, the AVS's reward submissions) and moves
the checkpoints back to it; the next run of the jobs (or `lat_sync`) indexes from there.

Without --yes it only says what would be removed. `--lat` may be given more than once.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from chain.errors import ChainError
from core.addresses import checksum, is_address
from deposits.models import Deposit, Event
from lats.models import Lat
from metrics.models import RewardSubmission
from sync.refresh import RewindRefused, rewind_lat


class Command(BaseCommand):
    help = "Remove what a LAT's index stored above a block, so that it is indexed again from there."

    def add_arguments(self, parser):
        parser.add_argument(
            "--lat", action="append", required=True, help="proxy address of the LAT (repeatable)"
        )
        parser.add_argument(
            "--to-block",
            type=int,
            required=True,
            help="the last block to keep (at or below the fork)",
        )
        parser.add_argument(
            "--yes", action="store_true", help="do it (else only say what would go)"
        )

    def handle(self, *args, **options):
        block = options["to_block"]
        if block < 0:
            raise CommandError("--to-block must be a block number (0 or more)")
        lats = []
        for address in options["lat"]:
            if not is_address(address):
                raise CommandError(f"--lat {address}: not an address (0x + 40 hex digits)")
            found = list(Lat.objects.filter(proxy_address=checksum(address)).order_by("id"))
            if not found:
                raise CommandError(f"no LAT at {address}")
            lats += found
        for lat in lats:
            if not options["yes"]:
                self._would(lat, block)
                continue
            try:
                done = rewind_lat(lat=lat, keep_through=block)
            except (RewindRefused, ChainError) as exc:  # nothing was changed
                raise CommandError(f"{lat}: {exc}") from exc
            self.stdout.write(
                f"{done.lat}: removed {done.deposits} deposits, {done.events} events and "
                f"{done.submissions} reward submissions above block {done.kept_through}; the "
                "next run indexes from the block after it"
            )
        if not options["yes"]:
            self.stdout.write("nothing changed: run again with --yes to do it")

    def _would(self, lat: Lat, block: int) -> None:
        deposits = Deposit.objects.filter(lat=lat, block_number__gt=block).count()
        events = Event.objects.filter(lat=lat, block_number__gt=block).count()
        submissions = RewardSubmission.objects.filter(
            avs_id=lat.avs_id, block_number__gt=block
        ).count()
        self.stdout.write(
            f"{lat}: would remove {deposits} deposits, {events} events and {submissions} reward "
            f"submissions (of its AVS) above block {block}"
        )
