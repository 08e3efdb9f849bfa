"""The head follower: deposits and state within a block or two of the chain, not a beat later.

One `Follower` per chain polls the node's head every HEAD_POLL_INTERVAL seconds, and at once
when a WebSocket node of the chain (WS_URL_<chainId>) announces a new head
(chain/heads.py; without one, or while it is down, polling alone). When the head
at the chain's confirmation depth moves, it runs the deposits step of the refresh pipeline
(sync/refresh.py: every event of the LAT's contracts) for every LAT of that chain, then the
state and then the snapshot steps of exactly the LATs whose events changed (any new event,
or some removed by a reorg: a pause, a price update or a transfer moves the state as a deposit
does). State that moves without an event of the LAT's contracts (EigenLayer's share values)
is read by the beat's state job. The steps
run under the job runner (sync/jobs.py), so the follower shares checkpoints, locks, reorg
handling and sync status with the beat jobs, which stay as the safety net; a write drops the
cached read documents and the ETags through the generation token, as any refresh does.

Only one follower per chain works at a time: it holds the role `lat_follow:<chainId>` (an
advisory lock held by its database session: core/leadership.py) for as long as it runs, and a
second one waits for it. A follower that stops without dying (SIGSTOP, a paused VM) loses the
role within FOLLOWER_LEASE_SECONDS (the server ends its idle session), the standby takes it on
its next try, and the frozen one, when it wakes, writes nothing more (its statements are fenced
to the ended session) and stands by. A node that goes away is retried with
exponential backoff from the second failure in a row (up to HEAD_POLL_MAX_BACKOFF seconds). The
last head acted on is kept on the follower (`seen`, `seen_hash`); a new block at the same height
(a reorg) is acted on too.
Anything else (the database gone, a bug) ends the follower with the exception: the process
manager restarts it, and the lock, held by the database session, is released with the session.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from activity.indexer import lat_log_addresses
from chain.activity import activity_topics
from chain.errors import ChainUnavailable
from chain.gateway import gateway_for
from chain.heads import HeadSubscription, backoff, ws_url_for
from core.leadership import Leadership, LeadershipLost, leadership
from deposits.selectors import shared_log_range
from lats.checks import chain_confirmations
from lats.models import Lat
from sync.jobs import DONE, LAGGING, SKIPPED, run_step
from sync.refresh import DEPOSITS, SNAPSHOT, STATE

logger = logging.getLogger(__name__)

FOLLOW_LOCK = "lat_follow"


def _wait_either(stop: threading.Event, wake: threading.Event, seconds: float) -> None:
    """Wait up to `seconds` for either event (checked every 50 ms: a stop is never late by
    more than that)."""
    deadline = time.monotonic() + seconds
    while not (stop.is_set() or wake.is_set()):
        left = deadline - time.monotonic()
        if left <= 0:
            return
        wake.wait(min(left, 0.05))


def _moved(deposits: dict[str, Any]) -> bool:
    """Whether the indexing step stored or removed any event of the LAT's contracts (a
    deposit, a transfer, a pause, a price update, a node delegated, ...): each may move its
    state, so the state is read again now rather than at the next beat."""
    keys = ("new", "removed", "events", "events_removed")
    return any(deposits.get(key) for key in keys)


@dataclass
class Follower:
    chain_id: int
    poll_interval: float = field(default_factory=lambda: float(settings.HEAD_POLL_INTERVAL))
    max_backoff: float = field(default_factory=lambda: float(settings.HEAD_POLL_MAX_BACKOFF))
    seen: int | None = None  # the last confirmed head this follower acted on
    seen_hash: str | None = None  # and its hash
    failures: int = 0  # polls in a row that found the node unreachable
    _held: Leadership | None = field(default=None, repr=False)  # the role, while held

    def tick(self) -> list[dict[str, Any]]:
        """Act on the confirmed head once; returns the results of the steps it ran.

        It acts whenever the confirmed head is another block than the one it last acted on, by
        number or by hash: a reorg may put other blocks at the same heights. When a LAT's
        deposits step was skipped (a beat job held its lock) or found the node lagging (also
        what a chain cut back below the stored checkpoint looks like), the head is not recorded,
        so that the next poll tries again rather than waiting for another block."""
        head = gateway_for(self.chain_id).head(confirmations=chain_confirmations(self.chain_id))
        if self.seen is not None and (head.number, head.hash) == (self.seen, self.seen_hash):
            return []
        first = self.seen is None
        results: list[dict[str, Any]] = []
        settled = True
        changed: list[int] = []
        lats = list(Lat.objects.filter(chain_id=self.chain_id).order_by("id"))
        with self._shared_logs(lats, head.number):
            for lat in lats:
                deposits = run_step(DEPOSITS, lat.id)
                results.append(deposits)
                settled = settled and deposits["status"] not in (SKIPPED, LAGGING)
                if first or (deposits["status"] == DONE and _moved(deposits)):
                    changed.append(lat.id)
        # Every LAT's deposits first: no LAT's deposits wait for another's state and snapshot.
        for step in (STATE, SNAPSHOT):
            results += [run_step(step, lat_id) for lat_id in changed]
        if settled:
            self.seen, self.seen_hash = head.number, head.hash
        logger.debug("chain %s: acted on head %s (%s)", self.chain_id, head.number, head.hash)
        return results

    def _shared_logs(self, lats: list[Lat], head: int) -> contextlib.AbstractContextManager:
        """One eth_getLogs over the contracts of every LAT of the chain that is near the head,
        for the blocks one of them has not indexed: each LAT's deposits step is answered from
        it (Gateway.shared_logs) instead of asking the node on its own."""
        gateway = gateway_for(self.chain_id)
        addresses, first = shared_log_range(
            lats=lats,
            head=head,
            max_range=settings.LOG_BLOCK_RANGE,
            addresses_of=lambda lat: lat_log_addresses(lat, gateway, block=head),
        )
        if not addresses or first > head:
            return contextlib.nullcontext()
        return gateway.shared_logs(
            addresses=addresses, topics=[activity_topics()], from_block=first, to_block=head
        )

    def run(self, stop: threading.Event) -> None:
        """Follow until `stop` is set, holding the chain's follower role (waiting for it, and
        standing by again when it is lost: core/leadership.py)."""
        while not stop.is_set():
            try:
                with leadership(
                    FOLLOW_LOCK, self.chain_id, lease=settings.FOLLOWER_LEASE_SECONDS
                ) as held:
                    if held is not None:
                        logger.info("following chain %s", self.chain_id)
                        self._held = held
                        try:
                            self._follow(stop)
                        finally:
                            self._held = None
                        return
            except LeadershipLost as exc:
                logger.warning("chain %s: the follower's role is lost (%s); standing by",
                               self.chain_id, exc)  # fmt: skip
                self.seen = self.seen_hash = None
                continue
            logger.info("chain %s has a follower already; waiting", self.chain_id)
            stop.wait(self.poll_interval)

    def _follow(self, stop: threading.Event) -> None:
        url = ws_url_for(self.chain_id, urls=settings.WS_URLS)
        if url is None:
            self._poll(stop, threading.Event())
            return
        wake = threading.Event()
        heads = HeadSubscription(url, wake, max_backoff=self.max_backoff).start()
        try:
            self._poll(stop, wake)
        finally:
            heads.stop()

    def _poll(self, stop: threading.Event, wake: threading.Event) -> None:
        """Act on the head every poll interval, or as soon as `wake` is set (a new head)."""
        while not stop.is_set():
            if self._held is not None:
                self._held.keep_working()  # the work session outlives a quiet chain
            try:
                self.tick()
                delay = self.poll_interval
                self.failures = 0
            except ChainUnavailable as exc:
                # One failure (a read at a block a reorg just took away) is retried at the
                # usual pace; from the second in a row the wait doubles, up to max_backoff.
                self.failures += 1
                delay = backoff(self.failures, base=self.poll_interval, cap=self.max_backoff)
                logger.warning(
                    "chain %s: node unavailable (%s); retry in %ss", self.chain_id, exc, delay
                )
            _wait_either(stop, wake, delay)
            wake.clear()
