"""Deploy the demo LATs, with a small EigenLayer, on a local anvil node.

``deploy_devnet(rpc_url)`` deploys the set described by ``DEMO_LATS`` on a running anvil and
returns one manifest per LAT, in the format of ``shared/spec/chain.md`` (with the optional
``eigenlayer`` and ``priceFeeds`` members; ``published=True`` gives them as deployment
repositories publish them). The script is deterministic: the same amounts, prices and
delegations every time, so tests can compute expected values by hand from the constants here.

The LAT contracts are those of upstream "Mainnet v1" (``devchain/contracts``, OpenZeppelin 4.9:
string reverts such as "Pausable: paused", a deposit that refreshes stale prices first), behind
TransparentUpgradeableProxies administered by a ProxyAdmin, with staker nodes as BeaconProxies.
``variant="v1.0.2"`` deploys the older shape instead (``devchain/contracts/v1_0_2``: OpenZeppelin
5 errors, no oracle on the LAT, ``getStakedAssetBalance``). Each token's price source is a
Chainlink-style feed of its price in the LAT's unit of account; the oracle's staleness threshold
is a fixed ``PRICE_STALENESS_SECONDS`` (Mainnet v1's is 1 to 4 hours, derived from the block).

Accounts are anvil's default-mnemonic accounts (``ACCOUNTS`` of them), by index: 0 deploys every
contract and holds every role of the LATs (admin, pauser, price updater, strategy controller,
node creator) and owns the EigenLayer stand-ins; 1-3 are depositors; 4-6 are the LATs'
operators; 7-9 are the AVSs' accounts of the three LATs; 10 is the default sender of
``deposit_many``; 12 is the demo's deposit wallet; 19 owns each LAT's ProxyAdmin (the admin of its
transparent proxies); 20 and 21 are EigenLayer operators no LAT delegates to; 22-25 stake outside
the LATs (``OUTSIDE_STAKERS``).

latETH's AVS is a ``ServiceManager`` contract owned by account 7 (as an AVS built on EigenLayer
middleware has one): its address is the AVS's address (the manifest's ``avsAddress``), and
account 7 announces its metadata, registers operators, sets their restaked strategies and makes
its rewards submissions through it. latORB's AVS is account 8 itself (an EOA, which cannot answer
``getOperatorRestakedStrategies``), latBTC's account 9 (an AVS without registrations).

The chain has days of history, so that rewards accrue over whole UTC days as on a real AVS.
Anvil must start in the past, at ``devnet_genesis(quiet_days)`` (``start_anvil(timestamp=...)``);
``deploy_devnet`` refuses a chain already later than its first day. With D0 = today (UTC) -
``HISTORY_DAYS`` - ``quiet_days`` and S = D0 + ``quiet_days``, every transaction of a day is
mined from 01:00 UTC on, one second apart (``DAY_OPENS_AT``):

- D0: the EigenLayer stand-ins (split activation delay 0), the tokens, operators 4, 5 (slashed by
  10 %), 6, 20 and 21; the stakers outside the LATs (22: 40 stETH and 20 cbETH delegated to 4;
  23: 25 stETH to 6; 24: 50 stETH and 30 cbETH to 20; 25: 100 stETH to 21); the three LATs with
  their scripted histories (``DEMO_LATS``: deposits, delegations, stakes, prices, operator
  splits, each AVS's metadata and first rewards submission, over 7 days from D0 00:00); the
  reward token RWD (``REWARD_TOKEN``: no strategy, no price feed, in no LAT); the registrations
  of day 0 (``REGISTRATIONS``: 4, 6 and 20 to latETH's AVS, 5 and 6 to latORB's; 21 never).
- D0+1 ... D0+``quiet_days``: one empty block a day (none without quiet days).
- S+1 ... S+9, the scripted days (``REGISTRATIONS``, ``DEREGISTRATIONS``, ``SPLIT_CHANGES``,
  ``SUBMISSIONS``, by day; a submission from day a over n days pays days a+1 ... a+n in
  EigenLayer's reckoning): S+2 operator 5 registers to latETH's AVS (restaked stETH and cbETH);
  S+4 operator 4 sets its latETH split from 500 to 2000 bips (in force at once: the activation
  delay is 0); S+5 latETH's AVS directs 0.03 stETH to operator 4 and 0.01 stETH to operator 5 over
  3 days from S (operator-directed); S+6 it submits 0.06 cbETH over 3 days from S+6 (stETH x1,
  cbETH x2); S+7 1000 RWD over 2 days from S+7 (stETH); S+8 operator 6 deregisters from it;
  S+9 the RewardsCoordinator's owner submits 0.01 stETH for every staker, over 1 day from S+9
  (rewards for all, which the service does not count).
- Then the chain follows the wall clock again, and a price updater refreshes each Mainnet-v1 LAT's
  prices (the same prices), so that they are fresh when the devnet is handed over.

Every scripted day is before today, so each is a complete UTC day. ``devnet_first_day`` reads D0
back from the chain, ``scripted_day`` gives a scripted day's 00:00 UTC.

Each AVS announces its metadata with ``AVSDirectory.updateAVSMetadataURI`` as an RFC 2397
``data:application/json;base64,...`` URI holding EigenLayer's metadata JSON (name, website,
description, logo, twitter), so the service can read it without network access.

Multicall3 is put at its canonical address unless ``multicall=False``: a devnet without it is
a chain like any other that lacks the helper, where the service must read through its plain
route.

``python -m devchain.devnet [--rpc-url URL] [--out DIR] [--no-multicall] [--quiet-days N]``
deploys and prints (or writes) the manifests, on a node started at ``devnet_genesis(N)``.
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

from eth_abi import decode as abi_decode
from eth_typing import HexStr
from web3 import Web3
from web3.contract import Contract
from web3.contract.contract import ContractFunction
from web3.logs import DISCARD
from web3.types import RPCEndpoint, TxParams, TxReceipt

from devchain.compile import load_build

BEACON_CHAIN_ETH = "0xbeaC0eeEeeeeEEeEeEEEEeeEEeEeeeEeeEEBEaC0"
MULTICALL3_ADDRESS = Web3.to_checksum_address("0xcA11bde05977b3631167028862bE2a173976CA11")
ZERO_ADDRESS = "0x0000000000000000000000000000000000000000"
EIP1967_IMPLEMENTATION_SLOT = 0x360894A13BA1A3210667C828492DB98DCA3E2076CC3735A920A3CA505D382BBC
EIP1967_ADMIN_SLOT = 0xB53127684A568B3173AE13B9F8A6016E243E63B6E8EE1178D6A717850B5D6103
EIP1967_BEACON_SLOT = 0xA3F0AD74E5423AEBFD80D3EF4346578335A9A72AEAEE59FF6CB3582B35133D50

DEPLOYER = 0
DEPOSITORS = (1, 2, 3)
OPERATORS = (4, 5, 6)  # the LATs' operators
BENCH_SENDER = 10
PROXY_ADMIN = 19
OUTSIDE_OPERATORS = (20, 21)  # registered EigenLayer operators no LAT delegates to
# Stakers outside the LATs, on D0: (account, {symbol: whole tokens} deposited, operator).
OUTSIDE_STAKERS: tuple[tuple[int, dict[str, str], int], ...] = (
    (22, {"stETH": "40", "cbETH": "20"}, 4),
    (23, {"stETH": "25"}, 6),
    (24, {"stETH": "50", "cbETH": "30"}, 20),
    (25, {"stETH": "100"}, 21),
)
ACCOUNTS = 30  # anvil accounts the devnet uses (devchain.anvil.DEFAULT_ACCOUNTS)

WAD = 10**18
PRICE_STALENESS_SECONDS = 86_400
SLASHED_OPERATOR = 5
SLASHED_WAD = WAD // 10  # operator 5 has lost 10 % of its stake
REWARDS_DURATION = 7 * 86_400

DAY = 86_400
HISTORY_DAYS = 10  # D0 is this many days (and the quiet days) before today
DAY_OPENS_AT = 3_600  # a devnet day's transactions start at 01:00 UTC, one second apart
QUIET_DAYS_PER_CALL = 30  # on_day is called at least every so many quiet days


def units(amount: str | int, decimals: int) -> int:
    """Whole-token amount ("1.5") to raw units, exactly."""
    whole, _, frac = str(amount).partition(".")
    return int(whole) * 10**decimals + int((frac + "0" * decimals)[:decimals] or 0)


@dataclass(frozen=True)
class TokenSpec:
    symbol: str
    name: str
    decimals: int
    strategy_rate: int  # underlying units per strategy share, 1e18-scaled
    eth_price: int | None = None  # ETH per whole token, 1e18-scaled, for a Chainlink-style feed


TOKENS: dict[str, TokenSpec] = {
    t.symbol: t
    for t in (
        TokenSpec("stETH", "Test Staked Ether", 18, 1_050_000_000_000_000_000),
        TokenSpec("cbETH", "Test Coinbase Staked ETH", 6, 1_020_000_000_000_000_000),
        TokenSpec("rETH", "Test Rocket Pool ETH", 18, 1_100_000_000_000_000_000),
        TokenSpec("ORB", "Orbit", 18, 1_100_000_000_000_000_000, 400_000_000_000_000),
        TokenSpec("WBTC", "Test Wrapped BTC", 8, 1_010_000_000_000_000_000, 30 * WAD),
        TokenSpec(
            "tBTC", "Test tBTC v2", 18, 1_030_000_000_000_000_000, 29_900_000_000_000_000_000
        ),
    )
}
# A token an AVS pays rewards in that has no strategy, no price feed and is in no LAT.
REWARD_TOKEN = TokenSpec("RWD", "Devnet Reward", 18, strategy_rate=0)


def decimals_of(symbol: str) -> int:
    return REWARD_TOKEN.decimals if symbol == REWARD_TOKEN.symbol else TOKENS[symbol].decimals


@dataclass(frozen=True)
class LatSpec:
    """One demo LAT and the scripted history deploy_devnet gives it (amounts in whole tokens)."""

    name: str
    symbol: str
    base_asset: str  # "ETH" or a TOKENS symbol
    avs_account: int
    service_manager: bool  # the AVS is a ServiceManager owned by avs_account, else that account
    avs_metadata: dict[str, str]
    max_nodes: int
    legacy_events: bool
    tokens: tuple[tuple[str, int, int], ...]  # (symbol, pricePerUnit, volatilityThreshold)
    added_then_removed: tuple[tuple[str, int], ...] = ()  # (symbol, price): TokenAdded+Removed
    nodes: int = 3
    delegate_before_staking: dict[int, int] = field(default_factory=dict)  # node -> operator
    delegate_after_staking: dict[int, int] = field(default_factory=dict)
    undelegate: tuple[int, ...] = ()
    deposits: tuple[tuple[int, dict[str, str]], ...] = ()  # (account, {symbol: amount})
    stakes: tuple[tuple[int, dict[str, str]], ...] = ()  # (node, {symbol: amount})
    queued: dict[str, str] = field(default_factory=dict)
    manager_price_updates: dict[str, int] = field(default_factory=dict)  # via LTM.setPrice
    oracle_price_updates: dict[str, int] = field(default_factory=dict)  # via oracle.updateRate
    feed_updates: dict[str, int] = field(default_factory=dict)  # symbol -> new ETH price
    operator_splits: dict[int, int] = field(default_factory=dict)  # operator -> bips
    reward: tuple[str, str] = ("", "0")  # (token symbol, amount) submitted by the AVS
    late_deposits: tuple[tuple[int, dict[str, str]], ...] = ()  # after staking and prices


DEMO_LATS: tuple[LatSpec, ...] = (
    LatSpec(
        name="Liquid AVS Token ETH",
        symbol="latETH",
        base_asset="ETH",
        avs_account=7,
        service_manager=True,
        avs_metadata={
            "name": "Example Data Availability AVS",
            "website": "https://da.example.org",
            "description": "A demo AVS secured by restaked ETH.",
            "logo": "https://da.example.org/logo.png",
            "twitter": "https://x.com/example_da",
        },
        max_nodes=10,
        legacy_events=False,
        tokens=(("stETH", WAD, 5 * 10**16), ("cbETH", 1_080_000_000_000_000_000, 0)),
        added_then_removed=(("rETH", 1_100_000_000_000_000_000),),
        nodes=3,
        delegate_before_staking={0: 4},
        delegate_after_staking={1: SLASHED_OPERATOR},  # node 2 stays undelegated
        deposits=((1, {"stETH": "10"}), (2, {"cbETH": "20"}), (3, {"stETH": "5", "cbETH": "3"})),
        stakes=((0, {"stETH": "8", "cbETH": "10"}), (1, {"stETH": "4"})),
        queued={"stETH": "1"},
        manager_price_updates={"cbETH": 1_090_000_000_000_000_000},
        oracle_price_updates={"stETH": 999_000_000_000_000_000},
        operator_splits={4: 500},  # operator 5 keeps the 10 % default
        reward=("stETH", "0.15"),
        late_deposits=((1, {"cbETH": "2"}),),
    ),
    LatSpec(
        name="Liquid AVS Token Orbit",
        symbol="latORB",
        base_asset="ORB",
        avs_account=8,
        service_manager=False,
        avs_metadata={
            "name": "Orbit Network",
            "website": "https://orbit.example.org",
            "description": "A demo AVS with its own token, ORB.",
            "logo": "https://orbit.example.org/logo.svg",
            "twitter": "https://x.com/example_orbit",
            "discord": "https://discord.gg/example-orbit",
        },
        max_nodes=5,
        legacy_events=True,  # emits the older Deposit event instead of AssetDeposited
        tokens=(("ORB", WAD, 0),),
        nodes=3,
        delegate_before_staking={0: 6, 1: SLASHED_OPERATOR, 2: 4},
        undelegate=(2,),  # node 2 holds shares but is undelegated again
        deposits=((1, {"ORB": "1000"}), (2, {"ORB": "2500"}), (3, {"ORB": "500"})),
        stakes=((0, {"ORB": "1500"}), (1, {"ORB": "1000"}), (2, {"ORB": "200"})),
        queued={"ORB": "100"},
        feed_updates={"ORB": 420_000_000_000_000},
        operator_splits={6: 2500},
        reward=("ORB", "3"),
        late_deposits=((2, {"ORB": "10"}),),
    ),
    LatSpec(
        name="Liquid AVS Token BTC",
        symbol="latBTC",
        base_asset="WBTC",
        avs_account=9,
        service_manager=False,
        avs_metadata={
            "name": "Example BTC Bridge AVS",
            "website": "https://bridge.example.org",
            "description": "A demo AVS secured by restaked BTC.",
            "logo": "https://bridge.example.org/logo.png",
            "twitter": "https://x.com/example_bridge",
        },
        max_nodes=4,
        legacy_events=False,
        tokens=(("WBTC", WAD, 2 * 10**16), ("tBTC", 998_000_000_000_000_000, 2 * 10**16)),
        nodes=2,
        delegate_before_staking={0: 4},  # node 1 stays undelegated, with shares
        deposits=(
            (1, {"WBTC": "2"}),
            (2, {"tBTC": "1.5"}),
            (3, {"WBTC": "0.5", "tBTC": "0.25"}),
        ),
        stakes=((0, {"WBTC": "1.5", "tBTC": "1"}), (1, {"WBTC": "0.5"})),
        queued={"tBTC": "0.1"},
        oracle_price_updates={"tBTC": 997_000_000_000_000_000},
        operator_splits={4: 0},
        reward=("WBTC", "0.05"),
        late_deposits=((3, {"WBTC": "0.1"}),),
    ),
)


# ----- the AVSs' days (day 0 is D0; day i >= 1 is scripted day i, S + i) -----

# (day, LAT whose AVS, operator, restaked strategies set on the AVS's ServiceManager)
REGISTRATIONS: tuple[tuple[int, str, int, tuple[str, ...]], ...] = (
    (0, "latETH", 4, ("stETH", "cbETH")),
    (0, "latETH", 6, ("stETH",)),
    (0, "latETH", 20, ("stETH", "cbETH")),
    (0, "latORB", 5, ()),
    (0, "latORB", 6, ()),
    (2, "latETH", 5, ("stETH", "cbETH")),
)
# (day, LAT whose AVS, operator)
DEREGISTRATIONS: tuple[tuple[int, str, int], ...] = ((8, "latETH", 6),)
# (day, LAT whose AVS, operator, new split in bips); the splits of D0 are DEMO_LATS'.
SPLIT_CHANGES: tuple[tuple[int, str, int, int], ...] = ((4, "latETH", 4, 2000),)

AVS_REWARDS = "avs"  # createAVSRewardsSubmission, by the AVS
OPERATOR_DIRECTED = "operator-directed"  # createOperatorDirectedAVSRewardsSubmission, by the AVS
REWARDS_FOR_ALL = "for-all"  # createRewardsForAllSubmission, by the coordinator's owner


@dataclass(frozen=True)
class Submission:
    """A rewards submission of a scripted day. ``start`` is its startTimestamp as a day from S
    (00:00 UTC of S + start); amounts are whole tokens."""

    day: int
    kind: str
    token: str
    strategies: tuple[tuple[str, int], ...]  # (symbol, multiplier)
    start: int
    days: int
    amount: str = "0"  # AVS_REWARDS, REWARDS_FOR_ALL
    operator_rewards: tuple[tuple[int, str], ...] = ()  # OPERATOR_DIRECTED: (operator, amount)
    description: str = ""  # OPERATOR_DIRECTED
    lat: str = "latETH"  # whose AVS makes it (not REWARDS_FOR_ALL)


SUBMISSIONS: tuple[Submission, ...] = (
    Submission(
        5, OPERATOR_DIRECTED, "stETH", (("stETH", WAD), ("cbETH", WAD)), start=0, days=3,
        operator_rewards=((4, "0.03"), (5, "0.01")), description="devnet operator-directed",
    ),
    Submission(6, AVS_REWARDS, "cbETH", (("stETH", WAD), ("cbETH", 2 * WAD)), 6, 3, "0.06"),
    Submission(7, AVS_REWARDS, "RWD", (("stETH", WAD),), 7, 2, "1000"),
    Submission(9, REWARDS_FOR_ALL, "stETH", (("stETH", WAD),), 9, 1, "0.01", lat=""),
)  # fmt: skip
SCRIPTED_DAYS = HISTORY_DAYS - 1  # S+1 ... S+9: every one before today


class DevnetError(RuntimeError):
    """A devnet transaction failed or the node is not usable."""


# ----- artifacts and contracts -----


@lru_cache(maxsize=1)
def load_artifacts() -> dict[str, dict[str, Any]]:
    """Contract name -> {"abi", "bytecode", "deployedBytecode", "source"} (compiles if needed)."""
    return load_build()["contracts"]


def connect(rpc_url: str, *, timeout: float = 60.0) -> Web3:
    return Web3(Web3.HTTPProvider(rpc_url, request_kwargs={"timeout": timeout}))


def contract(w3: Web3, name: str, address: str) -> Contract:
    """The compiled contract ``name`` at ``address``; for a proxy, name its implementation."""
    return w3.eth.contract(
        address=Web3.to_checksum_address(address), abi=load_artifacts()[name]["abi"]
    )


@lru_cache(maxsize=1)
def _error_selectors() -> dict[bytes, tuple[str, list[str]]]:
    selectors: dict[bytes, tuple[str, list[str]]] = {
        bytes.fromhex("08c379a0"): ("Error", ["string"]),
        bytes.fromhex("4e487b71"): ("Panic", ["uint256"]),
    }
    for artifact in load_artifacts().values():
        for item in artifact["abi"]:
            if item["type"] == "error":
                types = [arg["type"] for arg in item["inputs"]]
                signature = f"{item['name']}({','.join(types)})"
                selectors[Web3.keccak(text=signature)[:4]] = (item["name"], types)
    return selectors


def decode_error(data: str | bytes) -> tuple[str, tuple[Any, ...]]:
    """Decode revert data (selector + args) against every compiled contract's errors.

    Returns ``(name, args)``, e.g. ``("UnsupportedAsset", ("0xAb...",))``; raises KeyError for
    an unknown selector.
    """
    raw = (
        bytes.fromhex(data[2:] if data.startswith("0x") else data)
        if isinstance(data, str)
        else data
    )
    name, types = _error_selectors()[raw[:4]]
    args = abi_decode(types, raw[4:]) if types else ()
    return name, tuple(
        Web3.to_checksum_address(a) if t == "address" else a
        for a, t in zip(args, types, strict=True)
    )


# ----- transactions -----


def _send(w3: Web3, call: ContractFunction, sender: str, **tx: Any) -> TxReceipt:
    tx_hash = call.transact(cast(TxParams, {"from": sender, **tx}))
    return _receipt(w3, tx_hash)


def _receipt(w3: Web3, tx_hash: Any) -> TxReceipt:
    receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=30, poll_latency=0.01)
    if receipt["status"] != 1:
        raise DevnetError(f"transaction {tx_hash.hex()} reverted")
    return receipt


def _rpc(w3: Web3, method: str, *params: Any) -> Any:
    response = w3.provider.make_request(RPCEndpoint(method), list(params))
    if "error" in response:
        raise DevnetError(f"{method} failed: {response['error']}")
    return response.get("result")


# ----- the chain's days -----


def utc_day(timestamp: int) -> int:
    """00:00 UTC of the day of ``timestamp``."""
    return timestamp - timestamp % DAY


def devnet_genesis(quiet_days: int = 0, *, now: float | None = None) -> int:
    """The timestamp to start anvil at (``start_anvil(timestamp=...)``) for a devnet deployed
    today: 00:00 UTC of its first day D0, ``HISTORY_DAYS`` + ``quiet_days`` days before today."""
    today = utc_day(int(time.time() if now is None else now))
    return today - (HISTORY_DAYS + quiet_days) * DAY


def devnet_first_day(w3: Web3, manifest: dict[str, Any]) -> int:
    """D0, read from the chain: 00:00 UTC of the day the LAT's LiquidToken proxy was deployed."""
    return utc_day(int(w3.eth.get_block(manifest["deploymentBlock"])["timestamp"]))


def scripted_day(first_day: int, index: int, *, quiet_days: int = 0) -> int:
    """00:00 UTC of scripted day ``index`` (S + index; S itself for 0) of a devnet whose D0 is
    ``first_day``."""
    return first_day + (quiet_days + index) * DAY


def _latest_timestamp(w3: Web3) -> int:
    return int(w3.eth.get_block("latest")["timestamp"])


def _open_day(w3: Web3, day: int) -> None:
    """Mine the next transactions from 01:00 UTC of ``day`` (its 00:00 timestamp) on, one second
    apart; a chain already past that day cannot have it."""
    latest = _latest_timestamp(w3)
    if latest >= day + DAY:
        raise DevnetError(
            f"the chain is at {_iso(latest)}, past the devnet's day {_iso(day)[:10]}: start "
            "anvil at devnet_genesis() (start_anvil(timestamp=...)) to deploy the devnet"
        )
    _rpc(w3, "evm_setNextBlockTimestamp", max(day + DAY_OPENS_AT, latest + 1))
    _rpc(w3, "anvil_setBlockTimestampInterval", 1)


def _quiet_days(w3: Web3, first_day: int, days: int, on_day: Callable[[int], None]) -> None:
    """One empty block at 01:00 UTC of each of the ``days`` days after D0, mined in runs of at
    most QUIET_DAYS_PER_CALL days (anvil_mine under a block interval of a day)."""
    done = 0
    while done < days:
        run = min(QUIET_DAYS_PER_CALL, days - done)
        _rpc(w3, "evm_setNextBlockTimestamp", first_day + (done + 1) * DAY + DAY_OPENS_AT)
        _rpc(w3, "anvil_setBlockTimestampInterval", DAY)
        _rpc(w3, "anvil_mine", run)
        done += run
        on_day(done)


def _follow_wall_clock(w3: Web3) -> None:
    """Back to anvil's own clock: a block at the wall clock's time, later ones after it."""
    _rpc(w3, "anvil_removeBlockTimestampInterval")
    _rpc(w3, "evm_setNextBlockTimestamp", max(int(time.time()), _latest_timestamp(w3) + 1))
    _rpc(w3, "evm_mine")


def _iso(timestamp: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))


@dataclass(frozen=True)
class Deployed:
    address: str
    block: int
    timestamp: int  # the block's, in seconds

    def ref(self) -> dict[str, Any]:
        """``{address, block, timestamp}``, the timestamp in milliseconds as deployments
        publish it."""
        return {"address": self.address, "block": self.block, "timestamp": self.timestamp * 1000}


def _deploy(w3: Web3, name: str, sender: str, *args: Any) -> Deployed:
    artifact = load_artifacts()[name]
    factory = w3.eth.contract(abi=artifact["abi"], bytecode=artifact["bytecode"])
    receipt = _receipt(w3, factory.constructor(*args).transact({"from": sender}))
    if receipt["contractAddress"] is None:
        raise DevnetError(f"deploying {name} created no contract")
    block = receipt["blockNumber"]
    return Deployed(
        Web3.to_checksum_address(receipt["contractAddress"]),
        block,
        w3.eth.get_block(block)["timestamp"],
    )


def install_multicall3(w3: Web3) -> str:
    """Put Multicall3's runtime code at the canonical address (anvil_setCode) if absent."""
    if len(w3.eth.get_code(MULTICALL3_ADDRESS)) == 0:
        code = load_artifacts()["Multicall3"]["deployedBytecode"]
        response = w3.provider.make_request(
            RPCEndpoint("anvil_setCode"), [MULTICALL3_ADDRESS, code]
        )
        if "error" in response:
            raise DevnetError(f"anvil_setCode failed: {response['error']}")
    return MULTICALL3_ADDRESS


def remove_multicall3(w3: Web3) -> None:
    """Take any code away from Multicall3's canonical address (anvil_setCode), for a devnet that
    must lack it."""
    if len(w3.eth.get_code(MULTICALL3_ADDRESS)) != 0:
        response = w3.provider.make_request(
            RPCEndpoint("anvil_setCode"), [MULTICALL3_ADDRESS, "0x"]
        )
        if "error" in response:
            raise DevnetError(f"anvil_setCode failed: {response['error']}")


# ----- the shared EigenLayer and tokens -----


@dataclass
class Core:
    accounts: Sequence[str]
    strategy_manager: Contract
    delegation_manager: Contract
    rewards_coordinator: Contract
    avs_directory: Contract
    tokens: dict[str, Contract]  # symbol -> TestERC20
    strategies: dict[str, Contract]  # symbol -> Strategy
    feeds: dict[str, Contract]  # symbol -> PriceFeed

    def account(self, index: int) -> str:
        return self.accounts[index]


def deploy_core(w3: Web3, *, multicall: bool = True) -> Core:
    """Deploy the EigenLayer stand-ins, the test tokens with their strategies and price feeds,
    and register the operators (operator 5 slashed by 10 %); Multicall3 too when asked. The
    rewards coordinator's split activation delay is 0."""
    accounts = [Web3.to_checksum_address(a) for a in w3.eth.accounts]
    if len(accounts) < ACCOUNTS:
        raise DevnetError(f"the node has {len(accounts)} accounts; the devnet needs {ACCOUNTS}")
    owner = accounts[DEPLOYER]
    if multicall:
        install_multicall3(w3)
    sm = contract(w3, "StrategyManager", _deploy(w3, "StrategyManager", owner).address)
    dm = contract(
        w3, "DelegationManager", _deploy(w3, "DelegationManager", owner, sm.address).address
    )
    _send(w3, sm.functions.setDelegationManager(dm.address), owner)
    rc = contract(w3, "RewardsCoordinator", _deploy(w3, "RewardsCoordinator", owner).address)
    _send(w3, rc.functions.setActivationDelay(0), owner)  # a split is in force once set
    directory = _deploy(w3, "AVSDirectory", owner, dm.address)
    avs_directory = contract(w3, "AVSDirectory", directory.address)

    tokens: dict[str, Contract] = {}
    strategies: dict[str, Contract] = {}
    feeds: dict[str, Contract] = {}
    for spec in TOKENS.values():
        token = _deploy(w3, "TestERC20", owner, spec.name, spec.symbol, spec.decimals)
        tokens[spec.symbol] = contract(w3, "TestERC20", token.address)
        strategy = _deploy(w3, "Strategy", owner, token.address, sm.address, spec.strategy_rate)
        strategies[spec.symbol] = contract(w3, "Strategy", strategy.address)
        if spec.eth_price is not None:
            feed = _deploy(w3, "PriceFeed", owner, 18, f"{spec.symbol} / ETH", spec.eth_price)
            feeds[spec.symbol] = contract(w3, "PriceFeed", feed.address)

    for index in OPERATORS + OUTSIDE_OPERATORS:
        uri = f"https://operators.example.org/{index}.json"
        _send(w3, dm.functions.registerAsOperator(accounts[index], 0, uri), accounts[index])
    _send(w3, dm.functions.setOperatorSlashing(accounts[SLASHED_OPERATOR], SLASHED_WAD), owner)
    return Core(accounts, sm, dm, rc, avs_directory, tokens, strategies, feeds)


def stake_outside(w3: Web3, core: Core) -> None:
    """The stakers outside the LATs (``OUTSIDE_STAKERS``): each deposits into the strategies
    (StrategyManager.depositIntoStrategy), then delegates to its operator."""
    for account, amounts, operator in OUTSIDE_STAKERS:
        staker = core.account(account)
        for symbol, amount in amounts.items():
            token, strategy = core.tokens[symbol], core.strategies[symbol]
            raw = units(amount, TOKENS[symbol].decimals)
            _send(w3, token.functions.mint(staker, raw), staker)
            _send(w3, token.functions.approve(core.strategy_manager.address, raw), staker)
            call = core.strategy_manager.functions.depositIntoStrategy(
                strategy.address, token.address, raw
            )
            _send(w3, call, staker)
        call = core.delegation_manager.functions.delegateTo(
            core.account(operator), (b"", 0), bytes(32)
        )
        _send(w3, call, staker)


# ----- the AVSs -----


@dataclass
class Avs:
    """An AVS as the devnet drives it: ``address`` is the AVS in EigenLayer, ``account`` the
    account acting for it, through ``service_manager`` (owned by ``account``, at ``address``)
    where the AVS has one, else directly (``address`` is then ``account``)."""

    address: str
    account: str
    service_manager: Contract | None
    salts: itertools.count[int] = field(default_factory=itertools.count)

    def update_metadata(self, w3: Web3, core: Core, uri: str) -> None:
        target = self.service_manager or core.avs_directory
        _send(w3, target.functions.updateAVSMetadataURI(uri), self.account)

    def register(self, w3: Web3, core: Core, operator: str, restaked: Sequence[str]) -> None:
        """Register ``operator``; a ServiceManager also records its restaked strategies."""
        if self.service_manager is None:
            salt = Web3.solidity_keccak(["address", "uint256"], [self.address, next(self.salts)])
            signature = (b"", salt, 2**256 - 1)  # not verified on the devnet
            call = core.avs_directory.functions.registerOperatorToAVS(operator, signature)
            _send(w3, call, self.account)
            return
        manager = self.service_manager.functions
        _send(w3, manager.registerOperatorToAVS(operator), self.account)
        _send(w3, manager.setOperatorRestakedStrategies(operator, list(restaked)), self.account)

    def deregister(self, w3: Web3, core: Core, operator: str) -> None:
        target = self.service_manager or core.avs_directory
        _send(w3, target.functions.deregisterOperatorFromAVS(operator), self.account)

    def submit(self, w3: Web3, core: Core, token: str, amount: int, submission: tuple) -> None:
        """An AVS rewards submission of ``amount`` of ``token``, minted to the AVS's account."""
        self._fund(w3, core, token, amount)
        if self.service_manager is None:
            call = core.rewards_coordinator.functions.createAVSRewardsSubmission([submission])
        else:
            call = self.service_manager.functions.createAVSRewardsSubmission([submission])
        _send(w3, call, self.account)

    def submit_operator_directed(
        self, w3: Web3, core: Core, token: str, amount: int, submission: tuple
    ) -> None:
        """An operator-directed submission whose operator rewards add up to ``amount``."""
        self._fund(w3, core, token, amount)
        if self.service_manager is None:
            rc = core.rewards_coordinator.functions
            call = rc.createOperatorDirectedAVSRewardsSubmission(self.address, [submission])
        else:
            sm = self.service_manager.functions
            call = sm.createOperatorDirectedAVSRewardsSubmission([submission])
        _send(w3, call, self.account)

    def _fund(self, w3: Web3, core: Core, token: str, amount: int) -> None:
        """Mint ``amount`` to the AVS's account and let whoever submits take it."""
        erc20 = contract(w3, "TestERC20", token).functions
        spender = self.service_manager or core.rewards_coordinator
        _send(w3, erc20.mint(self.account, amount), self.account)
        _send(w3, erc20.approve(spender.address, amount), self.account)


def deploy_avs(w3: Web3, core: Core, spec: LatSpec) -> Avs:
    """The LAT's AVS: a ServiceManager deployed (and owned) by its account, or the account."""
    account = core.account(spec.avs_account)
    if not spec.service_manager:
        return Avs(account, account, None)
    deployed = _deploy(
        w3,
        "ServiceManager",
        account,
        core.avs_directory.address,
        core.rewards_coordinator.address,
    )
    manager = contract(w3, "ServiceManager", deployed.address)
    return Avs(manager.address, account, manager)


# ----- one LAT -----


def avs_metadata_uri(metadata: dict[str, str]) -> str:
    document = json.dumps(metadata, separators=(",", ":")).encode()
    return "data:application/json;base64," + base64.b64encode(document).decode()


@dataclass(frozen=True)
class Shape:
    """The contracts of one kind of deployment, by role."""

    liquid_token: str
    manager: str
    oracle: str
    coordinator: str = "StakerNodeCoordinator"
    node: str = "StakerNode"
    # Mainnet v1: a token's price comes from its configured source (a feed per token here) and
    # deposits refresh stale prices; v1.0.2: a token is added with its price, never refreshed.
    price_sources: bool = True


MAINNET_V1 = "mainnet-v1"
V1_0_2 = "v1.0.2"
VARIANTS: dict[str, Shape] = {
    # Upstream main at 947e426 (tag v1.0.7), OpenZeppelin 4.9: string reverts, stale-price
    # refresh inside deposit, getDeposit/WithdrawableAssetBalance, tokenRegistryOracle().
    MAINNET_V1: Shape("LiquidToken", "LiquidTokenManager", "TokenRegistryOracle"),
    # The older deployments: no tokenRegistryOracle() on the LAT and no arePricesStale() or
    # lastPriceUpdate() (tags up to v1.0.2), getStakedAssetBalance (up to v1.0.6), and
    # OpenZeppelin 5's errors such as EnforcedPause() (up to v1.0.1 and Holesky v1, deployed
    # from it; v1.0.2 itself moved to OpenZeppelin 4.9 and reverts with strings).
    V1_0_2: Shape(
        "LiquidTokenV102", "LiquidTokenManagerV102", "TokenRegistryOracleV102", price_sources=False
    ),
}
LAT_ROLES = ("LiquidToken", "LiquidTokenManager", "StakerNodeCoordinator", "TokenRegistryOracle")


def deploy_lat(
    w3: Web3, core: Core, spec: LatSpec, avs: Avs, *, variant: str = MAINNET_V1
) -> dict[str, Any]:
    """Deploy one LAT per ``spec`` with the contracts of ``variant`` (``VARIANTS``), secured by
    ``avs``, play its scripted history, and return its manifest in the published format
    (``_lat_manifest``)."""
    shape = VARIANTS[variant]
    lat = _deploy_lat_contracts(w3, core, shape)
    _initialize_lat(w3, core, spec, lat)
    _add_tokens_and_nodes(w3, core, spec, lat)
    avs.update_metadata(w3, core, avs_metadata_uri(spec.avs_metadata))
    _play_history(w3, core, spec, lat, avs)
    return _lat_manifest(w3, core, spec, lat, avs.address)


@dataclass(frozen=True)
class LatContracts:
    """One LAT's deployments (by role: the Mainnet v1 contract names) and its proxies as
    contracts; ``rate_feeds`` are the per-token price sources of its oracle (symbol -> feed)."""

    shape: Shape
    proxy_admin: Deployed
    impl: dict[str, Deployed]
    proxy: dict[str, Deployed]
    lt: Contract
    ltm: Contract
    coordinator: Contract
    oracle: Contract
    rate_feeds: dict[str, Contract] = field(default_factory=dict)


def _deploy_lat_contracts(w3: Web3, core: Core, shape: Shape) -> LatContracts:
    """A ProxyAdmin (owned by the proxy admin account), the implementations, then their
    TransparentUpgradeableProxies administered by it (not initialized yet)."""
    owner = core.account(DEPLOYER)
    proxy_admin = _deploy(w3, "ProxyAdmin", core.account(PROXY_ADMIN))
    names = {
        "LiquidToken": shape.liquid_token,
        "LiquidTokenManager": shape.manager,
        "StakerNodeCoordinator": shape.coordinator,
        "StakerNode": shape.node,
        "TokenRegistryOracle": shape.oracle,
    }
    impl = {role: _deploy(w3, name, owner) for role, name in names.items()}
    # The LiquidToken proxy first: its block is the LAT's deploymentBlock.
    proxy = {
        role: _deploy(
            w3, "TransparentUpgradeableProxy", owner, impl[role].address, proxy_admin.address, b""
        )
        for role in LAT_ROLES
    }
    return LatContracts(
        shape=shape,
        proxy_admin=proxy_admin,
        impl=impl,
        proxy=proxy,
        lt=contract(w3, shape.liquid_token, proxy["LiquidToken"].address),
        ltm=contract(w3, shape.manager, proxy["LiquidTokenManager"].address),
        coordinator=contract(w3, shape.coordinator, proxy["StakerNodeCoordinator"].address),
        oracle=contract(w3, shape.oracle, proxy["TokenRegistryOracle"].address),
    )


def _initialize_lat(w3: Web3, core: Core, spec: LatSpec, lat: LatContracts) -> None:
    """Roles as Mainnet v1 grants them, the deployer holding every human one (admin, pauser,
    price updater, strategy controller, node creator); the oracle updates the manager's prices,
    the LAT may refresh them, the manager delegates the nodes. The deployer may also set prices
    in the manager directly (PRICE_UPDATER_ROLE; Mainnet v1 gives it to the oracle only)."""
    owner = core.account(DEPLOYER)
    sm, dm = core.strategy_manager, core.delegation_manager
    lt, ltm, coordinator, oracle = lat.lt, lat.ltm, lat.coordinator, lat.oracle
    manager_init: tuple[Any, ...]  # the Init struct of each shape's contract
    lt_init: tuple[Any, ...]
    if lat.shape.price_sources:
        _send(w3, oracle.functions.initialize((owner, owner, lt.address, ltm.address), 0), owner)
        manager_init = (
            lt.address, sm.address, dm.address, coordinator.address, oracle.address,
            owner, owner, oracle.address,
        )  # fmt: skip
        lt_init = (spec.name, spec.symbol, ltm.address, oracle.address, owner, owner)
    else:
        _send(w3, oracle.functions.initialize((owner, owner, ltm.address)), owner)
        manager_init = (
            lt.address, sm.address, dm.address, coordinator.address, owner, owner, oracle.address,
        )  # fmt: skip
        lt_init = (spec.name, spec.symbol, ltm.address, owner, owner)
    _send(w3, ltm.functions.initialize(manager_init), owner)
    price_updater = ltm.functions.PRICE_UPDATER_ROLE().call()
    _send(w3, ltm.functions.grantRole(price_updater, owner), owner)
    coordinator_init = (
        ltm.address, dm.address, sm.address, spec.max_nodes, owner, owner, owner, ltm.address,
        lat.impl["StakerNode"].address,
    )  # fmt: skip
    _send(w3, coordinator.functions.initialize(coordinator_init), owner)
    _send(w3, lt.functions.initialize(lt_init), owner)
    if spec.legacy_events:
        _send(w3, lt.functions.setLegacyEvents(True), owner)
    if lat.shape.price_sources:
        # A fixed staleness threshold (Mainnet v1's is 1 to 4 hours, derived from the block).
        _send(w3, oracle.functions.setPriceUpdateInterval(PRICE_STALENESS_SECONDS), owner)


def _add_tokens_and_nodes(w3: Web3, core: Core, spec: LatSpec, lat: LatContracts) -> None:
    """The LAT's tokens (and any token added then removed again), then its staker nodes.

    On Mainnet v1 each token's price comes from its source: here a Chainlink-style feed of the
    token's price in the LAT's unit of account (18 decimals), deployed per LAT and token, except
    for the unit of account itself, a native token priced 1e18 and never refreshed."""
    owner = core.account(DEPLOYER)
    base = spec.base_asset

    def add_token(symbol: str, price: int, threshold: int) -> None:
        token, strategy = core.tokens[symbol], core.strategies[symbol]
        decimals = TOKENS[symbol].decimals
        if not lat.shape.price_sources:
            call = lat.ltm.functions.addToken(
                token.address, decimals, price, threshold, strategy.address
            )
        elif symbol == base:
            if price != WAD:
                raise DevnetError(f"{spec.symbol}: its unit of account {symbol} is priced 1e18")
            call = lat.ltm.functions.addToken(
                token.address, decimals, threshold, strategy.address, 0, ZERO_ADDRESS, 0,
                ZERO_ADDRESS, b"\0" * 4,
            )  # fmt: skip
        else:
            unit = "ETH" if base == "ETH" else base
            feed = _deploy(w3, "PriceFeed", owner, 18, f"{symbol} / {unit}", price)
            lat.rate_feeds[symbol] = contract(w3, "PriceFeed", feed.address)
            call = lat.ltm.functions.addToken(
                token.address, decimals, threshold, strategy.address, 1, feed.address, 0,
                ZERO_ADDRESS, b"\0" * 4,
            )  # fmt: skip
        _send(w3, call, owner)

    for symbol, price, threshold in spec.tokens:
        add_token(symbol, price, threshold)
    for symbol, price in spec.added_then_removed:
        add_token(symbol, price, 0)
        _send(w3, lat.ltm.functions.removeToken(core.tokens[symbol].address), owner)
    for _ in range(spec.nodes):
        _send(w3, lat.coordinator.functions.createStakerNode(), owner)


def _deposit(w3: Web3, core: Core, lt: Contract, account: int, amounts: dict[str, str]) -> None:
    """Mint, approve and deposit whole-token ``amounts`` from anvil account ``account``."""
    sender = core.account(account)
    assets, raw = [], []
    for symbol, amount in amounts.items():
        token = core.tokens[symbol]
        value = units(amount, TOKENS[symbol].decimals)
        _send(w3, token.functions.mint(sender, value), sender)
        _send(w3, token.functions.approve(lt.address, value), sender)
        assets.append(token.address)
        raw.append(value)
    _send(w3, lt.functions.deposit(assets, raw, sender), sender)


def delegate_node(w3: Web3, manager: Contract, node_id: int, operator: str, sender: str) -> None:
    """Delegate one staker node (``delegateNodes``, no approver signature)."""
    call = manager.functions.delegateNodes([node_id], [operator], [(b"", 0)], [bytes(32)])
    _send(w3, call, sender)


def _play_history(w3: Web3, core: Core, spec: LatSpec, lat: LatContracts, avs: Avs) -> None:
    """The scripted history, in order: deposits, delegations, stakes, queued withdrawals, price
    updates, operator splits, the AVS's rewards, late deposits.

    A price update moves the token's price source first, as a real one follows its source, so
    that the refresh a stale deposit makes keeps the prices."""
    owner = core.account(DEPLOYER)
    ltm, oracle = lat.ltm, lat.oracle
    for account, amounts in spec.deposits:
        _deposit(w3, core, lat.lt, account, amounts)
    for node_id, operator in spec.delegate_before_staking.items():
        delegate_node(w3, ltm, node_id, core.account(operator), owner)
    for node_id, amounts in spec.stakes:
        assets = [core.tokens[s].address for s in amounts]
        raw = [units(a, TOKENS[s].decimals) for s, a in amounts.items()]
        _send(w3, ltm.functions.stakeAssetsToNode(node_id, assets, raw), owner)
    for node_id, operator in spec.delegate_after_staking.items():
        delegate_node(w3, ltm, node_id, core.account(operator), owner)
    if spec.undelegate:
        _send(w3, ltm.functions.undelegateNodes(list(spec.undelegate)), owner)
    for symbol, amount in spec.queued.items():
        raw_amount = units(amount, TOKENS[symbol].decimals)
        _send(w3, ltm.functions.queueAssets(core.tokens[symbol].address, raw_amount), owner)
    for symbol, price in spec.manager_price_updates.items():
        _move_rate_feed(w3, lat, symbol, price, owner)
        _send(w3, ltm.functions.updatePrice(core.tokens[symbol].address, price), owner)
    for symbol, price in spec.oracle_price_updates.items():
        _move_rate_feed(w3, lat, symbol, price, owner)
        _send(w3, oracle.functions.updateRate(core.tokens[symbol].address, price), owner)
    for symbol, price in spec.feed_updates.items():
        _send(w3, core.feeds[symbol].functions.setAnswer(price), owner)
    for operator, bips in spec.operator_splits.items():
        set_operator_split(w3, core, core.account(operator), avs.address, bips)
    if spec.reward[0]:
        _submit_rewards(w3, core, spec, avs)
    for account, amounts in spec.late_deposits:
        _deposit(w3, core, lat.lt, account, amounts)


def _move_rate_feed(w3: Web3, lat: LatContracts, symbol: str, price: int, owner: str) -> None:
    if symbol in lat.rate_feeds:
        _send(w3, lat.rate_feeds[symbol].functions.setAnswer(price), owner)


def _lat_manifest(
    w3: Web3, core: Core, spec: LatSpec, lat: LatContracts, avs: str
) -> dict[str, Any]:
    """The LAT's manifest as LAT deployment repositories publish them (tokens keyed "0",
    "1", ...; ``proxyAdminAddress``, ``roles``, millisecond timestamps), with this service's two
    optional members ``eigenlayer`` and ``priceFeeds`` (token to its ETH feed)."""
    impl, proxy = lat.impl, lat.proxy
    token_symbols = [symbol for symbol, _, _ in spec.tokens]
    base_asset = (
        BEACON_CHAIN_ETH if spec.base_asset == "ETH" else core.tokens[spec.base_asset].address
    )
    owner = core.account(DEPLOYER)
    deployed = proxy["LiquidToken"]
    return {
        "proxyAddress": lat.lt.address,
        "implementationAddress": impl["LiquidToken"].address,
        "proxyAdminAddress": lat.proxy_admin.address,
        "name": spec.name,
        "symbol": spec.symbol,
        "avsAddress": avs,
        "baseAsset": base_asset,
        "chainId": w3.eth.chain_id,
        "maxNodes": spec.max_nodes,
        "deploymentBlock": deployed.block,
        "deploymentTimestamp": deployed.timestamp * 1000,
        "contractDeployments": {
            "implementation": {
                "liquidTokenManager": impl["LiquidTokenManager"].ref(),
                "stakerNodeCoordinator": impl["StakerNodeCoordinator"].ref(),
                "stakerNode": impl["StakerNode"].ref(),
                "tokenRegistryOracle": impl["TokenRegistryOracle"].ref(),
            },
            "proxy": {
                "liquidTokenManager": proxy["LiquidTokenManager"].ref(),
                "stakerNodeCoordinator": proxy["StakerNodeCoordinator"].ref(),
                "tokenRegistryOracle": proxy["TokenRegistryOracle"].ref(),
            },
        },
        "roles": {"admin": owner, "pauser": owner, "priceUpdater": owner, "deployer": owner},
        "tokens": {
            str(i): {"address": core.tokens[s].address, "strategy": core.strategies[s].address}
            for i, s in enumerate(token_symbols)
        },
        "eigenlayer": {
            "delegationManager": core.delegation_manager.address,
            "strategyManager": core.strategy_manager.address,
            "rewardsCoordinator": core.rewards_coordinator.address,
            "avsDirectory": core.avs_directory.address,
        },
        "priceFeeds": {
            core.tokens[s].address: core.feeds[s].address for s in token_symbols if s in core.feeds
        },
    }


# The members of a published manifest that the service's own (array) format leaves out.
PUBLISHED_ONLY = ("proxyAdminAddress", "deploymentTimestamp", "roles")


def service_manifest(published: dict[str, Any]) -> dict[str, Any]:
    """A published manifest in the format the service's ``lat_import`` has read so far
    (chain.md's first section): tokens as a list, no roles, proxy admin or timestamps."""
    manifest = {k: v for k, v in published.items() if k not in PUBLISHED_ONLY}
    manifest["contractDeployments"] = {
        part: {name: {"address": r["address"], "block": r["block"]} for name, r in refs.items()}
        for part, refs in published["contractDeployments"].items()
    }
    manifest["tokens"] = manifest_tokens(published)
    return manifest


def manifest_tokens(manifest: dict[str, Any]) -> list[dict[str, str]]:
    """A manifest's tokens in order, whether a list or an object keyed "0", "1", ..."""
    tokens = manifest["tokens"]
    if isinstance(tokens, dict):
        return [tokens[key] for key in sorted(tokens, key=int)]
    return list(tokens)


def _submit_rewards(w3: Web3, core: Core, spec: LatSpec, avs: Avs) -> None:
    """The AVS's first submission: ``spec.reward`` over the LAT's strategies (multiplier 1e18
    each), for REWARDS_DURATION from 00:00 UTC of the day (D0)."""
    symbol, amount = spec.reward
    token = core.tokens[symbol]
    raw = units(amount, TOKENS[symbol].decimals)
    strategies = _strategies_and_multipliers(core, [(s, WAD) for s, _, _ in spec.tokens])
    start = utc_day(_latest_timestamp(w3))
    avs.submit(
        w3, core, token.address, raw, (strategies, token.address, raw, start, REWARDS_DURATION)
    )


def _strategies_and_multipliers(
    core: Core, weights: Sequence[tuple[str, int]]
) -> list[tuple[str, int]]:
    """(strategy, multiplier) of each (token symbol, multiplier), in ascending address order as
    EigenLayer wants them."""
    pairs = [(core.strategies[symbol].address, multiplier) for symbol, multiplier in weights]
    return sorted(pairs, key=lambda pair: int(pair[0], 16))


def set_operator_split(w3: Web3, core: Core, operator: str, avs: str, bips: int) -> None:
    """The operator sets its split for the AVS (RewardsCoordinator.setOperatorAVSSplit)."""
    call = core.rewards_coordinator.functions.setOperatorAVSSplit(operator, avs, bips)
    _send(w3, call, operator)


# ----- the AVSs' days -----


@dataclass
class World:
    """What the AVSs' days act on: the core, each LAT's AVS (by symbol) and S, 00:00 UTC of the
    day before the first scripted day."""

    core: Core
    avss: dict[str, Avs]
    base_day: int


def play_day(w3: Web3, world: World, day: int) -> None:
    """Day ``day`` of ``REGISTRATIONS``, ``DEREGISTRATIONS``, ``SPLIT_CHANGES`` and
    ``SUBMISSIONS``, in that order (day 0: D0, after the LATs)."""
    core = world.core
    for when, symbol, operator, restaked in REGISTRATIONS:
        if when == day:
            strategies = [core.strategies[s].address for s in restaked]
            world.avss[symbol].register(w3, core, core.account(operator), strategies)
    for when, symbol, operator in DEREGISTRATIONS:
        if when == day:
            world.avss[symbol].deregister(w3, core, core.account(operator))
    for when, symbol, operator, bips in SPLIT_CHANGES:
        if when == day:
            avs = world.avss[symbol].address
            set_operator_split(w3, core, core.account(operator), avs, bips)
    for submission in SUBMISSIONS:
        if submission.day == day:
            _make_submission(w3, world, submission)


def _make_submission(w3: Web3, world: World, submission: Submission) -> None:
    core = world.core
    token = core.tokens[submission.token]
    decimals = decimals_of(submission.token)
    strategies = _strategies_and_multipliers(core, submission.strategies)
    start, duration = world.base_day + submission.start * DAY, submission.days * DAY
    if submission.kind == OPERATOR_DIRECTED:
        rewards = sorted(
            (
                (core.account(operator), units(amount, decimals))
                for operator, amount in submission.operator_rewards
            ),
            key=lambda reward: int(reward[0], 16),  # EigenLayer wants operators ascending
        )
        directed = (strategies, token.address, rewards, start, duration, submission.description)
        total = sum(amount for _, amount in rewards)
        avs = world.avss[submission.lat]
        avs.submit_operator_directed(w3, core, token.address, total, directed)
        return
    amount = units(submission.amount, decimals)
    plain = (strategies, token.address, amount, start, duration)
    if submission.kind == AVS_REWARDS:
        world.avss[submission.lat].submit(w3, core, token.address, amount, plain)
        return
    owner = core.account(DEPLOYER)  # the coordinator's owner
    rc = core.rewards_coordinator
    _send(w3, token.functions.mint(owner, amount), owner)
    _send(w3, token.functions.approve(rc.address, amount), owner)
    _send(w3, rc.functions.createRewardsForAllSubmission([plain]), owner)


def refresh_prices(w3: Web3, core: Core, manifests: Sequence[dict[str, Any]]) -> None:
    """Each LAT's price updater refreshes its prices from their sources
    (TokenRegistryOracle.updateAllPricesIfNeeded, a no-op while they are fresh)."""
    updater = core.account(DEPLOYER)
    for manifest in manifests:
        address = manifest["contractDeployments"]["proxy"]["tokenRegistryOracle"]["address"]
        oracle = contract(w3, "TokenRegistryOracle", address).functions
        _send(w3, oracle.updateAllPricesIfNeeded(), updater)
        if oracle.arePricesStale().call():
            raise DevnetError(f"{manifest['symbol']}: prices still stale after a refresh")


# ----- public entry points -----


def deploy_devnet(
    rpc_url: str,
    *,
    multicall: bool = True,
    variant: str = MAINNET_V1,
    published: bool = False,
    quiet_days: int = 0,
    on_day: Callable[[int, list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]]:
    """Deploy the shared EigenLayer, tokens and the DEMO_LATS with the contracts of
    ``variant`` (``VARIANTS``: Mainnet v1 by default, or the older ``"v1.0.2"`` shape), and play
    the AVSs' days (the module's docstring); return the LATs' manifests, in the service's array
    format unless ``published`` (the format deployment repositories publish, see
    ``_lat_manifest``). With ``multicall=False`` Multicall3 is not installed (the chain gets no
    helper contract).

    The node must be at or before D0, its first day: start it at
    ``devnet_genesis(quiet_days)``; a chain later than D0 raises DevnetError. ``on_day(day,
    manifests)`` (the manifests as returned)
    (days after D0) is called after each scripted day's transactions, and after every run of at
    most QUIET_DAYS_PER_CALL quiet days, so that a caller can look at the chain day by day."""
    if quiet_days < 0:
        raise DevnetError(f"quiet_days must be 0 or more, not {quiet_days}")
    w3 = connect(rpc_url)
    first_day = devnet_genesis(quiet_days)
    _open_day(w3, first_day)
    core = deploy_core(w3, multicall=multicall)
    stake_outside(w3, core)
    avss = {spec.symbol: deploy_avs(w3, core, spec) for spec in DEMO_LATS}
    manifests = [
        deploy_lat(w3, core, spec, avss[spec.symbol], variant=variant) for spec in DEMO_LATS
    ]
    owner = core.account(DEPLOYER)
    reward = REWARD_TOKEN
    token = _deploy(w3, "TestERC20", owner, reward.name, reward.symbol, reward.decimals)
    core.tokens[reward.symbol] = contract(w3, "TestERC20", token.address)
    world = World(core, avss, base_day=first_day + quiet_days * DAY)
    play_day(w3, world, 0)

    handed = manifests if published else [service_manifest(m) for m in manifests]

    def after(day: int) -> None:
        if on_day is not None:
            on_day(day, handed)

    _quiet_days(w3, first_day, quiet_days, after)
    for day in range(1, SCRIPTED_DAYS + 1):
        _open_day(w3, world.base_day + day * DAY)
        play_day(w3, world, day)
        after(quiet_days + day)
    _follow_wall_clock(w3)
    if VARIANTS[variant].price_sources:
        refresh_prices(w3, core, manifests)
    return handed


ETH_USD_PRICE = 3_000 * 10**8  # the demo's ETH/USD feed: $3,000.00, 8 decimals as Chainlink's


def deploy_eth_usd_feed(rpc_url: str, *, answer: int = ETH_USD_PRICE) -> str:
    """A Chainlink-style ETH / USD feed (8 decimals) on the devnet, for `/yields`' tvlUsd
    (the service's ETH_USD_FEED_<chainId>); returns its address."""
    w3 = connect(rpc_url)
    owner = Web3.to_checksum_address(w3.eth.accounts[DEPLOYER])
    return _deploy(w3, "PriceFeed", owner, 8, "ETH / USD", answer).address


def write_manifests(manifests: Sequence[dict[str, Any]], directory: str | Path) -> list[Path]:
    """Write each manifest to ``<directory>/<symbol>.json``; return the paths."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for manifest in manifests:
        path = out / f"{manifest['symbol']}.json"
        path.write_text(json.dumps(manifest, indent=2) + "\n")
        paths.append(path)
    return paths


def _liquid_token(w3: Web3, manifest: dict[str, Any]) -> Contract:
    return contract(w3, "LiquidToken", manifest["proxyAddress"])


def _deposit_event(lt: Contract) -> Any:
    return lt.events.Deposit() if lt.functions.legacyEvents().call() else lt.events.AssetDeposited()


def make_deposits(
    rpc_url: str,
    manifest: dict[str, Any],
    sender_index: int,
    assets: Sequence[str],
    amounts: Sequence[int],
    *,
    receiver: str | None = None,
) -> dict[str, Any]:
    """Mint, approve and deposit ``amounts`` (raw units) of ``assets`` from anvil account
    ``sender_index`` into the LAT. Returns ``{"txHash", "blockNumber", "shares"}``.

    Assets must be TestERC20 tokens (their ``mint`` is an open faucet). A revert raises web3's
    ContractCustomError (decode it with ``decode_error``).
    """
    w3 = connect(rpc_url)
    sender = Web3.to_checksum_address(w3.eth.accounts[sender_index])
    lt = _liquid_token(w3, manifest)
    checksummed = [Web3.to_checksum_address(a) for a in assets]
    for asset, amount in zip(checksummed, amounts, strict=True):
        token = contract(w3, "TestERC20", asset)
        _send(w3, token.functions.mint(sender, amount), sender)
        _send(w3, token.functions.approve(lt.address, amount), sender)
    receipt = _send(
        w3, lt.functions.deposit(checksummed, list(amounts), receiver or sender), sender
    )
    events = _deposit_event(lt).process_receipt(receipt, errors=DISCARD)
    return {
        "txHash": "0x" + receipt["transactionHash"].hex().removeprefix("0x"),
        "blockNumber": receipt["blockNumber"],
        "shares": [event["args"]["shares"] for event in events],
    }


def deposit_many(
    rpc_url: str,
    manifest: dict[str, Any],
    n_events: int,
    *,
    sender_index: int = BENCH_SENDER,
    asset: str | None = None,
    amount: int | None = None,
    per_tx: int = 100,
) -> list[str]:
    """Emit ``n_events`` deposit events (AssetDeposited, or Deposit for a legacy LAT) quickly:
    each transaction deposits the same asset ``per_tx`` times, one event per entry.

    ``asset`` defaults to the manifest's first token, ``amount`` (raw units per event) to one
    whole token. Returns the transaction hashes, in order.
    """
    w3 = connect(rpc_url)
    sender = Web3.to_checksum_address(w3.eth.accounts[sender_index])
    lt = _liquid_token(w3, manifest)
    token = contract(w3, "TestERC20", asset or manifest_tokens(manifest)[0]["address"])
    if amount is None:
        amount = 10 ** token.functions.decimals().call()
    _send(w3, token.functions.mint(sender, amount * n_events), sender)
    _send(w3, token.functions.approve(lt.address, 2**256 - 1), sender)

    hashes: list[str] = []
    gas: int | None = None
    remaining = n_events
    while remaining > 0:
        batch = min(per_tx, remaining)
        call = lt.functions.deposit([token.address] * batch, [amount] * batch, sender)
        if gas is None or batch != per_tx:
            # Later batches of the same shape write warm storage only: never cost more.
            estimate = call.estimate_gas({"from": sender})
            if batch == per_tx:
                gas = estimate * 6 // 5
            tx_hash = call.transact({"from": sender, "gas": estimate * 6 // 5})
        else:
            tx_hash = call.transact({"from": sender, "gas": gas})
        hashes.append("0x" + tx_hash.hex().removeprefix("0x"))
        remaining -= batch
    _receipt(w3, hashes[-1])
    # Auto-mining mines each transaction as it arrives; check that every one succeeded.
    with w3.batch_requests() as batch_requests:
        for sent in hashes:
            batch_requests.add(w3.eth.get_transaction_receipt(HexStr(sent)))
        # Formatted receipts; the annotation says raw RPC responses.
        receipts = cast(list[TxReceipt], batch_requests.execute())
    failed = [h for h, r in zip(hashes, receipts, strict=True) if r["status"] != 1]
    if failed:
        raise DevnetError(f"{len(failed)} deposit transactions reverted, first {failed[0]}")
    return hashes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devchain.devnet", description=__doc__)
    parser.add_argument("--rpc-url", default="http://127.0.0.1:8545")
    parser.add_argument("--out", help="directory to write <symbol>.json manifests into")
    parser.add_argument(
        "--no-multicall", action="store_true", help="do not install Multicall3 on the chain"
    )
    parser.add_argument(
        "--variant", choices=sorted(VARIANTS), default=MAINNET_V1, help="the LAT contracts' shape"
    )
    parser.add_argument(
        "--published",
        action="store_true",
        help="manifests as deployment repositories publish them (tokens keyed by index, roles)",
    )
    parser.add_argument(
        "--quiet-days",
        type=int,
        default=0,
        help="days without transactions between D0 and the scripted days (the node must start "
        "at devnet_genesis of as many)",
    )
    args = parser.parse_args(argv)
    manifests = deploy_devnet(
        args.rpc_url,
        multicall=not args.no_multicall,
        variant=args.variant,
        published=args.published,
        quiet_days=args.quiet_days,
    )
    if args.out:
        for path in write_manifests(manifests, args.out):
            print(path)
    else:
        print(json.dumps(manifests, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
