"""Writes about LATs: importing deployments and refreshing their state from the chain."""

from __future__ import annotations

import base64
import ipaddress
import json
import logging
import socket
import urllib.parse
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import requests
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from eth_utils import is_hex_address, to_checksum_address

from lats.chain.gateway import (
    BEACON_CHAIN_STRATEGY,
    ZERO_ADDRESS,
    Block,
    ChainError,
    Gateway,
    gateway_for,
)
from lats.models import Avs, Lat, LatToken, PriceFeed, SyncStatus, Token

logger = logging.getLogger(__name__)

WAD = 10**18


# --- manifests ------------------------------------------------------------------------------


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
        if not isinstance(value, str) or not is_hex_address(value) or not value.startswith("0x"):
            raise self.fail(path, f"must be an address (0x + 40 hex digits), not {value!r}")
        return to_checksum_address(value)

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


def manifest_parse(data: Any, *, source: str) -> Manifest:
    """Check a manifest's shape (chain.md); raises ManifestError naming the field."""
    r = _Reader(source)
    if not isinstance(data, dict):
        raise ManifestError(f"{source}: the manifest must be a JSON object")
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
            if not isinstance(token, str) or not is_hex_address(token):
                raise r.fail("priceFeeds", f"has a key that is not an address: {token!r}")
            price_feeds[to_checksum_address(token)] = r.address(feeds, token, f"priceFeeds.{token}")
    base_asset = r.address(data, "baseAsset", "baseAsset")
    if base_asset != BEACON_CHAIN_STRATEGY and base_asset not in price_feeds:
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
            changed = assign_changed(lat, values)
            if changed:
                lat.save(update_fields=changed)
        for token, feed in m.price_feeds.items():
            PriceFeed.objects.update_or_create(
                chain_id=m.chain_id, token_address=token, defaults={"feed_address": feed}
            )
        lats.append(lat)
    return lats


def chain_confirmations(chain_id: int) -> int:
    """Blocks behind the head that the log readers stay (CHAIN_CONFIRMATIONS[_<chainId>])."""
    return settings.CHAIN_CONFIRMATIONS_BY_CHAIN.get(chain_id, settings.CHAIN_CONFIRMATIONS)


# --- sync status ----------------------------------------------------------------------------


def sync_status_success(*, lat: Lat, job: str, block: int | None) -> None:
    SyncStatus.objects.update_or_create(
        lat=lat,
        job=job,
        defaults={
            "last_success_at": timezone.now(),
            "last_block": block,
            "last_error": "",
            "consecutive_failures": 0,
        },
    )


def sync_status_failure(*, lat: Lat, job: str, error: Exception) -> None:
    status, _ = SyncStatus.objects.get_or_create(lat=lat, job=job)
    status.last_error = f"{type(error).__name__}: {error}"[:2000]
    status.last_error_at = timezone.now()
    status.consecutive_failures += 1
    status.save(update_fields=["last_error", "last_error_at", "consecutive_failures"])


# --- state refresh --------------------------------------------------------------------------


@dataclass(frozen=True)
class RefreshSummary:
    lat: str
    block: int
    changed: int  # rows written


def assign_changed(obj, values: dict[str, Any]) -> list[str]:
    """Assign changed values; return the changed field names."""
    changed = []
    for key, value in values.items():
        current = getattr(obj, key)
        if current != value and not (
            current is not None and value is not None and str(current) == str(value)
        ):
            setattr(obj, key, value)
            changed.append(key)
    return changed


def _unit_eth_price(lat: Lat, gateway: Gateway, block: Block) -> int:
    if lat.base_asset == BEACON_CHAIN_STRATEGY:
        return WAD
    feed = PriceFeed.objects.filter(chain_id=lat.chain_id, token_address=lat.base_asset).first()
    if feed is None:
        return int(lat.unit_eth_price)
    answer, decimals = gateway.price_feed(feed=feed.feed_address, block=block)
    changes = assign_changed(feed, {"answer": answer, "decimals": decimals})
    if changes:
        feed.updated_at = timezone.now()
        feed.save(update_fields=[*changes, "updated_at"])
    return answer * WAD // 10**decimals


def lat_refresh_state(*, lat: Lat, gateway: Gateway | None = None) -> RefreshSummary:
    """Read the LAT, its tokens, nodes and operators at one block, then store what changed."""
    from operators.services import nodes_store

    gateway = gateway or gateway_for(lat.chain_id)
    try:
        block = gateway.head()
        proxies = lat.contract_deployments.get("proxy", {})
        state = gateway.read_lat(
            proxy=lat.proxy_address,
            manager=proxies["liquidTokenManager"],
            coordinator=proxies["stakerNodeCoordinator"],
            block=block,
        )
        strategies = [(t.address, t.strategy) for t in state.tokens]
        nodes = (
            gateway.read_nodes(
                nodes=state.nodes,
                strategies=strategies,
                delegation_manager=lat.delegation_manager,
                block=block,
            )
            if state.nodes
            else []
        )
        operators = sorted({n.operator for n in nodes if n.operator != ZERO_ADDRESS})
        splits = (
            gateway.operator_splits(
                rewards_coordinator=lat.rewards_coordinator,
                pairs=[(op, lat.avs.address) for op in operators],
                block=block,
            )
            if lat.rewards_coordinator and operators
            else {}
        )
        known_nodes = set(lat.staker_nodes.values_list("address", flat=True))
        created = _node_creations(
            lat, gateway, block, [n.address for n in nodes if n.address not in known_nodes]
        )
        with transaction.atomic():
            unit_price = _unit_eth_price(lat, gateway, block)
            changed = _store_lat(lat, state, unit_price)
            changed += nodes_store(
                lat=lat, nodes=nodes, splits=splits, created=created, block=block
            )
            if changed or lat.state_block is None:
                lat.state_block = block.number
                lat.save(update_fields=["state_block"])
    except (ChainError, KeyError) as exc:
        logger.warning("State refresh of %s failed: %s", lat.proxy_address, exc)
        sync_status_failure(lat=lat, job=SyncStatus.Job.STATE, error=exc)
        raise
    sync_status_success(lat=lat, job=SyncStatus.Job.STATE, block=block.number)
    return RefreshSummary(lat=lat.proxy_address, block=block.number, changed=changed)


def _node_creations(lat: Lat, gateway: Gateway, block: Block, new_nodes: list[str]):
    """Block and time of the NodeCreated event of each new node."""
    if not new_nodes:
        return {}
    coordinator = lat.contract_deployments["proxy"]["stakerNodeCoordinator"]
    logs = gateway.event_logs(
        contract="StakerNodeCoordinator",
        name="NodeCreated",
        address=coordinator,
        from_block=lat.deployment_block,
        to_block=block.number,
    )
    found = {to_checksum_address(log.values[1]): log.block_number for log in logs}
    blocks = gateway.blocks({found.get(n, block.number) for n in new_nodes})
    return {n: blocks[found.get(n, block.number)] for n in new_nodes}


def _store_lat(lat: Lat, state, unit_price: int) -> int:
    changed = 0
    fields = assign_changed(
        lat,
        {
            "name": state.name,
            "symbol": state.symbol,
            "total_assets": state.total_assets,
            "total_supply": state.total_supply,
            "paused": state.paused,
            "max_nodes": state.max_nodes,
            "unit_eth_price": unit_price,
        },
    )
    base = next((t for t in state.tokens if t.address == lat.base_asset), None)
    if base is not None:
        fields += assign_changed(lat, {"base_asset_symbol": base.symbol})
    if fields:
        lat.save(update_fields=fields)
        changed += 1
    links = {link.token.address: link for link in lat.lat_tokens.select_related("token")}
    for t in state.tokens:
        token, created = Token.objects.get_or_create(
            chain_id=lat.chain_id,
            address=t.address,
            defaults={"symbol": t.symbol, "name": t.name, "decimals": t.decimals},
        )
        token_fields = (
            []
            if created
            else assign_changed(token, {"symbol": t.symbol, "name": t.name, "decimals": t.decimals})
        )
        if token_fields:
            token.save(update_fields=token_fields)
        changed += created or bool(token_fields)
        values = {
            "strategy_address": t.strategy,
            "volatility_threshold": t.volatility_threshold,
            "price_per_unit": t.price_per_unit,
            "decimals": t.decimals,
            "balance": t.balance,
            "queued_balance": t.queued_balance,
        }
        link = links.pop(t.address, None)
        if link is None:
            LatToken.objects.create(lat=lat, token=token, **values)
            changed += 1
        elif link_fields := assign_changed(link, values):
            link.save(update_fields=link_fields)
            changed += 1
    if links:  # tokens the LAT no longer supports
        LatToken.objects.filter(id__in=[link.id for link in links.values()]).delete()
        changed += len(links)
    return changed


# --- AVS metadata ---------------------------------------------------------------------------

METADATA_FIELDS = {
    "name": "metadata_name",
    "description": "metadata_description",
    "website": "metadata_website",
    "logo": "metadata_logo",
    "twitter": "metadata_social",
    "discord": "metadata_community_chat",
    "telegram": "metadata_messaging",
    "github": "metadata_code",
}


class MetadataUnavailable(Exception):
    pass


def _public_host(uri: str) -> None:
    """Refuse a URL whose host resolves to a private, loopback or link-local address: the URI
    comes from the chain, and the worker must not be made to fetch internal services."""
    if settings.METADATA_ALLOW_PRIVATE_HOSTS:
        return
    host = urllib.parse.urlsplit(uri).hostname or ""
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except (OSError, UnicodeError) as exc:
        raise MetadataUnavailable(f"the metadata host {host!r} does not resolve") from exc
    for address in addresses:
        if not ipaddress.ip_address(address.split("%")[0]).is_global:
            raise MetadataUnavailable(f"the metadata host {host!r} is not a public address")


def metadata_fetch(uri: str) -> dict[str, Any]:
    """The metadata JSON behind a URI: a data: URI, or http(s) with a timeout and a size cap
    (public hosts only, no redirects followed)."""
    cap = settings.METADATA_MAX_BYTES
    if uri.startswith("data:"):
        header, _, payload = uri[5:].partition(",")
        if len(payload) > cap * 2:
            raise MetadataUnavailable(f"the metadata document is over {cap} bytes")
        try:
            raw = (
                base64.b64decode(payload, validate=True)
                if header.endswith(";base64")
                else urllib.parse.unquote_to_bytes(payload)
            )
        except ValueError as exc:
            raise MetadataUnavailable("the metadata data: URI is not valid base64") from exc
    elif uri.startswith(("http://", "https://")):
        _public_host(uri)
        try:
            with requests.get(
                uri, timeout=settings.METADATA_FETCH_TIMEOUT, stream=True, allow_redirects=False
            ) as response:
                if response.is_redirect:
                    raise MetadataUnavailable(f"the document at {uri} redirects elsewhere")
                response.raise_for_status()
                raw = b""
                for chunk in response.iter_content(8192):
                    raw += chunk
                    if len(raw) > cap:
                        raise MetadataUnavailable(f"the document at {uri} is over {cap} bytes")
        except requests.RequestException as exc:
            raise MetadataUnavailable(f"the document at {uri} could not be fetched") from exc
    else:
        raise MetadataUnavailable(f"unsupported metadata URI scheme: {uri[:40]}")
    if len(raw) > cap:
        raise MetadataUnavailable(f"the metadata document is over {cap} bytes")
    try:
        document = json.loads(raw)
    except ValueError as exc:
        raise MetadataUnavailable("the metadata document is not JSON") from exc
    if not isinstance(document, dict):
        raise MetadataUnavailable("the metadata document is not a JSON object")
    return document


_URL_FIELDS = {f for f in METADATA_FIELDS.values() if f != "metadata_name"} - {
    "metadata_description"
}


def _document_value(field: str, value: Any) -> str | None:
    """A document's value as the field stores it: text trimmed to the column; links only
    http(s) (a `javascript:` logo is not served)."""
    if not isinstance(value, str) or not value.strip():
        return None
    value = value.strip()
    if field in _URL_FIELDS:
        scheme = urllib.parse.urlsplit(value).scheme.lower()
        max_length = Avs._meta.get_field(field).max_length
        if scheme not in {"http", "https"} or len(value) > max_length:
            return None
        return value
    return value[: Avs._meta.get_field(field).max_length or None]


@transaction.atomic
def avs_apply_metadata(*, avs: Avs, uri: str, document: dict[str, Any], block: int) -> list[str]:
    """Seed curated fields from the document, leaving what staff edited alone. A member the
    document no longer has is cleared (unless staff edited it)."""
    locked = Avs.objects.select_for_update().get(pk=avs.pk)  # against a concurrent staff edit
    values: dict[str, Any] = {"metadata_uri": uri, "metadata_updated_block": block}
    for key, field in METADATA_FIELDS.items():
        if field not in locked.staff_edited_fields:
            values[field] = _document_value(field, document.get(key))
    changed = assign_changed(locked, values)
    if changed:
        locked.save(update_fields=changed)
    for field in changed:
        setattr(avs, field, getattr(locked, field))
    return changed


def avs_refresh_metadata(*, lat: Lat, gateway: Gateway | None = None) -> bool:
    """Seed the LAT's AVS metadata from its latest AVSMetadataURIUpdated event."""
    if not lat.avs_directory:
        return False
    gateway = gateway or gateway_for(lat.chain_id)
    avs = lat.avs
    try:
        head = gateway.head()
        start = avs.metadata_updated_block or lat.deployment_block
        logs = gateway.event_logs(
            contract="AVSDirectory",
            name="AVSMetadataURIUpdated",
            address=lat.avs_directory,
            topics=["0x" + "0" * 24 + avs.address[2:].lower()],
            from_block=start,
            to_block=head.number,
        )
        if not logs:
            sync_status_success(lat=lat, job=SyncStatus.Job.METADATA, block=head.number)
            return False
        latest = max(logs, key=lambda log: (log.block_number, log.log_index))
        uri = latest.values[1]
        if uri == avs.metadata_uri and avs.metadata_updated_block == latest.block_number:
            sync_status_success(lat=lat, job=SyncStatus.Job.METADATA, block=head.number)
            return False
        document = metadata_fetch(uri)
        changed = avs_apply_metadata(avs=avs, uri=uri, document=document, block=latest.block_number)
    except (ChainError, MetadataUnavailable) as exc:
        logger.warning("Metadata refresh of %s failed: %s", avs.address, exc)
        sync_status_failure(lat=lat, job=SyncStatus.Job.METADATA, error=exc)
        raise
    sync_status_success(lat=lat, job=SyncStatus.Job.METADATA, block=head.number)
    return bool(changed)


def block_time(block: Block) -> datetime:
    return datetime.fromtimestamp(block.timestamp, tz=UTC)
