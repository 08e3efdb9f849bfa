"""Staker nodes, what they hold, and their operators: read from the chain and stored."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction

from chain.gateway import Gateway, scan_ranges
from chain.results import Block, LatState, NodeState
from core.addresses import ZERO_ADDRESS, checksum
from lats.models import Avs, Lat, LatToken, Token
from operators.models import NodeAsset, Operator, OperatorAvsSplit, StakerNode


@dataclass(frozen=True)
class NodesReading:
    """The LAT's nodes, its operators' splits for the LAT's AVS, and the creation block of
    each node the database does not know yet, all at one block."""

    nodes: Sequence[NodeState]
    splits: dict[tuple[str, str], int]
    created: dict[str, Block]


def nodes_read(*, lat: Lat, state: LatState, gateway: Gateway) -> NodesReading:
    """Read the nodes the coordinator lists in `state`, at the state's block."""
    block = state.block
    strategies = [(t.address, t.strategy) for t in state.tokens]
    nodes = (
        gateway.read_nodes(
            nodes=state.nodes,
            strategies=strategies,
            delegation_manager=lat.core_contract("delegationManager"),
            block=block,
        )
        if state.nodes
        else []
    )
    operators = sorted({n.operator for n in nodes if n.operator != ZERO_ADDRESS})
    coordinator = lat.core_contract("rewardsCoordinator")
    splits = (
        gateway.operator_splits(
            rewards_coordinator=coordinator,
            pairs=[(op, lat.avs.address) for op in operators],
            block=block,
        )
        if coordinator and operators
        else {}
    )
    known = set(StakerNode.objects.filter(lat=lat).values_list("address", flat=True))
    created = _node_creations(
        lat, gateway, block, [n.address for n in nodes if n.address not in known]
    )
    return NodesReading(nodes=nodes, splits=splits, created=created)


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
        found |= {checksum(log.values[1]): log.block_number for log in logs}
    blocks = gateway.blocks({found.get(n, block.number) for n in new_nodes})
    return {n: blocks[found.get(n, block.number)] for n in new_nodes}


def operator_ensure(*, chain_id: int, address: str) -> tuple[Operator, bool]:
    return Operator.objects.get_or_create(chain_id=chain_id, address=address)


def nodes_store(*, lat: Lat, reading: NodesReading, block: Block) -> int:
    """Upsert the LAT's nodes, their assets and operators; returns how many rows changed.
    Call inside a transaction.

    A node's `updated_at_block` moves only when its delegation or holdings change. What the
    LAT's nodes stake of each token is summed once, after all its writes.
    """
    with staked_summed_once():
        return _nodes_store(lat=lat, reading=reading, block=block)


def _nodes_store(*, lat: Lat, reading: NodesReading, block: Block) -> int:
    changed = 0
    operators: dict[str, Operator] = {}
    for address in sorted({n.operator for n in reading.nodes if n.operator != ZERO_ADDRESS}):
        operators[address], was_created = operator_ensure(chain_id=lat.chain_id, address=address)
        changed += was_created
    tokens = {t.address: t for t in Token.objects.filter(chain_id=lat.chain_id)}
    existing = {
        n.address: n for n in StakerNode.objects.filter(lat=lat).prefetch_related("assets__token")
    }
    for state in reading.nodes:
        operator = operators.get(state.operator)
        node = existing.pop(state.address, None)
        if node is None:
            origin = reading.created.get(state.address, block)
            node = StakerNode.objects.create(
                lat=lat,
                address=state.address,
                node_id=state.node_id,
                operator=operator,
                created_at_block=origin.number,
                created_at=origin.time,
                updated_at_block=block.number,
                updated_at=block.time,
            )
            changed += 1
            node_changed = _store_assets(node, state, {}, tokens)
        else:
            have = {a.token.address: a for a in node.assets.all()}
            node_changed = _store_assets(node, state, have, tokens) or (
                node.operator_id != (operator.id if operator else None)
                or node.node_id != state.node_id
            )
        if node_changed:
            node.operator = operator
            node.node_id = state.node_id
            node.updated_at_block = block.number
            node.updated_at = block.time
            node.save(update_fields=["operator", "node_id", "updated_at_block", "updated_at"])
            changed += 1
    if existing:  # nodes the coordinator no longer lists
        StakerNode.objects.filter(id__in=[n.id for n in existing.values()]).delete()
        changed += len(existing)
    changed += _store_splits(lat=lat, operators=operators, splits=reading.splits)
    return changed


def _store_assets(
    node: StakerNode, state: NodeState, have: dict[str, NodeAsset], tokens: dict[str, Token]
) -> bool:
    """Bring the node's assets in line with `state`; True when any row changed."""
    changed = False
    for a in {a.token: a for a in state.assets}.values():
        asset = have.pop(a.token, None)
        if asset is None:
            NodeAsset.objects.create(
                node=node,
                token=tokens[a.token],
                strategy_address=a.strategy,
                core_shares=a.core_shares,
                staked_amount=a.staked_amount,
            )
            changed = True
        elif (asset.strategy_address, int(asset.core_shares), int(asset.staked_amount)) != (
            a.strategy,
            a.core_shares,
            a.staked_amount,
        ):
            asset.strategy_address = a.strategy
            asset.core_shares = a.core_shares
            asset.staked_amount = a.staked_amount
            asset.save(update_fields=["strategy_address", "core_shares", "staked_amount"])
            changed = True
    if have:
        NodeAsset.objects.filter(id__in=[a.id for a in have.values()]).delete()
        changed = True
    return changed


def store_lat_staked(*, lat_id: int) -> None:
    """Store on each of the LAT's token links what its nodes stake of the token
    (LatToken.staked_amount: the sum of their assets' staked_amount, summed here in integers,
    as uint256 values overflow SQLite's SUM). The links are locked first, so that two writers
    of one LAT's nodes sum one after the other, the second seeing what the first committed."""
    with transaction.atomic():
        links = list(LatToken.objects.select_for_update().filter(lat_id=lat_id).order_by("pk"))
        if not links:
            return
        totals: dict[int, int] = {}  # ints: a Decimal sum rounds to 28 digits
        rows = NodeAsset.objects.filter(node__lat_id=lat_id)
        for token_id, amount in rows.values_list("token_id", "staked_amount"):
            totals[token_id] = totals.get(token_id, 0) + int(amount)
        for link in links:
            total = totals.get(link.token_id, 0)
            if int(link.staked_amount) != total:
                LatToken.objects.filter(pk=link.pk).update(staked_amount=total)


# The LATs whose sums wait for the end of a staked_summed_once block (None: none is open).
_unsummed: ContextVar[set[int] | None] = ContextVar("unsummed_lats", default=None)


@contextmanager
def staked_summed_once() -> Iterator[None]:
    """Within it, the writes that change what a LAT's nodes stake note the LAT instead of
    summing its stakes each; when it ends (without an error), each noted LAT is summed once.
    Use inside the writes' transaction: the sums commit with them."""
    if _unsummed.get() is not None:  # an enclosing one sums
        yield
        return
    noted: set[int] = set()
    token = _unsummed.set(noted)
    try:
        yield
    finally:
        _unsummed.reset(token)
    for lat_id in sorted(noted):
        store_lat_staked(lat_id=lat_id)


_ASSET_NODE = NodeAsset._meta.get_field("node")


def staked_changed(sender: Any, instance: Any, **_signal_kwargs: Any) -> None:
    """Receiver of the writes that change what a LAT's nodes stake (a node's asset saved or
    deleted, a node deleted, a token link added): its links' sums stored again."""
    lat_id: int | None
    if not isinstance(instance, NodeAsset):
        lat_id = instance.lat_id
    elif _ASSET_NODE.is_cached(instance):
        lat_id = instance.node.lat_id
    else:
        node = StakerNode.objects.filter(pk=instance.node_id)
        lat_id = node.values_list("lat_id", flat=True).first()  # None once the node is gone:
        # its own deletion sums again
    if lat_id is None:
        return
    noted = _unsummed.get()
    if noted is not None:
        noted.add(lat_id)
    else:
        store_lat_staked(lat_id=lat_id)


def _store_splits(*, lat: Lat, operators: dict[str, Operator], splits) -> int:
    changed = 0
    avs_by_address = {lat.avs.address: lat.avs}
    for (operator_address, avs_address), bips in splits.items():
        operator = operators[operator_address]
        avs: Avs = avs_by_address[avs_address]
        split, created = OperatorAvsSplit.objects.get_or_create(
            operator=operator, avs=avs, defaults={"split_bips": bips}
        )
        if not created and split.split_bips != bips:
            split.split_bips = bips
            split.save(update_fields=["split_bips"])
            changed += 1
        changed += created
    return changed
