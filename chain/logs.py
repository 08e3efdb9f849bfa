"""The chain gateway's logs: eth_getLogs over block ranges (a range the node refuses is split),
one answer shared by the LATs that read the same range (`LogWindow`), the LAT's activity decoded,
and the helpers that scan ranges and read the next one ahead while the caller stores this one."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any, Generic, TypeVar

from eth_utils import to_checksum_address

from chain.abi import event, function
from chain.activity import ActivityLog, activity_decoder, activity_topics
from chain.calls import CallReads
from chain.errors import ChainCallReverted, ChainUnavailable
from chain.results import LogRef

T = TypeVar("T")


def _decoded(
    raw_logs: Iterable[dict[str, Any]], decode: Callable[[dict[str, Any]], T], what: str
) -> list[T]:
    """Decode each log the node did not mark removed; a malformed answer is the node's fault."""
    try:
        return [decode(log) for log in raw_logs if not log.get("removed")]
    except Exception as exc:
        raise ChainUnavailable(f"the node answered malformed {what}") from exc


class LogWindow:
    """Raw logs of some addresses over a block range, read once and handed out in parts
    (Gateway.shared_logs)."""

    def __init__(
        self,
        addresses: frozenset[str],
        topics: list[Any],
        first: int,
        last: int,
        logs: list[dict[str, Any]],
    ) -> None:
        self.addresses, self.topics, self.first, self.last = addresses, topics, first, last
        self.logs = logs
        self.served: set[frozenset[str]] = set()
        self.lock = threading.Lock()

    def take(
        self, address: str | list[str], topics: list[Any], from_block: int, to_block: int
    ) -> list[dict[str, Any]] | None:
        """The logs of a read this window answers, or None for the node to answer it."""
        wanted = frozenset(a.lower() for a in ([address] if isinstance(address, str) else address))
        if topics != self.topics or not (self.first <= from_block <= to_block <= self.last):
            return None
        with self.lock:
            if not wanted <= self.addresses or wanted in self.served:
                return None
            self.served.add(wanted)
        return [
            log
            for log in self.logs
            if log["address"].lower() in wanted
            and from_block <= int(log["blockNumber"], 16) <= to_block
        ]


class LogReads(CallReads):
    """Logs of one chain; `_window` is the shared answer in use, `_beacons` each coordinator's
    node beacon once known."""

    _window: LogWindow | None
    _beacons: dict[str, str]

    @contextlib.contextmanager
    def shared_logs(
        self, *, addresses: Iterable[str], topics: list[Any], from_block: int, to_block: int
    ) -> Iterator[None]:
        """Within the block, `logs` answers a read of some of `addresses` with these `topics`
        inside from_block..to_block from one eth_getLogs over all of them, made here: one
        round trip for every LAT of a chain. Each set of addresses is answered from it once; a
        second read of the same set (a retry after logs and headers disagreed) and any other
        read go to the node."""
        addresses = list(addresses)
        raw = self._get_logs(addresses, topics, from_block, to_block)
        self._window = LogWindow(
            frozenset(a.lower() for a in addresses), topics, from_block, to_block, raw
        )
        try:
            yield
        finally:
            self._window = None

    def logs(
        self, *, address: str | list[str], topics: list[Any], from_block: int, to_block: int
    ) -> list[dict[str, Any]]:
        window = self._window
        if window is not None:
            shared = window.take(address, topics, from_block, to_block)
            if shared is not None:
                return shared
        return self._get_logs(address, topics, from_block, to_block)

    def _get_logs(
        self, address: str | list[str], topics: list[Any], from_block: int, to_block: int
    ) -> list[dict[str, Any]]:
        result = self.transport.request(
            "eth_getLogs",
            [
                {
                    "address": address,
                    "topics": topics,
                    "fromBlock": hex(from_block),
                    "toBlock": hex(to_block),
                }
            ],
        )
        if not isinstance(result, list):
            raise ChainUnavailable(
                "the node answered eth_getLogs with something that is not a list"
            )
        return result

    def activity_logs(
        self,
        *,
        proxy: str,
        manager: str,
        coordinator: str,
        oracle: str = "",
        beacon: str = "",
        nodes: dict[str, int] | None = None,
        from_block: int,
        to_block: int,
    ) -> list[ActivityLog]:
        """Every event of extensions.md's table from the LAT's contracts (its proxies, the
        node `beacon` and the staker `nodes` {address: id}), in one eth_getLogs, in chain
        order; logs of other events or contracts are left out.

        A node created in the range (`NodeCreated`) or a beacon registered in it
        (`NodeImplementationChanged`) emits in the range too: their logs are read by one more
        eth_getLogs over those addresses only, from the block that made them. `nodes` gains
        the nodes created (the caller's next range reads them with the others)."""
        nodes = {} if nodes is None else nodes
        contracts = {
            "LiquidToken": proxy,
            "LiquidTokenManager": manager,
            "StakerNodeCoordinator": coordinator,
            "TokenRegistryOracle": oracle,
        }
        addresses = [a for a in (proxy, manager, coordinator, oracle, beacon) if a]
        raw_logs = self.logs(
            address=[*addresses, *nodes],
            topics=[activity_topics()],
            from_block=from_block,
            to_block=to_block,
        )
        decode = activity_decoder(contracts, nodes=nodes, beacon=beacon)
        logs = [log for log in _decoded(raw_logs, decode, "event logs") if log is not None]
        known = {a.lower() for a in [*addresses, *nodes]}
        found: dict[str, int] = {}  # address: the block it was made in
        created: dict[str, int] = {}
        new_beacon = ""
        for log in logs:
            if log.type == "nodeCreated" and log.args["node"].lower() not in known:
                created[log.args["node"]] = log.args["nodeId"]
                found.setdefault(log.args["node"], log.block_number)
            elif log.type == "nodeImplementationChanged" and not beacon:
                new_beacon = log.args["beacon"]
                found.setdefault(new_beacon, log.block_number)
        if found:
            more = self.logs(
                address=list(found),
                topics=[activity_topics()],
                from_block=min(found.values()),
                to_block=to_block,
            )
            decode = activity_decoder({}, nodes=created, beacon=new_beacon)
            logs += [log for log in _decoded(more, decode, "event logs") if log is not None]
        nodes.update(created)
        return sorted(logs, key=lambda log: log.key)

    def node_beacon(self, coordinator: str, *, block: int) -> str:
        """The coordinator's staker node beacon (`upgradeableBeacon()`) at `block`, "" when it
        has none yet or no such function; remembered once known (upstream upgrades the beacon
        it registered first, never replaces it)."""
        known = self._beacons.get(coordinator.lower())
        if known:
            return known
        fn = function("StakerNodeCoordinator", "upgradeableBeacon")
        try:
            data = self.call(coordinator, fn.encode(), block=block)
            (beacon,) = fn.decode(data)
        except (ChainCallReverted, ChainUnavailable):
            return ""
        if int(beacon, 16) == 0:
            return ""
        beacon = to_checksum_address(beacon)
        self._beacons[coordinator.lower()] = beacon
        return beacon

    def event_logs(
        self,
        *,
        contract: str,
        name: str,
        address: str | list[str],
        from_block: int,
        to_block: int,
        topics: list[Any] | None = None,
    ) -> list[LogRef]:
        """Logs of one event, decoded (indexed values first, then data values); `address`
        may list several contracts emitting the same event."""
        ev = event(contract, name)
        raw_logs = self.logs(
            address=address,
            topics=[ev.topic, *(topics or [])],
            from_block=from_block,
            to_block=to_block,
        )

        def decode(log: dict[str, Any]) -> LogRef:
            return LogRef(
                block_number=int(log["blockNumber"], 16),
                block_hash=log["blockHash"],
                tx_hash=log["transactionHash"],
                log_index=int(log["logIndex"], 16),
                address=to_checksum_address(log["address"]),
                values=ev.decode(log["topics"][1:], log["data"]),
            )

        return _decoded(raw_logs, decode, f"{name} logs")


def scan_ranges(
    fetch: Callable[[int, int], T], *, start: int, end: int, max_range: int
) -> Iterator[tuple[int, int, T]]:
    """`fetch(first, last)` over the blocks start..end in ranges of at most `max_range`, as
    (first, last, result). A range the node refuses is halved until it is accepted (a node that
    cannot be reached is not retried here); after each success the range grows back."""
    span = max_range
    while start <= end:
        last = min(start + span - 1, end)
        try:
            result = fetch(start, last)
        except ChainUnavailable as exc:
            if not exc.refused or span == 1:
                raise
            span = max(span // 2, 1)
            continue
        yield start, last, result
        start = last + 1
        span = min(span * 2, max_range)


def read_ahead(items: Iterator[T], *, depth: int = 1) -> Iterator[T]:
    """The items of `items`, each produced by a worker thread while the consumer handles the
    one before (at most `depth` ahead), so that the node's next answer is read and decoded
    while the consumer stores the last one. An exception of the producer is raised at its
    place in the sequence. When the consumer stops early, the producer stops before its next
    item (a read in flight runs to its end or its timeout, in the background). `items` must
    not touch the database: it runs in another thread, on none of the consumer's connections."""
    batches = read_ahead_gathered(items, depth=depth)
    try:
        for batch in batches:
            yield from batch
    finally:
        batches.close()


def read_ahead_gathered(
    items: Iterator[T],
    *,
    depth: int = 1,
    weight: Callable[[T], int] = lambda _: 1,
    limit: int = 1,
    ahead: int | None = None,
) -> Generator[list[T], None, None]:
    """`read_ahead`, the items handed over in lists: the next item (waited for), then those
    the producer has already made after it (never waited for), while their total `weight`
    stays within `limit`. A consumer slower than the producer so takes several items at once
    (a backfill stores several ranges in one transaction); one as fast takes them one by one,
    as soon as each is made. With `ahead`, the producer also waits while the items it made
    and the consumer has not taken weigh that much (the memory a backfill holds)."""
    producer = _Producer(items, depth=depth, weight=weight, ahead=ahead)
    threading.Thread(target=producer.run, name="read-ahead", daemon=True).start()
    held: _Answer | None = None  # an answer taken from the queue for the next list
    try:
        while True:
            done, value = held or producer.answers.get()
            if done:
                if value is not None:
                    raise value
                return
            producer.wanted.release()  # the next item is read while this one is handled
            batch, held = producer.gather(value, limit)
            producer.taken(batch)
            yield batch
    finally:
        producer.stopped.set()


_Answer = tuple[bool, Any]  # (done, the item) or (done, the exception raised or None)


class _Producer(Generic[T]):
    """read_ahead_gathered's worker: makes the items in its thread, one per permit of `wanted`
    (the consumer's), and while the items made and not taken weigh less than `ahead`."""

    def __init__(
        self, items: Iterator[T], *, depth: int, weight: Callable[[T], int], ahead: int | None
    ) -> None:
        self.items, self.weight, self.ahead = items, weight, ahead
        self.answers: queue.Queue[_Answer] = queue.Queue()
        self.wanted = threading.Semaphore(depth)  # one permit per item the consumer will take
        self.stopped = threading.Event()
        self.made = threading.Condition()
        self.waiting = 0  # the weight of the items made and not yet taken

    def run(self) -> None:
        try:
            while self._may_make():
                item = next(self.items)
                with self.made:
                    self.waiting += self.weight(item)
                self.answers.put((False, item))
        except StopIteration:
            self.answers.put((True, None))
        except BaseException as exc:
            self.answers.put((True, exc))  # raised by the consumer

    def _may_make(self) -> bool:
        while not self.wanted.acquire(timeout=0.1):
            if self.stopped.is_set():
                return False
        with self.made:
            while self.ahead is not None and self.waiting >= self.ahead:
                if self.stopped.is_set():
                    break
                self.made.wait(0.1)
        return not self.stopped.is_set()

    def gather(self, first: T, limit: int) -> tuple[list[T], _Answer | None]:
        """`first` and the items already made after it, within `limit`; and the answer taken
        that did not fit, if any (the end, an exception, or an item over the limit)."""
        batch, total = [first], self.weight(first)
        while True:
            try:
                answer = self.answers.get_nowait()
            except queue.Empty:
                return batch, None
            done, value = answer
            if done or total + self.weight(value) > limit:
                return batch, answer
            self.wanted.release()
            batch.append(value)
            total += self.weight(value)

    def taken(self, batch: list[T]) -> None:
        with self.made:
            self.waiting -= sum(map(self.weight, batch))
            self.made.notify()
