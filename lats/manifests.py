"""LAT deployment manifests (chain.md): their shape, the check against the chain, the import."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from chain.errors import ChainError
from chain.gateway import Gateway
from core.addresses import checksum, is_address, is_beacon_chain_eth
from core.db import model_update
from lats.models import Avs, Lat, PriceFeed


class ManifestError(ValueError):
    """A manifest that cannot be imported; the message names the file and field."""


IMPLEMENTATION_CONTRACTS = (
    "liquidTokenManager",
    "stakerNodeCoordinator",
    "stakerNode",
    "tokenRegistryOracle",
)
PROXY_CONTRACTS = ("liquidTokenManager", "stakerNodeCoordinator", "tokenRegistryOracle")
EIGENLAYER_CONTRACTS = (
    "delegationManager",
    "strategyManager",
    "rewardsCoordinator",
    "avsDirectory",
)


@dataclass(frozen=True)
class Manifest:
    source: str
    proxy_address: str
    implementation_address: str
    name: str
    symbol: str
    avs_address: str
    base_asset: str
    chain_id: int
    max_nodes: int
    deployment_block: int
    implementation: dict[str, str]
    proxy: dict[str, str]
    tokens: tuple[tuple[str, str], ...]
    eigenlayer: dict[str, str]
    price_feeds: dict[str, str]


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, field: str, message: str) -> ManifestError:
        return ManifestError(f"{self.source}: {field} {message}")

    def get(self, data: Any, field: str, path: str) -> Any:
        if not isinstance(data, dict):
            raise self.fail(path.rsplit(".", 1)[0] or path, "must be an object")
        if field not in data:
            raise self.fail(path, "is missing")
        return data[field]

    def address(self, data: Any, field: str, path: str) -> str:
        value = self.get(data, field, path)
        if not is_address(value):
            raise self.fail(path, f"must be an address (0x + 40 hex digits), not {value!r}")
        return checksum(value)

    def string(self, data: Any, field: str, path: str) -> str:
        value = self.get(data, field, path)
        if not isinstance(value, str) or not value.strip():
            raise self.fail(path, "must be a non-empty string")
        return value

    def integer(self, data: Any, field: str, path: str) -> int:
        value = self.get(data, field, path)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(path, f"must be a non-negative integer, not {value!r}")
        return value


def _contract_deployments(r: _Reader, data: Any) -> tuple[dict[str, str], dict[str, str]]:
    deployments = r.get(data, "contractDeployments", "contractDeployments")
    implementation = {}
    for name in IMPLEMENTATION_CONTRACTS:
        path = f"contractDeployments.implementation.{name}"
        entry = r.get(
            r.get(deployments, "implementation", "contractDeployments.implementation"), name, path
        )
        implementation[name] = r.address(entry, "address", f"{path}.address")
        r.integer(entry, "block", f"{path}.block")
    proxy = {}
    for name in PROXY_CONTRACTS:
        path = f"contractDeployments.proxy.{name}"
        entry = r.get(r.get(deployments, "proxy", "contractDeployments.proxy"), name, path)
        proxy[name] = r.address(entry, "address", f"{path}.address")
        r.integer(entry, "block", f"{path}.block")
    return implementation, proxy


def manifest_parse(data: Any, *, source: str) -> Manifest:
    """Check a manifest's shape (chain.md); raises ManifestError naming the field."""
    r = _Reader(source)
    if not isinstance(data, dict):
        raise ManifestError(f"{source}: the manifest must be a JSON object")
    implementation, proxy = _contract_deployments(r, data)
    tokens_raw = r.get(data, "tokens", "tokens")
    if not isinstance(tokens_raw, list):
        raise r.fail("tokens", "must be an array")
    tokens = tuple(
        (
            r.address(t, "address", f"tokens[{i}].address"),
            r.address(t, "strategy", f"tokens[{i}].strategy"),
        )
        for i, t in enumerate(tokens_raw)
    )
    eigenlayer = {}
    if data.get("eigenlayer") is not None:
        for name in EIGENLAYER_CONTRACTS:
            eigenlayer[name] = r.address(data["eigenlayer"], name, f"eigenlayer.{name}")
    price_feeds = {}
    feeds = data.get("priceFeeds")
    if feeds is not None:
        if not isinstance(feeds, dict):
            raise r.fail("priceFeeds", "must be an object mapping token address to feed address")
        for token, _feed in feeds.items():
            if not is_address(token):
                raise r.fail("priceFeeds", f"has a key that is not an address: {token!r}")
            price_feeds[checksum(token)] = r.address(feeds, token, f"priceFeeds.{token}")
    base_asset = r.address(data, "baseAsset", "baseAsset")
    if not is_beacon_chain_eth(base_asset) and base_asset not in price_feeds:
        raise r.fail("priceFeeds", f"must name a feed for the unit of account {base_asset}")
    chain_id = r.integer(data, "chainId", "chainId")
    if chain_id == 0:
        raise r.fail("chainId", "must be a positive integer")
    return Manifest(
        source=source,
        proxy_address=r.address(data, "proxyAddress", "proxyAddress"),
        implementation_address=r.address(data, "implementationAddress", "implementationAddress"),
        name=r.string(data, "name", "name"),
        symbol=r.string(data, "symbol", "symbol"),
        avs_address=r.address(data, "avsAddress", "avsAddress"),
        base_asset=base_asset,
        chain_id=chain_id,
        max_nodes=r.integer(data, "maxNodes", "maxNodes"),
        deployment_block=r.integer(data, "deploymentBlock", "deploymentBlock"),
        implementation=implementation,
        proxy=proxy,
        tokens=tokens,
        eigenlayer=eigenlayer,
        price_feeds=price_feeds,
    )


def manifest_check_chain(manifest: Manifest, *, gateway: Gateway) -> None:
    """The node must be on the manifest's chain and every named contract must hold code."""
    try:
        chain_id = gateway.chain_id()
    except ChainError as exc:
        raise ManifestError(
            f"{manifest.source}: the node for chain {manifest.chain_id} could not be asked ({exc})"
        ) from exc
    if chain_id != manifest.chain_id:
        raise ManifestError(
            f"{manifest.source}: chainId is {manifest.chain_id} but the node is on chain {chain_id}"
        )
    named = {
        "proxyAddress": manifest.proxy_address,
        "implementationAddress": manifest.implementation_address,
    }
    named |= {f"contractDeployments.proxy.{k}.address": v for k, v in manifest.proxy.items()}
    named |= {f"eigenlayer.{k}": v for k, v in manifest.eigenlayer.items()}
    named |= {f"priceFeeds.{k}": v for k, v in manifest.price_feeds.items()}
    for field, address in named.items():
        if not gateway.code_at(address):
            raise ManifestError(
                f"{manifest.source}: {field} {address} holds no contract code on chain {chain_id}"
            )


def _deployments(manifest: Manifest) -> dict[str, dict[str, str]]:
    return {"implementation": dict(manifest.implementation), "proxy": dict(manifest.proxy)}


@transaction.atomic
def lat_import_manifests(*, manifests: list[Manifest]) -> list[Lat]:
    """Register (or update) LAT deployments; all or nothing. Running twice changes nothing."""
    lats = []
    for m in manifests:
        avs, _ = Avs.objects.get_or_create(chain_id=m.chain_id, address=m.avs_address)
        values = {
            "chain_id": m.chain_id,
            "implementation_address": m.implementation_address,
            "avs": avs,
            "base_asset": m.base_asset,
            "deployment_block": m.deployment_block,
            "contract_deployments": _deployments(m),
            "delegation_manager": m.eigenlayer.get("delegationManager", ""),
            "strategy_manager": m.eigenlayer.get("strategyManager", ""),
            "rewards_coordinator": m.eigenlayer.get("rewardsCoordinator", ""),
            "avs_directory": m.eigenlayer.get("avsDirectory", ""),
        }
        lat = Lat.objects.filter(proxy_address=m.proxy_address).first()
        if lat is None:
            lat = Lat.objects.create(
                proxy_address=m.proxy_address,
                name=m.name,
                symbol=m.symbol,
                max_nodes=m.max_nodes,
                **values,
            )
        else:
            model_update(lat, values)
        for token, feed in m.price_feeds.items():
            PriceFeed.objects.update_or_create(
                chain_id=m.chain_id, token_address=token, defaults={"feed_address": feed}
            )
        lats.append(lat)
    return lats
