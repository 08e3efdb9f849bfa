"""The webhook dispatcher (the Procfile's `webhooks`): fans the outbox out and sends every
due delivery until stopped (SIGTERM or SIGINT finishes the sends in flight first)."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand

from webhooks.dispatcher import Dispatcher


class Command(BaseCommand):
    help = "Send the webhooks' deliveries (runs until stopped)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--workers", type=int, default=None, help="Sending threads.")

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()
        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, lambda *_: stop.set())
        self.stdout.write("webhook dispatcher running")
        Dispatcher(workers=options["workers"]).run(stop)
        self.stdout.write("webhook dispatcher stopped")
