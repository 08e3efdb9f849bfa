"""python manage.py lat_sync [--lat ADDRESS] : every refresh step once, in-process.

The steps are the refresh pipeline's (sync/refresh.py). Each LAT's failures are recorded on
its sync status by the services, as in the Celery jobs. A node error (unreachable, another
chain, a reorg too deep) or a lagging node is reported per LAT and the next LAT is synced; the
command then exits with an error. Anything else propagates.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from chain.errors import ChainError
from core.addresses import checksum, is_address
from lats.checks import NodeLagging
from lats.models import Lat
from sync.refresh import refresh_lat


class Command(BaseCommand):
    help = "Run every refresh step (state, deposits, metrics, AVS metadata) once for each LAT."

    def add_arguments(self, parser):
        parser.add_argument("--lat", help="proxy address of one LAT (default: every LAT)")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def handle(self, *args, **options):
        lats = Lat.objects.select_related("avs").order_by("chain_id", "proxy_address")
        if options["lat"]:
            if not is_address(options["lat"]):
                raise CommandError("--lat must be an address (0x + 40 hex digits)")
            lats = lats.filter(proxy_address=checksum(options["lat"]))
            if not lats:
                raise CommandError(f"no LAT at {options['lat']}")
        failures = 0
        for lat in lats:
            try:
                done = self._refresh(lat, quiet=options["no_progress"])
            except NodeLagging as exc:
                failures += 1
                self.stderr.write(f"{lat.symbol} {lat.proxy_address}: sync skipped: {exc}")
                continue
            except ChainError as exc:
                failures += 1
                self.stderr.write(
                    f"{lat.symbol} {lat.proxy_address}: sync failed: {type(exc).__name__}: {exc}"
                )
                continue
            if done.metadata_error:
                self.stderr.write(
                    f"{lat.symbol}: AVS metadata not refreshed: {done.metadata_error}"
                )
            state, deposits = done.state, done.deposits
            self.stdout.write(
                f"{lat.symbol} {lat.proxy_address}: state at block {state.block} "
                f"({state.changed} rows changed), deposits to block {deposits.to_block} "
                f"({deposits.new} new, {deposits.removed} removed by reorg; "
                f"{deposits.events} new events)"
            )
        if failures:
            raise CommandError(f"{failures} LAT(s) failed to sync; see above")

    def _refresh(self, lat, *, quiet: bool):
        bar = None

        def progress(done: int, total: int) -> None:
            nonlocal bar
            if quiet or total < 50_000:
                return
            if bar is None:
                bar = tqdm(total=total, unit="block", desc=f"{lat.symbol} deposits")
            bar.update(done - bar.n)

        try:
            return refresh_lat(lat=lat, progress=progress)
        finally:
            if bar is not None:
                bar.close()
