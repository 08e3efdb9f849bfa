"""python manage.py lat_import PATH... : register LAT deployments from manifests."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from lats.manifests import (
    ManifestError,
    lat_import,
    manifest_check_chain,
    manifest_gateway,
    manifests_load,
)


class Command(BaseCommand):
    help = (
        "Register (or update) LAT deployments from manifest files, as LAT deployment "
        "repositories publish them or in the service's own form (shared/spec/chain.md), or "
        "from deployments folders laid out <network>/<lat>/<version>/info.json (each LAT at "
        "its newest version). Every manifest is checked, against its chain too, before "
        "anything is written: one bad manifest rejects the whole import."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "manifests",
            nargs="+",
            metavar="PATH",
            help="manifest JSON files or deployments folders",
        )
        parser.add_argument(
            "--skip-chain-check",
            action="store_true",
            help="do not ask the node (chain id, contract code); for offline imports",
        )

    def handle(self, *args, **options):
        try:
            manifests = manifests_load([Path(name) for name in options["manifests"]])
            if not options["skip_chain_check"]:
                for manifest in manifests:
                    manifest_check_chain(manifest, gateway=manifest_gateway(manifest))
        except ManifestError as exc:
            raise CommandError(str(exc)) from exc
        for outcome in lat_import(manifests=manifests):
            lat = outcome.lat
            version = f", {lat.manifest_version}" if lat.manifest_version else ""
            self.stdout.write(
                f"{outcome.action} {lat.symbol} {lat.proxy_address} (chain {lat.chain_id}{version})"
            )
            for note in outcome.notes:
                self.stdout.write(f"  note: {note}")
