"""The rewards APY against the chain (decisions.md, "Rewards APY"): on the devnet's days of
history (devchain/devnet.py: a registration that starts mid-window, a split that changes
mid-window, an operator-directed submission, an operator whose stake must not count because it
never registered, another that deregisters, a token that nothing values, rewards for every staker
that are not counted), every window of latETH equals what this test computes by hand from what
web3 reads: the AVS's events (`get_logs`), each day's state block (a walk over the headers), and
at that block every registered operator's `operatorShares`, the ServiceManager's restaked
strategies, the LAT's nodes, their delegation and withdrawable shares, the LAT's balances and
prices. A per-day table (payments, weights, splits, values) is built first; the windows follow.

A reorg that removes a submission moves the days it paid back: the APY is the same as before it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from web3 import Web3

from lats.models import Lat
from metrics.models import AvsEvent, RewardSubmission

pytestmark = [pytest.mark.django_db, pytest.mark.chain]
DEVNET = pytest.mark.parametrize("devnet_kind", ["multicall3", "plain"], indirect=True)
DAY = 86_400
BIPS = Decimal(10_000)
EPOCH = date(1970, 1, 1)
WINDOWS = {"current": 1, "trailing7d": 7, "trailing30d": 30, "trailing3m": 91, "trailing6m": 182}


def plain(value):
    """A decoded struct as a plain tuple (web3 may give named members), nested ones too."""
    if hasattr(value, "values"):
        value = tuple(value.values())
    if isinstance(value, list | tuple):
        return tuple(plain(v) for v in value)
    return value


def day_of(timestamp: int) -> date:
    return EPOCH + timedelta(days=timestamp // DAY)


def start_of(day: date) -> int:
    return (day - EPOCH).days * DAY


@dataclass
class Row:
    """One day of the table: what each submission paid the LAT's nodes (tokens), valued."""

    block: int
    payments: list[tuple[str, str, Decimal]] = field(default_factory=list)  # (kind, token, tokens)
    earned: Decimal = Decimal(0)  # ETH
    value: Decimal = Decimal(0)  # the LAT's TVL, ETH
    unvalued: set[str] = field(default_factory=set)


class ChainBook:
    """What web3 reads of latETH's AVS, kept to compute each day by hand."""

    def __init__(self, chain, manifest: dict) -> None:
        self.w3, self.chain = chain.w3, chain
        self.manifest = manifest
        el = manifest["eigenlayer"]
        self.avs = manifest["avsAddress"]
        self.rc = chain.contract("RewardsCoordinator", el["rewardsCoordinator"])
        self.dm = chain.contract("DelegationManager", el["delegationManager"])
        self.directory = chain.contract("AVSDirectory", el["avsDirectory"])
        self.service = chain.contract("ServiceManager", self.avs)
        proxies = manifest["contractDeployments"]["proxy"]
        self.lt = chain.contract("LiquidToken", manifest["proxyAddress"])
        self.ltm = chain.contract("LiquidTokenManager", proxies["liquidTokenManager"]["address"])
        self.nodes = chain.contract(
            "StakerNodeCoordinator", proxies["stakerNodeCoordinator"]["address"]
        )
        head = self.w3.eth.block_number
        self.times = [self.w3.eth.get_block(n)["timestamp"] for n in range(head + 1)]
        logs = {"from_block": 0, "argument_filters": {"avs": self.avs}}
        self.registrations = [
            (e["args"]["operator"], e["args"]["status"], self.times[e["blockNumber"]])
            for e in self.directory.events.OperatorAVSRegistrationStatusUpdated.get_logs(**logs)
        ]
        self.splits = sorted(
            (e["args"]["activatedAt"], e["args"]["operator"], e["args"]["newOperatorAVSSplitBips"])
            for e in self.rc.events.OperatorAVSSplitBipsSet.get_logs(**logs)
        )
        self.submissions = [
            ("avs", plain(e["args"]["rewardsSubmission"]))
            for e in self.rc.events.AVSRewardsSubmissionCreated.get_logs(**logs)
        ] + [
            ("directed", plain(e["args"]["operatorDirectedRewardsSubmission"]))
            for e in self.rc.events.OperatorDirectedAVSRewardsSubmissionCreated.get_logs(**logs)
        ]

    # --- rules, as decisions.md words them ---

    def state_block(self, day: date) -> int:
        return max(n for n, t in enumerate(self.times) if t < start_of(day))

    def registered(self, operator: str, day: date) -> bool:
        """Registered before `day` began and not deregistered before it ended."""
        status = [(t, s) for op, s, t in self.registrations if op == operator]
        before = [s for t, s in status if t < start_of(day)]
        during = [s for t, s in status if start_of(day) <= t < start_of(day) + DAY]
        return bool(before) and before[-1] == 1 and 0 not in during

    def split(self, operator: str, day: date, block: int) -> int:
        own = [bips for at, op, bips in self.splits if op == operator and day_of(at) < day]
        if own:
            return own[-1]
        return self.rc.functions.defaultOperatorSplitBips().call(block_identifier=block)

    @staticmethod
    def paying(submission: tuple, day: date) -> bool:
        """Both kinds carry (strategies, token, amount or operators, start, duration, ...)."""
        start, duration = submission[3], submission[4]
        return day_of(start) < day <= day_of(start + duration)

    def restaked(self, operator: str, block: int) -> set[str] | None:
        try:
            answer = self.service.functions.getOperatorRestakedStrategies(operator).call(
                block_identifier=block
            )
        except Exception:
            return None
        return set(answer)

    def operators(self) -> set[str]:
        return {op for op, _, _ in self.registrations}

    # --- one day, by hand ---

    def row(self, day: date) -> Row:
        block = self.state_block(day)
        at = {"block_identifier": block}
        row = Row(block)
        tokens = self.ltm.functions.getSupportedTokens().call(**at)
        strategies = [self.ltm.functions.getTokenStrategy(t).call(**at) for t in tokens]
        infos = {t: self.ltm.functions.getTokenInfo(t).call(**at) for t in tokens}
        nodes = []  # (operator, {strategy: withdrawable shares})
        staked = dict.fromkeys(tokens, 0)
        for node in self.nodes.functions.getAllNodes().call(**at):
            withdrawable = self.dm.functions.getWithdrawableShares(node, strategies).call(**at)[0]
            for token, strategy, shares in zip(tokens, strategies, withdrawable, strict=True):
                if shares:
                    strat = self.chain.contract("Strategy", strategy)
                    staked[token] += strat.functions.sharesToUnderlyingView(shares).call(**at)
            operator = self.dm.functions.delegatedTo(node).call(**at)
            if int(operator, 16):
                nodes.append((operator, dict(zip(strategies, withdrawable, strict=True))))
        held = self.lt.functions.balanceAssets(tokens).call(**at)
        queued = self.lt.functions.balanceQueuedAssets(tokens).call(**at)
        prices = {}  # ETH per raw unit: an ETH LAT's price of the token
        for i, token in enumerate(tokens):
            decimals, price_per_unit = infos[token][0], infos[token][1]
            prices[token] = Decimal(price_per_unit) / 10**18 / Decimal(10) ** decimals
            row.value += (held[i] + queued[i] + staked[token]) * prices[token]
        for kind, submission in self.submissions:
            if not self.paying(submission, day):
                continue
            token = submission[1]
            paid = (
                self._avs_part(submission, day, block, nodes)
                if kind == "avs"
                else self._directed_part(submission, day, block, nodes)
            )
            if token not in prices:
                row.unvalued.add(token)
                continue
            row.payments.append((kind, token, paid))
            row.earned += paid * prices[token]
        return row

    def _avs_part(self, submission, day, block, nodes) -> Decimal:
        pairs, _, amount, _, duration = submission
        multipliers = {Web3.to_checksum_address(s): m for s, m in pairs}
        per_day = Decimal(amount) / (Decimal(duration) / DAY)
        total = Decimal(0)
        for operator in self.operators():
            if not self.registered(operator, day):
                continue
            restaked = self.restaked(operator, block)
            for strategy, multiplier in multipliers.items():
                if restaked is None or strategy in restaked:
                    shares = self.dm.functions.operatorShares(operator, strategy).call(
                        block_identifier=block
                    )
                    total += multiplier * Decimal(shares)
        earned = Decimal(0)
        for operator, shares in nodes:
            if not total or not self.registered(operator, day):
                continue
            restaked = self.restaked(operator, block)
            weight = sum(
                (
                    m * Decimal(shares.get(s, 0))
                    for s, m in multipliers.items()
                    if restaked is None or s in restaked
                ),
                Decimal(0),
            )
            keeps = (BIPS - self.split(operator, day, block)) / BIPS
            earned += per_day * weight / total * keeps
        return earned

    def _directed_part(self, submission, day, block, nodes) -> Decimal:
        pairs, _, operator_rewards, start, duration, _ = submission
        multipliers = {Web3.to_checksum_address(s): m for s, m in pairs}
        days = [day_of(start) + timedelta(days=n) for n in range(1, duration // DAY + 1)]
        earned = Decimal(0)
        for operator, amount in operator_rewards:
            registered_days = [d for d in days if self.registered(operator, d)]
            own = [shares for op, shares in nodes if op == operator]
            if not registered_days or not own or not self.registered(operator, day):
                continue
            total = sum(
                (
                    m
                    * Decimal(
                        self.dm.functions.operatorShares(operator, s).call(block_identifier=block)
                    )
                    for s, m in multipliers.items()
                ),
                Decimal(0),
            )
            weight = sum(
                (m * Decimal(shares.get(s, 0)) for shares in own for s, m in multipliers.items()),
                Decimal(0),
            )
            keeps = (BIPS - self.split(operator, day, block)) / BIPS
            earned += Decimal(amount) / len(registered_days) * weight / total * keeps
        return earned


def by_hand(book: ChainBook, last: date, first: date) -> tuple[dict[str, str], dict[date, Row]]:
    table = {
        d: book.row(d) for d in (last - timedelta(days=n) for n in range((last - first).days + 1))
    }

    def percent(earned: Decimal, value: Decimal) -> Decimal:
        return 365 * earned / value * 100 if value else Decimal(0)

    def fmt(value: Decimal) -> str:
        return format(value.quantize(Decimal("0.0001")).normalize(), "f")

    out = {}
    for window, length in WINDOWS.items():
        rows = [r for d, r in table.items() if last - timedelta(days=length) < d]
        out[window] = fmt(percent(sum(r.earned for r in rows), sum(r.value for r in rows)))
    daily = [
        percent(r.earned, r.value)
        for d, r in table.items()
        if last - timedelta(days=30) < d and r.value
    ]
    out["avg30d"] = fmt(sum(daily, Decimal(0)) / len(daily))
    return out, table


@DEVNET
def test_every_window_equals_the_chain_computed_by_hand(synced, api):
    chain = synced
    manifest = chain.lat("latETH")
    book = ChainBook(chain, manifest)
    head = chain.w3.eth.get_block("latest")["timestamp"]
    last = day_of(head) - timedelta(days=1)
    first = day_of(book.times[manifest["deploymentBlock"]]) + timedelta(days=1)
    want, table = by_hand(book, last, first)
    # The table exercises every case it is meant to.
    kinds = {kind for row in table.values() for kind, _, _ in row.payments}
    assert kinds == {"avs", "directed"}
    assert any(row.unvalued for row in table.values())  # RWD
    apys = api.get(f"/lat/{manifest['proxyAddress']}?withRewards=true").json()["apys"]
    assert {w: apys[w]["apy"] for w in want} == want
    assert Decimal(apys["current"]["apy"]) > 0
    gaps = Lat.objects.get(proxy_address=manifest["proxyAddress"]).apy_gaps
    assert any(g.startswith("rewards in token") for g in gaps)
    assert any("RewardsSubmissionForAllCreated" in g for g in gaps)


def apys_of(api, manifest: dict) -> dict[str, str]:
    body = api.get(f"/lat/{manifest['proxyAddress']}?withRewards=true").json()["apys"]
    return {window: values["apy"] for window, values in body.items()}


def send(chain, call, sender: str) -> dict:
    receipt = chain.w3.eth.wait_for_transaction_receipt(call.transact({"from": sender}))
    assert receipt["status"] == 1
    return receipt


@pytest.mark.parametrize("devnet_kind", ["multicall3"], indirect=True)
def test_a_reorg_that_removes_a_submission_moves_its_days_back(synced, api):
    chain = synced
    manifest = chain.lat("latETH")
    before = apys_of(api, manifest)
    fork = chain.rpc("evm_snapshot")
    # The AVS (its ServiceManager, owned by account 7) pays 0.5 stETH over the last 3 complete
    # days, retroactively: start 4 days before today, whole days.
    head = chain.w3.eth.get_block("latest")["timestamp"]
    start = start_of(day_of(head) - timedelta(days=4))
    steth, strategy = manifest["tokens"][0]["address"], manifest["tokens"][0]["strategy"]
    owner = chain.account(7)
    token = chain.contract("TestERC20", steth)
    service = chain.contract("ServiceManager", manifest["avsAddress"])
    send(chain, token.functions.mint(owner, 10**18 // 2), owner)
    send(chain, token.functions.approve(service.address, 10**18 // 2), owner)
    submission = ([(strategy, 10**18)], steth, 10**18 // 2, start, 3 * DAY)
    send(chain, service.functions.createAVSRewardsSubmission([submission]), owner)
    call_command("lat_sync", "--no-progress")
    during = apys_of(api, manifest)
    book = ChainBook(chain, manifest)
    last = day_of(head) - timedelta(days=1)
    first = day_of(book.times[manifest["deploymentBlock"]]) + timedelta(days=1)
    assert {w: during[w] for w in WINDOWS} == {
        w: v for w, v in by_hand(book, last, first)[0].items() if w in WINDOWS
    }
    assert Decimal(during["trailing7d"]) > Decimal(before["trailing7d"])

    assert chain.rpc("evm_revert", fork)
    for _ in range(3):  # the chain goes on without it: other blocks at the same heights
        chain.rpc("evm_mine")
    call_command("lat_sync", "--no-progress")
    assert apys_of(api, manifest) == before
    assert not RewardSubmission.objects.filter(token=steth, amount=10**18 // 2).exists()


@pytest.mark.parametrize("devnet_kind", ["plain"], indirect=True)
def test_the_avs_events_stored_are_the_chains(synced):
    chain = synced
    for manifest in chain.manifests:
        book = ChainBook(chain, manifest) if manifest["symbol"] == "latETH" else None
        rc = chain.contract("RewardsCoordinator", manifest["eigenlayer"]["rewardsCoordinator"])
        logs = {"from_block": 0, "argument_filters": {"avs": manifest["avsAddress"]}}
        avs_kind = rc.events.AVSRewardsSubmissionCreated.get_logs(**logs)
        directed = rc.events.OperatorDirectedAVSRewardsSubmissionCreated.get_logs(**logs)
        stored = RewardSubmission.objects.filter(avs__address=manifest["avsAddress"])
        assert sorted((s.kind, s.tx_hash, int(s.amount)) for s in stored) == sorted(
            [
                ("avs", e["transactionHash"].to_0x_hex(), plain(e["args"]["rewardsSubmission"])[2])
                for e in avs_kind
            ]
            + [
                (
                    "operatorDirected",
                    e["transactionHash"].to_0x_hex(),
                    sum(a for _, a in plain(e["args"]["operatorDirectedRewardsSubmission"])[2]),
                )
                for e in directed
            ]
        )
        if book is not None:
            registrations = AvsEvent.objects.filter(
                avs__address=manifest["avsAddress"], kind=AvsEvent.Kind.REGISTRATION
            )
            assert sorted(
                (e.operator, e.value, e.block_timestamp) for e in registrations
            ) == sorted(book.registrations)
    counts = (RewardSubmission.objects.count(), AvsEvent.objects.count())
    call_command("lat_sync", "--no-progress")
    assert (RewardSubmission.objects.count(), AvsEvent.objects.count()) == counts  # nothing twice


QUIET_DAYS = 355  # with the devnet's scripted days: a year of history


def _served(api, manifests: list[dict], end: str) -> dict:
    """What a client sees of each LAT's yield: every APY window, and the daily rates."""
    out = {}
    for manifest in manifests:
        proxy = manifest["proxyAddress"]
        rates = api.get(f"/lat/{proxy}/rates", {"from": "2000-01-01", "to": end}).json()
        out[manifest["symbol"]] = (
            api.get(f"/lat/{proxy}?withRewards=true").json()["apys"],
            rates["data"],
            Lat.objects.get(proxy_address=proxy).apy_gaps,
        )
    return out


def test_a_lat_imported_after_a_year_shows_what_a_year_of_following_it_showed(
    db, settings, tmp_path, api
):
    """The devnet with a year of history: synced along the way (at the end of each run of
    quiet days and of each scripted day: the daily path), then the same chain imported afresh
    into an empty database (the backfill from an archive node): the same windows, rates and
    gaps."""
    from devchain.anvil import start_anvil
    from devchain.devnet import deploy_devnet, devnet_genesis, write_manifests

    syncs = []
    with start_anvil(timestamp=devnet_genesis(QUIET_DAYS)) as node:
        settings.RPC_URL = node.url

        def on_day(day: int, manifests: list[dict]) -> None:
            if not syncs:
                paths = write_manifests(manifests, tmp_path / "followed")
                call_command("lat_import", *map(str, paths))
            call_command("lat_sync", "--no-progress")
            syncs.append(day)

        manifests = deploy_devnet(node.url, quiet_days=QUIET_DAYS, on_day=on_day)
        call_command("lat_sync", "--no-progress")
        head = Web3(Web3.HTTPProvider(node.url)).eth.get_block("latest")["timestamp"]
        end = f"{day_of(head)}T23:59:59Z"
        followed = _served(api, manifests, end)

        from lats.models import Avs

        Lat.objects.all().delete()
        Avs.objects.all().delete()
        call_command("lat_import", *map(str, write_manifests(manifests, tmp_path / "later")))
        call_command("lat_sync", "--no-progress")
        backfilled = _served(api, manifests, end)
    assert len(syncs) == 12 + 9  # 355 quiet days in runs of 30, then 9 scripted days
    eth = followed["latETH"]
    assert Decimal(eth[0]["trailing1y"]["apy"]) > 0
    assert len(eth[1]) >= 364  # a point a day since the LAT's first day
    assert backfilled == followed
