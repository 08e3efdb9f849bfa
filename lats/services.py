"""Writes about LATs: importing deployments and refreshing their state from the chain."""

from __future__ import annotations

import contextlib
import logging
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone
from eth_utils import is_hex_address, to_checksum_address

from lats.chain.errors import ChainError
from lats.chain.gateway import BEACON_CHAIN_STRATEGY, Gateway, gateway_for, scan_ranges
from lats.chain.results import ZERO_ADDRESS, Block
from lats.indexing import chain_confirmations as chain_confirmations
from lats.indexing import check_chain, check_not_behind
from lats.metadata import MetadataUnavailable as MetadataUnavailable
from lats.metadata import metadata_fetch
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


# Set on an exception once it is recorded, so that the job runner, which records whatever a
# service did not, does not count it twice.
_RECORDED = "_lat_sync_status_recorded"


def sync_status_recorded(error: BaseException) -> bool:
    return bool(getattr(error, _RECORDED, False))


def sync_status_failure(*, lat: Lat, job: str, error: BaseException, count: bool = True) -> None:
    """Record the error on the LAT's status row of `job` (once per exception); with
    count=False only the text is replaced (a clearer reason for a failure already counted).

    A database that cannot record it (down, or the error was its own) is logged, never
    raised: the original error is what the caller must see."""
    if count and sync_status_recorded(error):
        return
    try:
        with transaction.atomic():
            status, _ = SyncStatus.objects.select_for_update().get_or_create(lat=lat, job=job)
            status.last_error = f"{type(error).__name__}: {error}"[:2000]
            status.last_error_at = timezone.now()
            status.consecutive_failures += 1 if count else 0
            status.save(update_fields=["last_error", "last_error_at", "consecutive_failures"])
    except DatabaseError:
        logger.exception("The failure of %s for LAT %s could not be recorded", job, lat.pk)
        return
    with contextlib.suppress(AttributeError):
        setattr(error, _RECORDED, True)


@contextlib.contextmanager
def sync_status_recording(*, lat: Lat, job: str) -> Iterator[None]:
    """Record any exception raised in the block on the LAT's status row of `job`, then
    re-raise it: no failure of a refresh goes unrecorded."""
    try:
        yield
    except Exception as exc:
        logger.warning("%s of %s failed: %s: %s", job, lat.proxy_address, type(exc).__name__, exc)
        sync_status_failure(lat=lat, job=job, error=exc)
        raise


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
    """Read the LAT, its tokens, nodes and operators at one block, then store what changed.

    A node on another chain fails the refresh (ChainMismatch), one whose head is below the
    block of the stored state skips it (NodeLagging); either way nothing is written. Any
    failure is recorded on the LAT's sync status."""
    with sync_status_recording(lat=lat, job=SyncStatus.Job.STATE):
        gateway = gateway or gateway_for(lat.chain_id)
        check_chain(lat=lat, gateway=gateway)
        block = gateway.head()
        check_not_behind(block, lat.state_block, "the block of the stored state")
        state, nodes, splits = _read_state(lat, gateway, block)
        known_nodes = set(lat.staker_nodes.values_list("address", flat=True))
        created = _node_creations(
            lat, gateway, block, [n.address for n in nodes if n.address not in known_nodes]
        )
        changed = _store_state(lat, gateway, block, state, nodes, splits, created)
    sync_status_success(lat=lat, job=SyncStatus.Job.STATE, block=block.number)
    return RefreshSummary(lat=lat.proxy_address, block=block.number, changed=changed)


def _read_state(lat: Lat, gateway: Gateway, block: Block):
    """The LAT, its nodes and its operators' splits at the block, from the chain."""
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
    return state, nodes, splits


@transaction.atomic
def _store_state(lat: Lat, gateway: Gateway, block: Block, state, nodes, splits, created) -> int:
    from operators.services import nodes_store

    unit_price = _unit_eth_price(lat, gateway, block)
    changed = _store_lat(lat, state, unit_price)
    changed += nodes_store(lat=lat, nodes=nodes, splits=splits, created=created, block=block)
    if changed or lat.state_block is None:
        lat.state_block = block.number
        lat.save(update_fields=["state_block"])
    return changed


def _node_creations(lat: Lat, gateway: Gateway, block: Block, new_nodes: list[str]):
    """Block and time of the NodeCreated event of each new node (ranges of at most
    LOG_BLOCK_RANGE blocks, halved while the node refuses them)."""
    if not new_nodes:
        return {}
    coordinator = lat.contract_deployments["proxy"]["stakerNodeCoordinator"]

    def fetch(first: int, last: int):
        return gateway.event_logs(
            contract="StakerNodeCoordinator",
            name="NodeCreated",
            address=coordinator,
            from_block=first,
            to_block=last,
        )

    found: dict[str, int] = {}
    for _, _, logs in scan_ranges(
        fetch, start=lat.deployment_block, end=block.number, max_range=settings.LOG_BLOCK_RANGE
    ):
        found |= {to_checksum_address(log.values[1]): log.block_number for log in logs}
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
    """Seed the LAT's AVS metadata from its latest AVSMetadataURIUpdated event (read in ranges
    of at most LOG_BLOCK_RANGE blocks). A node on another chain fails the refresh, one whose
    head is below the stored event's block skips it; any failure is recorded."""
    if not lat.avs_directory:
        return False
    avs = lat.avs
    with sync_status_recording(lat=lat, job=SyncStatus.Job.METADATA):
        gateway = gateway or gateway_for(lat.chain_id)
        check_chain(lat=lat, gateway=gateway)
        head = gateway.head()
        check_not_behind(head, avs.metadata_updated_block, "the block of the stored metadata")
        latest = _latest_metadata_event(lat, gateway, head)
        changed: list[str] = []
        if latest is not None and (
            latest.values[1] != avs.metadata_uri
            or avs.metadata_updated_block != latest.block_number
        ):
            uri = latest.values[1]
            document = metadata_fetch(uri)
            changed = avs_apply_metadata(
                avs=avs, uri=uri, document=document, block=latest.block_number
            )
    sync_status_success(lat=lat, job=SyncStatus.Job.METADATA, block=head.number)
    return bool(changed)


def _latest_metadata_event(lat: Lat, gateway: Gateway, head: Block):
    avs = lat.avs
    topic = "0x" + "0" * 24 + avs.address[2:].lower()

    def fetch(first: int, last: int):
        return gateway.event_logs(
            contract="AVSDirectory",
            name="AVSMetadataURIUpdated",
            address=lat.avs_directory,
            topics=[topic],
            from_block=first,
            to_block=last,
        )

    latest = None
    start = avs.metadata_updated_block or lat.deployment_block
    for _, _, logs in scan_ranges(
        fetch, start=start, end=head.number, max_range=settings.LOG_BLOCK_RANGE
    ):
        for log in logs:
            if latest is None or (log.block_number, log.log_index) > (
                latest.block_number,
                latest.log_index,
            ):
                latest = log
    return latest


def block_time(block: Block) -> datetime:
    return datetime.fromtimestamp(block.timestamp, tz=UTC)
