"""python manage.py lat_import MANIFEST... : register LAT deployments from manifests."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from chain.gateway import gateway_for
from lats.manifests import (
    ManifestError,
    lat_import_manifests,
    manifest_check_chain,
    manifest_parse,
)


class Command(BaseCommand):
    help = (
        "Register (or update) LAT deployments from manifest files (shared/spec/chain.md format). "
        "Every manifest is checked, against its chain too, before anything is written: one bad "
        "manifest rejects the whole import."
    )

    def add_arguments(self, parser):
        parser.add_argument("manifests", nargs="+", help="manifest JSON files")
        parser.add_argument(
            "--skip-chain-check",
            action="store_true",
            help="do not ask the node (chain id, contract code); for offline imports",
        )

    def handle(self, *args, **options):
        manifests = []
        for name in options["manifests"]:
            path = Path(name)
            try:
                data = json.loads(path.read_text())
            except OSError as exc:
                raise CommandError(f"{name}: cannot be read ({exc.strerror})") from exc
            except ValueError as exc:
                raise CommandError(f"{name}: is not JSON ({exc})") from exc
            try:
                manifest = manifest_parse(data, source=name)
                if not options["skip_chain_check"]:
                    manifest_check_chain(manifest, gateway=gateway_for(manifest.chain_id))
            except ManifestError as exc:
                raise CommandError(str(exc)) from exc
            manifests.append(manifest)
        lats = lat_import_manifests(manifests=manifests)
        for lat in lats:
            self.stdout.write(f"imported {lat.symbol} {lat.proxy_address} (chain {lat.chain_id})")
