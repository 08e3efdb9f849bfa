"""python manage.py lat_follow [--chain ID ...] : follow each chain's head (sync/follow.py).

One thread per chain (default: every chain with a LAT at start). Stops on SIGINT or SIGTERM
after the step under way.
"""

from __future__ import annotations

import signal
import threading

from django.core.management.base import BaseCommand, CommandError

from lats.models import Lat
from sync.follow import Follower


class Command(BaseCommand):
    help = "Follow each chain's head: index deposits and refresh state as blocks arrive."

    def add_arguments(self, parser):
        parser.add_argument(
            "--chain", type=int, action="append", default=[], help="chain id (repeatable)"
        )

    def handle(self, *args, **options):
        chains = options["chain"] or sorted(
            set(Lat.objects.values_list("chain_id", flat=True).distinct())
        )
        if not chains:
            raise CommandError("no LAT is registered: run lat_import first")
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        threads = [
            threading.Thread(target=Follower(chain_id).run, args=(stop,), name=f"follow-{chain_id}")
            for chain_id in chains
        ]
        for thread in threads:
            thread.start()
        self.stdout.write(f"following chain(s) {', '.join(map(str, chains))}")
        for thread in threads:
            thread.join()
