"""The refresh of a LAT's own state: its totals, tokens and prices, read at one block.

The state job (`sync/refresh.py`) reads this and the LAT's staker nodes
(`operators/services.py`) at the same block, then stores both in one transaction.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from django.utils import timezone

from chain.errors import ChainCallReverted, ChainError
from chain.gateway import LT_ORACLE, Gateway
from chain.results import Block, LatState, block_time
from core.addresses import is_beacon_chain_eth
from core.db import model_update
from lats.checks import check_chain, check_not_behind
from lats.functions import LIQUID_TOKEN_OPTIONAL, ORACLE_OPTIONAL, functions_missing
from lats.models import Lat, LatToken, PriceFeed, Token
from lats.networks import READ_FROM_MANAGER
from lats.values import WAD


@dataclass(frozen=True)
class RefreshSummary:
    lat: str
    block: int
    changed: int  # rows written


class CoreContractUnknown(ChainError):
    """An EigenLayer core contract the refresh needs is named nowhere: no override, no preset
    for the chain, and the LiquidTokenManager does not name it either."""


@dataclass(frozen=True)
class LatReading:
    block: Block
    state: LatState
    # Whether the EigenLayer contracts the manager names differ from those stored.
    core_changed: bool = False
    # The optional functions the deployment lacks (lats/functions.py), sorted.
    missing: list[str] = field(default_factory=list)


def lat_read_state(*, lat: Lat, gateway: Gateway) -> LatReading:
    """The LAT and its tokens at the node's head. A node on another chain fails the read
    (ChainMismatch), one whose head is below the block of the stored state skips it
    (NodeLagging).

    Where neither an override nor the network's preset names the DelegationManager or the
    StrategyManager, the LiquidTokenManager's `delegationManager()` and `strategyManager()`
    are read at the same block and kept on `lat` (stored by `lat_store_state`), so that the
    nodes' read finds them; a LAT with staker nodes whose DelegationManager is named nowhere
    fails with CoreContractUnknown, saying so."""
    check_chain(lat=lat, gateway=gateway)
    block = gateway.head()
    check_not_behind(block, lat.state_block, "the block of the stored state")
    manager = lat.proxy_of("liquidTokenManager")
    state, missing = _read_lat(lat, gateway, manager, block)
    core_changed = False
    named = {name: getattr(lat, Lat.OVERRIDE_FIELDS[name]) for name in READ_FROM_MANAGER}
    presets = lat.eigenlayer_preset
    if not all(named[name] or presets.get(name) for name in READ_FROM_MANAGER):
        found = gateway.manager_core_contracts(manager=manager, block=block)
        core_changed = found != (lat.eigenlayer_from_chain or {})
        lat.eigenlayer_from_chain = found
    if state.nodes and not lat.core_contract("delegationManager"):
        raise CoreContractUnknown(
            f"no DelegationManager is known for chain {lat.chain_id} (no preset, the manifest's "
            "eigenlayer.delegationManager and admin name none, and the LiquidTokenManager's "
            "delegationManager() does not answer): the staker nodes cannot be read"
        )
    return LatReading(block=block, state=state, core_changed=core_changed, missing=sorted(missing))


def _read_lat(lat: Lat, gateway: Gateway, manager: str, block: Block) -> tuple[LatState, set[str]]:
    """The LAT's state, reading only the optional functions its deployment has (detected once
    per implementation: lats/functions.py), and the set of those it lacks.

    The price oracle is the LAT's `tokenRegistryOracle()`, else (a deployment without that
    view) the manifest's `tokenRegistryOracle` proxy; its views are detected on the oracle read
    last time (else the manifest's), and once more when the LAT names another."""
    manifest_oracle = lat.contract_deployments.get("proxy", {}).get("tokenRegistryOracle") or ""
    guess = lat.price_oracle or manifest_oracle
    impls = gateway.implementations([lat.proxy_address, *([guess] if guess else [])], block=block)

    def detect(contract: str, address: str, names: tuple[str, ...]) -> set[str]:
        if not address or int(address, 16) == 0:
            return set(names)  # no oracle at all: what its views feed is unknown
        implementation = impls.get(address) or next(
            iter(gateway.implementations([address], block=block).values())
        )
        return functions_missing(
            gateway=gateway,
            chain_id=lat.chain_id,
            contract=contract,
            address=address,
            implementation=implementation,
            names=names,
            block=block,
        )

    missing = detect("LiquidToken", lat.proxy_address, LIQUID_TOKEN_OPTIONAL)
    if LT_ORACLE in missing:
        guess = manifest_oracle
    oracle_missing = detect("TokenRegistryOracle", guess, ORACLE_OPTIONAL)
    state = gateway.read_lat(
        proxy=lat.proxy_address,
        manager=manager,
        coordinator=lat.proxy_of("stakerNodeCoordinator"),
        block=block,
        oracle=guess,
        missing=missing | oracle_missing,
    )
    if state.oracle.lower() != guess.lower():  # the LAT names an oracle not detected yet
        oracle_missing = detect("TokenRegistryOracle", state.oracle, ORACLE_OPTIONAL)
        stale, last = gateway.read_oracle(oracle=state.oracle, block=block, missing=oracle_missing)
        state = replace(state, prices_stale=stale, last_price_update=last)
    return state, missing | oracle_missing


def lat_state_at(*, lat: Lat, gateway: Gateway, block: Block) -> LatState:
    """The LAT's state at a past block (its totals, tokens, balances and nodes), read as the
    state job reads the head's; nothing is stored."""
    state, _ = _read_lat(lat, gateway, lat.proxy_of("liquidTokenManager"), block)
    return state


def unit_eth_price_at(*, lat: Lat, gateway: Gateway, block: Block) -> int | None:
    """The unit of account's ETH price (1e18-scaled) at a past block; None while unknown (no
    feed set for it, or a feed that did not answer then). Nothing is stored."""
    if is_beacon_chain_eth(lat.base_asset):
        return WAD
    feed = PriceFeed.objects.filter(chain_id=lat.chain_id, token_address=lat.base_asset).first()
    if feed is None:
        return None
    try:
        answer, decimals = gateway.price_feed(feed=feed.feed_address, block=block)
    except ChainCallReverted:
        return None
    return answer * WAD // 10**decimals


def lat_store_state(*, lat: Lat, reading: LatReading, gateway: Gateway) -> int:
    """Store what changed of the LAT and its tokens (and the unit's price, read from its feed
    at the same block); returns how many rows changed. Call inside a transaction."""
    unit_price = _unit_eth_price(lat, gateway, reading.block)
    changed = 0
    if reading.core_changed:
        lat.save(update_fields=["eigenlayer_from_chain"])
        changed += 1
    return changed + _store_lat(lat, reading.state, unit_price, reading.missing)


def lat_state_stored(*, lat: Lat, block: Block, changed: int) -> None:
    """Move the LAT's state block once something changed (or on its first refresh)."""
    if changed or lat.state_block is None:
        lat.state_block = block.number
        lat.save(update_fields=["state_block"])


def _unit_eth_price(lat: Lat, gateway: Gateway, block: Block) -> int | None:
    """The unit of account's ETH price (1e18-scaled) from its feed at the block; None (unknown)
    while staff have set no feed for it."""
    if is_beacon_chain_eth(lat.base_asset):
        return WAD
    feed = PriceFeed.objects.filter(chain_id=lat.chain_id, token_address=lat.base_asset).first()
    if feed is None:
        return None
    answer, decimals = gateway.price_feed(feed=feed.feed_address, block=block)
    feed.updated_at = timezone.now()
    model_update(feed, {"answer": answer, "decimals": decimals}, also=("updated_at",))
    return answer * WAD // 10**decimals


def _store_lat(lat: Lat, state: LatState, unit_price: int | None, missing: list[str]) -> int:
    values = {
        "price_oracle": state.oracle,
        "missing_functions": missing,
        "name": state.name,
        "symbol": state.symbol,
        "total_assets": state.total_assets,
        "total_supply": state.total_supply,
        "paused": state.paused,
        "prices_stale": state.prices_stale,
        "last_price_update": None
        if not state.last_price_update
        else block_time(state.last_price_update),
        "max_nodes": state.max_nodes,
        "unit_eth_price": unit_price,
    }
    base = next((t for t in state.tokens if t.address == lat.base_asset), None)
    if base is not None:
        values["base_asset_symbol"] = base.symbol
    changed = int(bool(model_update(lat, values)))
    links = {link.token.address: link for link in lat.lat_tokens.select_related("token")}
    for t in state.tokens:
        token, created = Token.objects.get_or_create(
            chain_id=lat.chain_id,
            address=t.address,
            defaults={"symbol": t.symbol, "name": t.name, "decimals": t.decimals},
        )
        if created or model_update(
            token, {"symbol": t.symbol, "name": t.name, "decimals": t.decimals}
        ):
            changed += 1
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
        elif model_update(link, values):
            changed += 1
    if links:  # tokens the LAT no longer supports
        LatToken.objects.filter(id__in=[link.id for link in links.values()]).delete()
        changed += len(links)
    return changed
