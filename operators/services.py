"""Writes of staker nodes, what they hold, and their operators."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from lats.chain.results import ZERO_ADDRESS, Block, NodeState
from lats.models import Avs, Lat, Token
from operators.models import NodeAsset, Operator, OperatorAvsSplit, StakerNode


def _time(block: Block) -> datetime:
    return datetime.fromtimestamp(block.timestamp, tz=UTC)


def operator_ensure(*, chain_id: int, address: str) -> tuple[Operator, bool]:
    return Operator.objects.get_or_create(chain_id=chain_id, address=address)


def nodes_store(
    *,
    lat: Lat,
    nodes: Sequence[NodeState],
    splits: dict[tuple[str, str], int],
    created: dict[str, Block],
    block: Block,
) -> int:
    """Upsert the LAT's nodes, their assets and operators; returns how many rows changed.

    A node's `updated_at_block` moves only when its delegation or holdings change.
    """
    changed = 0
    operators: dict[str, Operator] = {}
    for address in sorted({n.operator for n in nodes if n.operator != ZERO_ADDRESS}):
        operators[address], was_created = operator_ensure(chain_id=lat.chain_id, address=address)
        changed += was_created
    tokens = {t.address: t for t in Token.objects.filter(chain_id=lat.chain_id)}
    existing = {
        n.address: n for n in StakerNode.objects.filter(lat=lat).prefetch_related("assets__token")
    }
    for state in nodes:
        operator = operators.get(state.operator)
        node = existing.pop(state.address, None)
        wanted = {a.token: (a.strategy, a.core_shares, a.staked_amount) for a in state.assets}
        if node is None:
            origin = created.get(state.address, block)
            node = StakerNode.objects.create(
                lat=lat,
                address=state.address,
                node_id=state.node_id,
                operator=operator,
                created_at_block=origin.number,
                created_at=_time(origin),
                updated_at_block=block.number,
                updated_at=_time(block),
            )
            have: dict[str, NodeAsset] = {}
            changed += 1
            node_changed = False
        else:
            have = {a.token.address: a for a in node.assets.all()}
            node_changed = node.operator_id != (operator.id if operator else None) or (
                node.node_id != state.node_id
            )
        for token_address, (strategy, shares, staked) in wanted.items():
            asset = have.pop(token_address, None)
            if asset is None:
                NodeAsset.objects.create(
                    node=node,
                    token=tokens[token_address],
                    strategy_address=strategy,
                    core_shares=shares,
                    staked_amount=staked,
                )
                node_changed = True
            elif (asset.strategy_address, int(asset.core_shares), int(asset.staked_amount)) != (
                strategy,
                shares,
                staked,
            ):
                asset.strategy_address = strategy
                asset.core_shares = shares
                asset.staked_amount = staked
                asset.save(update_fields=["strategy_address", "core_shares", "staked_amount"])
                node_changed = True
        if have:
            NodeAsset.objects.filter(id__in=[a.id for a in have.values()]).delete()
            node_changed = True
        if node_changed:
            node.operator = operator
            node.node_id = state.node_id
            node.updated_at_block = block.number
            node.updated_at = _time(block)
            node.save(update_fields=["operator", "node_id", "updated_at_block", "updated_at"])
            changed += 1
    if existing:  # nodes the coordinator no longer lists
        StakerNode.objects.filter(id__in=[n.id for n in existing.values()]).delete()
        changed += len(existing)
    changed += _store_splits(lat=lat, operators=operators, splits=splits)
    return changed


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
