"""The functions chain.md names that a deployment lacks (its "Older deployments"), detected once
per implementation.

Each refresh reads the EIP-1967 implementation slot of the LAT's proxy and of its price
oracle's (one JSON-RPC batch). An implementation seen before on the chain is looked up in
`ImplementationFunctions`; a new one (a new LAT, or a proxy upgraded since) is probed once:
each optional view of `chain.gateway.OPTIONAL_FUNCTIONS` is called alone, and is missing where
it reverts without data (or answers nothing) and the implementation's code does not hold its
selector (`Gateway.missing_functions`). An empty revert of a view whose selector the code
holds is a real failure: the refresh fails as on any revert, and nothing is remembered.

Why not the code alone: a proxy's own code never holds the implementation's selectors, and a
proxy that is not EIP-1967 hides its implementation; the call itself is what the node answers
for the deployment as it is, and the code only tells a real empty revert from a missing view.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import IntegrityError, transaction

from chain.gateway import LT_ORACLE, ORACLE_LAST_UPDATE, ORACLE_STALE, Gateway
from chain.results import Block
from lats.models import ImplementationFunctions

LIQUID_TOKEN_OPTIONAL = (LT_ORACLE,)
ORACLE_OPTIONAL = (ORACLE_STALE, ORACLE_LAST_UPDATE)

# What each missing function leaves unknown, in words for ops (the sync status, /health).
FEEDS = {
    LT_ORACLE: "the manifest's tokenRegistryOracle proxy is taken for the LAT's price oracle",
    ORACLE_STALE: "status pricesStale (and simulate-deposit's) null",
    ORACLE_LAST_UPDATE: "status lastPriceUpdate null",
}


def functions_missing(
    *,
    gateway: Gateway,
    chain_id: int,
    contract: str,
    address: str,
    implementation: str,
    names: Sequence[str],
    block: Block,
) -> set[str]:
    """Which of `names` the contract at `address` (whose code is `implementation`'s) lacks:
    remembered per (chain, implementation, contract), probed on the chain the first time."""
    known = ImplementationFunctions.objects.filter(
        chain_id=chain_id, implementation=implementation, contract=contract
    ).first()
    if known is not None and set(names) <= set(known.probed):
        return set(known.missing) & set(names)
    missing = gateway.missing_functions(
        address=address, implementation=implementation, names=names, block=block
    )
    try:
        with transaction.atomic():
            ImplementationFunctions.objects.update_or_create(
                chain_id=chain_id,
                implementation=implementation,
                contract=contract,
                defaults={
                    "probed": sorted(names),
                    "missing": sorted(missing),
                    "detected_block": block.number,
                },
            )
    except IntegrityError:
        pass  # another LAT's refresh, sharing the implementation, stored it meanwhile
    return missing
