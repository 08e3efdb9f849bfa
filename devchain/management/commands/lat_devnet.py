"""python manage.py lat_devnet : a local anvil chain with the demo LATs, for demos and hacking."""

from __future__ import annotations

import json
import os
import threading
import warnings
from decimal import Decimal
from pathlib import Path

import uvicorn
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from chain.errors import ChainError
from chain.gateway import gateway_for_url
from devchain.anvil import AnvilError, start_anvil
from devchain.devnet import (
    DEMO_LATS,
    DevnetError,
    connect,
    contract,
    deploy_devnet,
    deploy_eth_usd_feed,
    devnet_genesis,
    install_multicall3,
    load_artifacts,
    make_deposits,
    manifest_tokens,
    remove_multicall3,
    write_manifests,
)
from sync.follow import Follower


class Command(BaseCommand):
    help = (
        "Start (or reuse) an anvil node on 127.0.0.1, deploy the demo LATs once, write their "
        "manifests, and optionally import and sync them and serve the API while the node runs."
    )

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8545, help="anvil port (default 8545)")
        parser.add_argument(
            "--dir",
            default=str(Path(settings.BASE_DIR) / "var" / "devnet"),
            help="where the chain state and the manifests live (default var/devnet)",
        )
        parser.add_argument(
            "--import",
            dest="do_import",
            action="store_true",
            help="register the demo LATs (lat_import)",
        )
        parser.add_argument("--sync", action="store_true", help="run lat_sync once")
        parser.add_argument(
            "--no-multicall",
            dest="multicall",
            action="store_false",
            help="a chain without Multicall3 (taken away if a kept chain has it): the service "
            "reads through its helper-free route",
        )
        parser.add_argument(
            "--serve",
            metavar="ADDR:PORT",
            help="then serve the API and the live stream (uvicorn, the ASGI application) "
            "until interrupted",
        )
        parser.add_argument(
            "--deposit",
            metavar="SYMBOL",
            help="make a deposit into the demo LAT SYMBOL (e.g. latETH) from a devnet wallet: "
            "mint its first token, approve, deposit; with a running `make demo`, the deposit "
            "shows in the API at once",
        )
        parser.add_argument(
            "--amount", type=Decimal, default=Decimal(1), help="whole tokens (default 1)"
        )
        parser.add_argument(
            "--wallet", type=int, default=12, help="anvil account index (default 12)"
        )
        parser.add_argument(
            "--quiet-days",
            type=int,
            default=0,
            help="a new chain's days without transactions before the scripted days, for a "
            "longer history (default 0: ten days)",
        )

    def handle(self, *args, **options):
        directory = Path(options["dir"])
        directory.mkdir(parents=True, exist_ok=True)
        state_file = directory / "anvil-state.json"
        manifest_dir = directory / "manifests"
        # A new chain starts in the past, on the devnet's first day; a kept one goes on from its
        # last block.
        genesis = None if state_file.exists() else devnet_genesis(options["quiet_days"])
        try:
            node = start_anvil(port=options["port"], state_file=state_file, timestamp=genesis)
        except AnvilError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"anvil at {node.url} (chain {node.chain_id})")
        try:
            # A deposit leaves the chain's Multicall3 as the running demo has it.
            multicall = None if options["deposit"] else options["multicall"]
            manifests = self._manifests(
                node.url, manifest_dir, multicall=multicall, quiet_days=options["quiet_days"]
            )
            os.environ["RPC_URL"] = node.url
            settings.RPC_URL = node.url
            self._eth_usd_feed(node.url, node.chain_id, directory)
            paths = sorted(manifest_dir.glob("*.json"))
            if options["do_import"]:
                call_command("lat_import", *map(str, paths), stdout=self.stdout)
            if options["sync"]:
                call_command("lat_sync", stdout=self.stdout, stderr=self.stderr)
            if options["deposit"]:
                self._deposit(node.url, manifests, options)
                return
            self.stdout.write(f"{len(manifests)} demo LATs; manifests in {manifest_dir}")
            if options["serve"]:
                self._follow(node.chain_id)
                self._serve(options["serve"])
        finally:
            node.stop()  # a node this command started; its state is saved to the state file

    def _eth_usd_feed(self, url: str, chain_id: int, directory: Path) -> None:
        """The demo chain's ETH/USD feed (`/yields`' tvlUsd), deployed with the chain and
        remembered beside its manifests; an ETH_USD_FEED_<chainId> of the environment wins."""
        if chain_id in settings.ETH_USD_FEEDS:
            return
        kept = directory / "eth-usd-feed.json"
        try:
            address = json.loads(kept.read_text())["address"]
            if not gateway_for_url(url, timeout=settings.RPC_TIMEOUT).code_at(address):
                raise ValueError("no feed there any more")
        except (OSError, ValueError, KeyError):
            address = deploy_eth_usd_feed(url)
            kept.write_text(json.dumps({"address": address}) + "\n")
        settings.ETH_USD_FEEDS = {**settings.ETH_USD_FEEDS, chain_id: address}
        os.environ[f"ETH_USD_FEED_{chain_id}"] = address

    def _deposit(self, url: str, manifests: list[dict], options: dict) -> None:
        manifest = next((m for m in manifests if m["symbol"] == options["deposit"]), None)
        if manifest is None:
            symbols = ", ".join(m["symbol"] for m in manifests)
            raise CommandError(f"no demo LAT {options['deposit']} (there are {symbols})")
        token = manifest_tokens(manifest)[0]["address"]
        decimals = contract(connect(url), "TestERC20", token).functions.decimals().call()
        amount = int(options["amount"] * 10**decimals)
        if amount <= 0:
            raise CommandError("--amount must be positive")
        done = make_deposits(url, manifest, options["wallet"], [token], [amount])
        self.stdout.write(
            f"deposited {options['amount']} of {token} into {manifest['symbol']} from wallet "
            f"{options['wallet']}: tx {done['txHash']} in block {done['blockNumber']}, "
            f"{done['shares'][0]} shares"
        )

    def _serve(self, address: str) -> None:
        """Every path on one port, /stream/events included (in production the web process
        serves the API and the stream process the stream)."""
        host, _, port = address.rpartition(":")
        self.stdout.write(f"serving http://{host or '127.0.0.1'}:{port}/ (Ctrl-C to stop)")
        # Static files (admin, docs) come through WhiteNoise's synchronous file iterator, which
        # Django serves under ASGI with a warning: harmless here.
        warnings.filterwarnings("ignore", message="StreamingHttpResponse must consume synchronous")
        uvicorn.run("latsite.asgi:application", host=host or "127.0.0.1", port=int(port))

    def _follow(self, chain_id: int) -> None:
        """Follow the chain while serving, so that a deposit shows in the API at once."""
        stop = threading.Event()  # never set: the daemon thread ends with the process
        follower = Follower(chain_id)
        threading.Thread(target=follower.run, args=(stop,), daemon=True, name="follow").start()
        self.stdout.write(f"following chain {chain_id} every {follower.poll_interval:g} s")

    def _manifests(
        self, url: str, manifest_dir: Path, *, multicall: bool | None, quiet_days: int
    ) -> list[dict]:
        """The deployed set's manifests; deploys first when the chain does not have it. A kept
        chain gets Multicall3 installed or taken away, as `multicall` asks."""
        existing = [json.loads(p.read_text()) for p in sorted(manifest_dir.glob("*.json"))]
        gateway = gateway_for_url(url, timeout=settings.RPC_TIMEOUT)
        try:
            if existing and all(gateway.code_at(m["proxyAddress"]) for m in existing):
                self._check_contracts(url, existing, manifest_dir)
                self._set_multicall(url, multicall)
                return existing
        except ChainError as exc:
            raise CommandError(f"the node at {url} does not answer: {exc}") from exc
        self.stdout.write("deploying the demo LATs…")
        # As LAT deployment repositories publish them (lat_import takes that form).
        try:
            manifests = deploy_devnet(
                url, multicall=multicall is not False, published=True, quiet_days=quiet_days
            )
        except DevnetError as exc:
            raise CommandError(
                f"{exc} (a node already running on the port, or a chain kept in "
                f"{manifest_dir.parent} without the demo LATs: stop it, or remove the directory)"
            ) from exc
        for stale in manifest_dir.glob("*.json"):
            stale.unlink()
        write_manifests(manifests, manifest_dir)
        self._set_multicall(url, multicall)
        return manifests

    @staticmethod
    def _check_contracts(url: str, manifests: list[dict], manifest_dir: Path) -> None:
        """A kept chain must run the LiquidToken of devchain/contracts as built now, and its
        AVSs must be what the devnet makes them now: a chain from an older release (before the
        devnet followed Mainnet v1, or before latETH's AVS was a ServiceManager with days of
        history) would serve other behaviour."""
        artifacts = load_artifacts()
        built = artifacts["LiquidToken"]["deployedBytecode"].removeprefix("0x")
        manager = artifacts["ServiceManager"]["deployedBytecode"].removeprefix("0x")
        with_manager = {spec.symbol for spec in DEMO_LATS if spec.service_manager}
        w3 = connect(url)
        expected = [(m["implementationAddress"], built) for m in manifests] + [
            (m["avsAddress"], manager) for m in manifests if m["symbol"] in with_manager
        ]
        if any(bytes(w3.eth.get_code(address)).hex() != code for address, code in expected):
            raise CommandError(
                f"the chain kept in {manifest_dir.parent} was deployed with other LAT contracts "
                "than devchain/contracts has now, or by an older devnet (latETH's AVS not a "
                f"ServiceManager): remove {manifest_dir.parent} (or `rm -rf var`) to deploy "
                "afresh"
            )

    def _set_multicall(self, url: str, multicall: bool | None) -> None:
        if multicall is None:
            return
        w3 = connect(url)
        try:
            if multicall:
                install_multicall3(w3)
            else:
                remove_multicall3(w3)
        except DevnetError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write("Multicall3 installed" if multicall else "no Multicall3 on this chain")
