"""python manage.py lat_recount_deposits [--lat ADDRESS] : count the stored deposits again.

The indexer keeps the counts behind `meta.total` and the deep pages of `GET /metrics/deposits`
(DepositCount, DepositSpan) in step with the deposits it writes. After deposits were loaded or
repaired by other means (SQL by hand, a restore of the deposits table alone), this counts them
again from the rows, in one transaction.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from core.addresses import checksum, is_address
from deposits.services import deposit_recount
from lats.models import Lat


class Command(BaseCommand):
    help = "Count the stored deposits again into the listing's counts (all LATs, or one)."

    def add_arguments(self, parser):
        parser.add_argument("--lat", help="proxy address of one LAT (default: every LAT)")

    def handle(self, *args, **options):
        lats = None
        if options["lat"]:
            if not is_address(options["lat"]):
                raise CommandError("--lat must be an address (0x + 40 hex digits)")
            lats = list(Lat.objects.filter(proxy_address=checksum(options["lat"])))
            if not lats:
                raise CommandError(f"no LAT at {options['lat']}")
        counted = deposit_recount(lats=lats)
        self.stdout.write(f"counted {counted} deposits")
