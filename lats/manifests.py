"""LAT deployment manifests (chain.md): their shape, the check against the chain, the import.

Two shapes are read: the one upstream's deploy scripts publish (`tokens` an object keyed "0",
"1", ...; `roles`, `proxyAdminAddress`, millisecond `timestamp`s; `baseAsset` sometimes
missing, meaning ETH) and the service's own (`tokens` an array), with the optional `eigenlayer`
and `priceFeeds` members. Members the service does not know are kept in the stored manifest,
never refused. A deployments repository (`<network>/<lat>/<version>/info.json`) imports each
LAT once, at its newest version (`manifest_files`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.models import Field, Model

from chain.errors import ChainError
from chain.gateway import Gateway, gateway_for
from core.addresses import BEACON_CHAIN_ETH, checksum, is_address, is_beacon_chain_eth
from core.db import model_update
from core.jsonlimits import MAX_JSON_NESTING, nested_deeper_than
from lats.models import Avs, Lat, PriceFeed
from lats.networks import EIGENLAYER_CONTRACTS, eigenlayer_preset


class ManifestError(ValueError):
    """A manifest that cannot be imported; the message names the file and field."""


IMPLEMENTATION_CONTRACTS = (
    "liquidTokenManager",
    "stakerNodeCoordinator",
    "stakerNode",
    "tokenRegistryOracle",
)
PROXY_CONTRACTS = ("liquidTokenManager", "stakerNodeCoordinator", "tokenRegistryOracle")
INFO_FILE = "info.json"  # a version's manifest in a deployments repository
# A manifest is a few kilobytes (the published ones 3 to 6 KB); a file past this is not one,
# and is refused before it is read whole.
MAX_MANIFEST_BYTES = 1 << 20
# Characters no PostgreSQL text or jsonb column stores (NUL; UTF-16 surrogates, which JSON's
# \u escapes can spell alone and UTF-8 cannot encode).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _column(model: type[Model], name: str) -> Field:
    field = model._meta.get_field(name)
    assert isinstance(field, Field)
    return field


def _max_length(model: type[Model], name: str) -> int:
    length = _column(model, name).max_length
    assert length is not None
    return length


def _max_integer(model: type[Model], name: str) -> int:
    """The largest value the column holds, on every database Django supports."""
    internal_type = _column(model, name).get_internal_type()
    return BaseDatabaseOperations.integer_field_ranges[internal_type][1]


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
    # The manifest as read, every member kept; the version folder it came from ("" if none);
    # whether `baseAsset` was missing (the unit of account is then ETH unless staff set one).
    raw: dict[str, Any] = field(default_factory=dict)
    version: str = ""
    base_asset_missing: bool = False


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

    def string(self, data: Any, field: str, path: str, *, max_length: int) -> str:
        value = self.get(data, field, path)
        if not isinstance(value, str) or not value.strip():
            raise self.fail(path, "must be a non-empty string")
        if len(value) > max_length:
            raise self.fail(path, f"must be at most {max_length} characters, not {len(value)}")
        return value

    def integer(self, data: Any, field: str, path: str, *, maximum: int) -> int:
        value = self.get(data, field, path)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(path, f"must be a non-negative integer, not {_shown(value)}")
        if value > maximum:
            raise self.fail(path, f"must be at most {maximum}, not {_shown(value)}")
        return value

    def storable(self, data: Any, path: str = "") -> None:
        """Every string of the manifest, member names too, storable in PostgreSQL (it keeps
        the manifest whole); the nesting guard has bounded the depth."""
        if isinstance(data, str):
            if found := _UNSTORABLE.search(data):
                raise self.fail(path, f"must not hold the character {_code_point(found[0])}")
        elif isinstance(data, list):
            for index, item in enumerate(data):
                self.storable(item, f"{path}[{index}]")
        elif isinstance(data, dict):
            for key, item in data.items():
                if found := _UNSTORABLE.search(key):
                    where = f" of {path}" if path else ""
                    raise ManifestError(
                        f"{self.source}: the member name {_shown(key)}{where} must not hold "
                        f"the character {_code_point(found[0])}"
                    )
                self.storable(item, f"{path}.{key}" if path else key)


def _shown(value: Any) -> str:
    """A value as a message shows it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _code_point(char: str) -> str:
    return f"U+{ord(char):04X}"


_BLOCK_MAX = _max_integer(Lat, "deployment_block")


def _contract_deployments(r: _Reader, data: Any) -> tuple[dict[str, str], dict[str, str]]:
    deployments = r.get(data, "contractDeployments", "contractDeployments")
    implementation = {}
    for name in IMPLEMENTATION_CONTRACTS:
        path = f"contractDeployments.implementation.{name}"
        entry = r.get(
            r.get(deployments, "implementation", "contractDeployments.implementation"), name, path
        )
        implementation[name] = r.address(entry, "address", f"{path}.address")
        r.integer(entry, "block", f"{path}.block", maximum=_BLOCK_MAX)
    proxy = {}
    for name in PROXY_CONTRACTS:
        path = f"contractDeployments.proxy.{name}"
        entry = r.get(r.get(deployments, "proxy", "contractDeployments.proxy"), name, path)
        proxy[name] = r.address(entry, "address", f"{path}.address")
        r.integer(entry, "block", f"{path}.block", maximum=_BLOCK_MAX)
    return implementation, proxy


def manifest_parse(data: Any, *, source: str, version: str = "") -> Manifest:
    """Check a manifest's shape (chain.md); raises ManifestError naming the field."""
    r = _Reader(source)
    if not isinstance(data, dict):
        raise ManifestError(f"{source}: the manifest must be a JSON object")
    r.storable(data)
    if len(version) > (longest := _max_length(Lat, "manifest_version")):
        raise ManifestError(
            f"{source}: its version folder's name must be at most {longest} characters, not "
            f"{len(version)}"
        )
    implementation, proxy = _contract_deployments(r, data)
    tokens = _tokens(r, r.get(data, "tokens", "tokens"))
    eigenlayer = {}
    if data.get("eigenlayer") is not None:
        if not isinstance(data["eigenlayer"], dict):
            raise r.fail("eigenlayer", "must be an object mapping contract name to address")
        for name in EIGENLAYER_CONTRACTS:  # any of them; other members are kept, not read
            if data["eigenlayer"].get(name) is not None:
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
    base_asset_missing = data.get("baseAsset") is None
    base_asset = (
        BEACON_CHAIN_ETH if base_asset_missing else r.address(data, "baseAsset", "baseAsset")
    )
    chain_id = r.integer(data, "chainId", "chainId", maximum=_max_integer(Lat, "chain_id"))
    if chain_id == 0:
        raise r.fail("chainId", "must be a positive integer")
    return Manifest(
        source=source,
        proxy_address=r.address(data, "proxyAddress", "proxyAddress"),
        implementation_address=r.address(data, "implementationAddress", "implementationAddress"),
        name=r.string(data, "name", "name", max_length=_max_length(Lat, "name")),
        symbol=r.string(data, "symbol", "symbol", max_length=_max_length(Lat, "symbol")),
        avs_address=r.address(data, "avsAddress", "avsAddress"),
        base_asset=base_asset,
        chain_id=chain_id,
        max_nodes=r.integer(data, "maxNodes", "maxNodes", maximum=_max_integer(Lat, "max_nodes")),
        deployment_block=r.integer(data, "deploymentBlock", "deploymentBlock", maximum=_BLOCK_MAX),
        implementation=implementation,
        proxy=proxy,
        tokens=tokens,
        eigenlayer=eigenlayer,
        price_feeds=price_feeds,
        raw=data,
        version=version,
        base_asset_missing=base_asset_missing,
    )


def _tokens(r: _Reader, tokens: Any) -> tuple[tuple[str, str], ...]:
    """`tokens` as an array (the service's own form) or as an object keyed "0", "1", ...
    (the published form, read in the order of its keys' numbers)."""
    if isinstance(tokens, list):
        entries = [(f"tokens[{i}]", t) for i, t in enumerate(tokens)]
    elif isinstance(tokens, dict):
        for key in tokens:
            if not (isinstance(key, str) and key.isdecimal()):
                raise r.fail("tokens", f'has a key that is not an index ("0", "1", ...): {key!r}')
        entries = [(f"tokens.{key}", tokens[key]) for key in sorted(tokens, key=int)]
    else:
        raise r.fail("tokens", 'must be an array or an object keyed "0", "1", ...')
    return tuple(
        (r.address(t, "address", f"{path}.address"), r.address(t, "strategy", f"{path}.strategy"))
        for path, t in entries
    )


def manifest_read(path: Path, *, version: str = "") -> Manifest:
    """Read and check one manifest file (ManifestError naming the file and field): at most
    MAX_MANIFEST_BYTES read, nested no deeper than MAX_JSON_NESTING before it is parsed (json's
    C scanner recurses per level, past the C stack for ~100,000)."""
    source = str(path)
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        raise ManifestError(f"{source}: cannot be read ({exc.strerror})") from exc
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ManifestError(
            f"{source}: is larger than {MAX_MANIFEST_BYTES} bytes (a manifest is a few kilobytes)"
        )
    if nested_deeper_than(raw, MAX_JSON_NESTING):
        raise ManifestError(
            f"{source}: nests arrays or objects deeper than {MAX_JSON_NESTING} levels"
        )
    try:
        data = json.loads(raw)
    except ValueError as exc:  # UnicodeDecodeError too
        raise ManifestError(f"{source}: is not JSON ({exc})") from exc
    return manifest_parse(data, source=source, version=version)


_VERSION = re.compile(r"[vV]?(\d+(?:\.\d+)*)(.*)")


def version_key(version: str) -> tuple:
    """Order of version folder names, semver-ish: v1 < v2 < v10, 1.0.2 < 1.0.10, a release
    after its pre-releases (v2-rc1 < v2); names without a number (and "", no version) come
    before all others."""
    match = _VERSION.fullmatch(version)
    if match is None:
        return (0, (), 0, version)
    numbers = tuple(int(n) for n in match.group(1).split("."))
    while len(numbers) > 1 and numbers[-1] == 0:  # v1 == v1.0
        numbers = numbers[:-1]
    suffix = match.group(2)
    return (1, numbers, 0 if suffix else 1, suffix)


def manifest_files(paths: list[Path]) -> list[tuple[Path, str]]:
    """The manifest files to import, each with its version ("" for a file named directly).

    A directory is a deployments repository (or a part of one) laid out
    `<network>/<lat>/<version>/info.json`: each LAT folder gives its newest version's file. A
    folder is a version when its name is one (`v1`, `1.0.2`, `v2-rc1`); an `info.json` in a
    folder that is not (`mainnet/xeigenda-eth/info.json` in EigenExplorer/lat-deployments) is
    that LAT's manifest without a version, older than any version beside it."""
    found: list[tuple[Path, str]] = []
    for path in paths:
        if not path.is_dir():
            found.append((path, ""))
            continue
        newest: dict[Path, tuple[Path, str]] = {}  # LAT folder -> its newest file and version
        for info in sorted(path.rglob(INFO_FILE)):
            folder = info.parent
            versioned = _VERSION.fullmatch(folder.name) is not None
            lat_dir, version = (folder.parent, folder.name) if versioned else (folder, "")
            best = newest.get(lat_dir)
            if best is None or version_key(version) > version_key(best[1]):
                newest[lat_dir] = (info, version)
        if not newest:
            raise ManifestError(
                f"{path}: holds no <network>/<lat>/<version>/{INFO_FILE} (a deployments folder)"
            )
        found += [newest[lat_dir] for lat_dir in sorted(newest)]
    return found


def manifests_load(paths: list[Path]) -> list[Manifest]:
    """Every manifest of `paths` (files, or deployments folders), checked; a LAT named twice
    is refused, naming both files."""
    manifests = [manifest_read(path, version=version) for path, version in manifest_files(paths)]
    seen: dict[str, Manifest] = {}
    for m in manifests:
        other = seen.setdefault(m.proxy_address, m)
        if other is not m:
            raise ManifestError(
                f"{m.source}: proxyAddress {m.proxy_address} is also the LAT of {other.source}"
            )
    return manifests


def manifest_check_chain(manifest: Manifest, *, gateway: Gateway) -> None:
    """The node must be on the manifest's chain and every named contract must hold code."""
    try:
        chain_id = gateway.chain_id()
        if chain_id != manifest.chain_id:
            raise ManifestError(
                f"{manifest.source}: chainId is {manifest.chain_id} but the node is on chain "
                f"{chain_id}"
            )
        named = {
            "proxyAddress": manifest.proxy_address,
            "implementationAddress": manifest.implementation_address,
        }
        named |= {f"contractDeployments.proxy.{k}.address": v for k, v in manifest.proxy.items()}
        named |= {f"eigenlayer.{k}": v for k, v in manifest.eigenlayer.items()}
        named |= {f"priceFeeds.{k}": v for k, v in manifest.price_feeds.items()}
        for member, address in named.items():
            if not gateway.code_at(address):
                raise ManifestError(
                    f"{manifest.source}: {member} {address} holds no contract code on chain "
                    f"{chain_id}"
                )
    except ChainError as exc:
        raise ManifestError(
            f"{manifest.source}: the node for chain {manifest.chain_id} could not be asked ({exc})"
        ) from exc


def manifest_gateway(manifest: Manifest) -> Gateway:
    """The gateway of the manifest's chain; no node configured for it is a ManifestError
    naming the setting (RPC_URL_<chainId>) and the way to import without one."""
    try:
        return gateway_for(manifest.chain_id)
    except ChainError as exc:
        raise ManifestError(
            f"{manifest.source}: chainId {manifest.chain_id}: no node is configured for chain "
            f"{manifest.chain_id}: set RPC_URL_{manifest.chain_id} (or RPC_URL) to its JSON-RPC "
            "URL, or import with --skip-chain-check to skip the check against the chain"
        ) from exc


@dataclass(frozen=True)
class ImportOutcome:
    """What an import did with one manifest: `created`, `updated`, `unchanged`, or `kept`
    (the stored version is newer); `notes` say what the service will not know yet."""

    lat: Lat
    action: str
    notes: tuple[str, ...]


def manifest_notes(manifest: Manifest, *, lat: Lat | None = None) -> list[str]:
    """What the import should tell its user: a defaulted unit of account, a unit with no price
    feed, EigenLayer contracts that no preset, manifest or override names."""
    notes = []
    base_asset = lat.base_asset if lat is not None else manifest.base_asset
    if manifest.base_asset_missing:
        if lat is not None and not is_beacon_chain_eth(lat.base_asset):
            notes.append(
                f"baseAsset missing: keeping the unit of account {lat.base_asset} set in admin"
            )
        else:
            notes.append(
                "baseAsset missing: the unit of account is ETH (staff may set another in admin)"
            )
    has_feed = base_asset in manifest.price_feeds or (
        PriceFeed.objects.filter(chain_id=manifest.chain_id, token_address=base_asset).exists()
    )
    if not is_beacon_chain_eth(base_asset) and not has_feed:
        notes.append(
            f"no price feed for the unit of account {base_asset}: values in ETH stay null "
            "until staff set one in admin (Price feeds)"
        )
    preset = eigenlayer_preset(manifest.chain_id)
    unknown = [
        name
        for name in EIGENLAYER_CONTRACTS
        if name not in manifest.eigenlayer
        and name not in preset
        and not (lat is not None and getattr(lat, Lat.OVERRIDE_FIELDS[name]))
    ]
    if unknown:
        notes.append(
            f"chain {manifest.chain_id} has no EigenLayer preset and nothing names "
            f"{', '.join(unknown)} (manifest `eigenlayer` or admin)"
            + (
                "; the DelegationManager and StrategyManager are read from the LiquidTokenManager"
                if "delegationManager" in unknown
                else ""
            )
        )
    return notes


def _deployments(manifest: Manifest) -> dict[str, dict[str, str]]:
    return {"implementation": dict(manifest.implementation), "proxy": dict(manifest.proxy)}


@transaction.atomic
def lat_import(*, manifests: list[Manifest]) -> list[ImportOutcome]:
    """Register (or update) LAT deployments; all or nothing. Running twice changes nothing.

    A LAT already registered (same proxy address) is updated in place, so its deposits,
    events and snapshots stay: a newer version's implementation and contracts replace the old,
    its deployment block never moves later. A manifest of an older version than the one
    stored (both from deployments folders) leaves the LAT as it is. What a manifest does not
    say is left as it was: a `baseAsset` or an `eigenlayer` contract staff set in admin stays."""
    outcomes = []
    for m in manifests:
        lat = Lat.objects.select_for_update().filter(proxy_address=m.proxy_address).first()
        if (
            lat is not None
            and m.version
            and lat.manifest_version
            and version_key(m.version) < version_key(lat.manifest_version)
        ):
            newer = f"the stored {lat.manifest_version} is newer"
            outcomes.append(ImportOutcome(lat, "kept", (newer,)))
            continue
        notes = tuple(manifest_notes(m, lat=lat))
        avs, _ = Avs.objects.get_or_create(chain_id=m.chain_id, address=m.avs_address)
        values: dict[str, Any] = {
            "chain_id": m.chain_id,
            "implementation_address": m.implementation_address,
            "avs": avs,
            "contract_deployments": _deployments(m),
            "manifest": m.raw,
            "manifest_version": m.version,
        }
        if not m.base_asset_missing or lat is None:
            values["base_asset"] = m.base_asset
        values |= {Lat.OVERRIDE_FIELDS[name]: address for name, address in m.eigenlayer.items()}
        if lat is None:
            lat = Lat.objects.create(
                proxy_address=m.proxy_address,
                name=m.name,
                symbol=m.symbol,
                max_nodes=m.max_nodes,
                deployment_block=m.deployment_block,
                **values,
            )
            action = "created"
        else:
            values["deployment_block"] = min(lat.deployment_block, m.deployment_block)
            action = "updated" if model_update(lat, values) else "unchanged"
        for token, feed in m.price_feeds.items():
            PriceFeed.objects.update_or_create(
                chain_id=m.chain_id, token_address=token, defaults={"feed_address": feed}
            )
        outcomes.append(ImportOutcome(lat, action, notes))
    return outcomes


def lat_import_manifests(*, manifests: list[Manifest]) -> list[Lat]:
    """`lat_import`, the LATs only."""
    return [outcome.lat for outcome in lat_import(manifests=manifests)]
