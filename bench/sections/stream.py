"""Section `stream`: STREAMS clients of GET /stream/events (raw sockets, one asyncio loop) on the
Procfile's stream process beside its web and follower, on anvil: confirmation (as in `freshness`)
to the message at every client, memory per open stream, WSGI reads' p99 without and with them.

The reads are loaded without the streams and with them open and idle (keep-alives only) in
turn, ROUNDS times, ending without: without, with, without, ..., with, without (the streams
closed and opened anew between), and the target compares the median p99 of each side: one
disturbed run (see its "other processes") does not decide it. Three rounds left the ratio of
the same code anywhere from 1.05x to 1.44x (single runs' p99 from 19 to 88 ms without the
streams): six halve what one disturbed run can move the medians. One run of each
(before, with, after) left the ratio to the machine's drift: on the shared 2-core machine the
same code measured anywhere from 0.75x to 3.9x; in turn, both sides see the same drift (as the
`api` section interleaves its pages). Each run's row gives the CPU of the stream process, of
web, and of every other process (PostgreSQL, Redis, the follower, and whatever else the machine
runs: a large figure there says the run was disturbed). The clients run in the bench process;
1,000 idle ones cost it under 0.01 of a core (the keep-alives they read), which is not
subtracted: it is load a real client side would put elsewhere, and it is small.

Confirmation to message is measured twice on the same open streams, as `freshness` measures
its listing: A with the follower polling the head, then W with the follower started again with
WS_URL_31337 set (anvil's WebSocket endpoint: new heads pushed). W's target is `freshness`'s W
target, confirmation to client p95 at most 0.5 s, held at every one of the STREAMS clients (no
target of its own is set for the stream with a WebSocket node); A keeps its 2 s."""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import requests

from bench import PYTHON, load
from bench.context import HOST, NO_LIMIT, Context, Processes, SectionResult, wait_until
from bench.sections.freshness import CHAIN_ID, CONFIRMATIONS, SPACING, _deposit, follow_websocket
from devchain.anvil import free_port

TITLE = "Live stream: 1,000 open streams, confirmation to every client, memory, WSGI reads"
STREAMS, DEPOSITS, CONNECTING = 1000, 20, 50  # open streams, deposits, streams opened at once
ROUNDS = 6  # the reads without and with the streams in turn: without, with, ..., without
TARGET_P95, MAX_P99_FACTOR, WAIT = 2.0, 1.2, 30.0  # WAIT: s after the last confirmation
TARGET_P95_W = 0.5  # s, run W (WS_URL set): as `freshness`'s W, confirmation to the API
WRK = "p50 {0.p50_ms:.2f} ms, p99 {0.p99_ms:.2f} ms, {0.rps:,.0f} req/s; CPU cores: stream {1:.3f}"
CPU = ", web {0:.2f}, other processes {1:.2f}"  # others: PostgreSQL, Redis, the follower, the rest
QUANTILES = "p50 {:.2f}, p95 {:.2f}, max {:.2f}"


class Client:
    """One stream: when each deposit's message came (`seen`) and its outbox row was written."""

    written: dict[str, str] = {}

    def __init__(self) -> None:
        self.ready, self.seen, self.error = asyncio.Event(), {}, ""

    async def run(self, port: int) -> None:
        writer = None
        try:
            reader, writer = await asyncio.open_connection(HOST, port)
            writer.write(f"GET /stream/events HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
            head, buffer = (await reader.readuntil(b"\r\n\r\n")).lower(), b""
            if not head.startswith(b"http/1.1 200") or b"transfer-encoding: chunked" not in head:
                raise RuntimeError(head.split(b"\r\n")[0].decode())
            while True:  # the body, chunked: a size line, the data, CRLF
                size = int((await reader.readline()).strip() or b"0", 16)
                if not size:
                    raise RuntimeError("the server ended the stream")
                data, now = (await reader.readexactly(size + 2))[:-2], time.monotonic()
                *messages, buffer = (buffer + data).split(b"\n\n")
                for message in messages:  # the first is the comment ": connected"
                    self.ready.set()
                    if b"\nevent: deposit\ndata: " in message:  # id:, event:, data: lines
                        payload = json.loads(message.split(b"\ndata: ")[1])
                        tx = payload["data"]["transactionHash"].lower()
                        self.seen.setdefault(tx, now)
                        self.written.setdefault(tx, payload["createdAt"])  # the wall clock
        except (OSError, RuntimeError, ValueError, asyncio.IncompleteReadError) as exc:
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.ready.set()
            if writer is not None:  # cancelled or failed: the stream closes
                writer.close()


def run(ctx: Context, result: SectionResult) -> None:
    with ctx.devnet("stream", synced=True) as (rpc_url, manifest, db_url):
        env = {**ctx.env, "PATH": f"{Path(PYTHON).parent}{os.pathsep}{os.environ['PATH']}"}
        env |= {"DATABASE_URL": db_url, "RPC_URL": rpc_url, "LOG_LEVEL": "WARNING"}
        env |= {f"CHAIN_CONFIRMATIONS_{CHAIN_ID}": str(CONFIRMATIONS), "DJANGO_DEBUG": "false"}
        env |= {"DJANGO_SETTINGS_MODULE": "latsite.settings", "STREAM_KEEPALIVE_SECONDS": "5"}
        env |= {"ALLOWED_HOSTS": "127.0.0.1,localhost", "RATE_LIMIT_ANON": NO_LIMIT}
        env |= {"PORT": str(load_port := free_port()), "STREAM_PORT": str(port := free_port())}
        env |= {"RATE_LIMIT_KEYED": NO_LIMIT, "STREAM_MAX_PER_IP": str(5 * STREAMS)}
        with Processes(ctx.log) as procs:
            procs.procfile(("web",), {**env, "WEB_CONCURRENCY": "2"})
            procs.procfile(("follower", "stream"), env)  # no WEB_CONCURRENCY: one uvicorn process
            read = f"http://{HOST}:{load_port}/lat/{manifest['proxyAddress']}/events"
            websocket = lambda: follow_websocket(procs, env, rpc_url)  # noqa: E731
            fig = asyncio.run(_measure(ctx, procs, port, (rpc_url, manifest), read, websocket))
            fig["log"] = procs.tail("stream")
    _report(result, fig)


async def _measure(
    ctx: Context, procs: Processes, port: int, chain: tuple, read: str, websocket: Callable
) -> dict:
    def until(ready, timeout: float):
        return asyncio.to_thread(wait_until, ready, timeout, procs.dead, 0.05)

    def rss_kib() -> int:
        return int(Path(f"/proc/{pid}/status").read_text().split("VmRSS:")[1].split()[0])

    def reads() -> load.LoadResult:  # wrk after a warm-up, as the `api` section loads a page
        load.run([read], duration=ctx.args.warmup, connections=ctx.args.connections)
        web = procs.procs["web"].pid
        with load.CpuMonitor(lambda: {"stream": [pid], "web": load.children_of(web)}) as cpu:
            wrk = load.run([read], duration=ctx.args.duration, connections=ctx.args.connections)
        wrk[0].cpu = cpu.usage
        return wrk[0]

    for url in (read, f"http://{HOST}:{port}/health"):
        if not await until(lambda u=url: requests.get(u, timeout=5).ok, 90):
            raise RuntimeError(f"{url} did not answer 200 within 90 s")
    pid, warm = procs.procs["stream"].pid, Client()  # a stream and a deposit first, not counted
    task = asyncio.create_task(warm.run(port))
    tx = (await asyncio.to_thread(_deposit, chain))[0]
    if not await until(lambda: tx in warm.seen or warm.error, 120) or warm.error:
        raise RuntimeError(f"the warm-up deposit did not reach its stream {warm.error}")
    task.cancel()
    fig: dict = {"rss": [rss_kib()], "errors": [], "runs": {}}
    fig["runs"]["no streams 1"] = await asyncio.to_thread(reads)
    for round_ in range(1, ROUNDS + 1):
        clients, tasks, began = [Client() for _ in range(STREAMS)], [], time.monotonic()
        for k in range(0, STREAMS, CONNECTING):  # CONNECTING at once, each until its 1st message
            tasks += [asyncio.create_task(c.run(port)) for c in clients[k : k + CONNECTING]]
            await asyncio.gather(*(c.ready.wait() for c in clients[k : k + CONNECTING]))
        fig.setdefault("open s", time.monotonic() - began)
        await asyncio.sleep(2)
        if round_ == 1:
            fig["rss"].append(rss_kib())
        # Before the deposits: the follower's work after them (state, snapshots) would load the
        # machine during the reads.
        fig["runs"][f"streams open {round_}"] = await asyncio.to_thread(reads)
        if round_ == 1:
            await _deliveries(fig, chain, clients, until)
            await _websocket_run(fig, chain, clients, until, websocket)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        fig["errors"] += [c.error for c in clients if c.error]
        await asyncio.sleep(5)  # the follower's work after the deposits done, the streams closed
        fig["runs"][f"no streams {round_ + 1}"] = await asyncio.to_thread(reads)
    return fig


async def _deliveries(fig: dict, chain: tuple, clients: list[Client], until) -> None:
    """DEPOSITS deposits made SPACING s apart: when each reached each client (`pairs`), and its
    outbox row was written (`written`), from its confirmation."""
    deposits = []
    for _ in range(DEPOSITS):  # SPACING s apart, or as fast as they go
        made = asyncio.gather(asyncio.to_thread(_deposit, chain), asyncio.sleep(SPACING))
        deposits.append((await made)[0])
    await until(lambda: all(d[0] in c.seen for c in clients for d in deposits), WAIT)
    fig["pairs"] = [[c.seen[tx] - at for c in clients if tx in c.seen] for tx, _, at in deposits]
    offset = time.time() - time.monotonic()  # the wall clock of createdAt on the monotonic one
    stamp = lambda x: datetime.fromisoformat(x).timestamp() if x else math.nan  # noqa: E731
    fig["written"] = [stamp(Client.written.get(tx)) - offset - at for tx, _, at in deposits]


async def _websocket_run(fig: dict, chain: tuple, clients: list[Client], until, websocket) -> None:
    """Run W (`fig["W"]`): the follower again with WS_URL set, a warm-up deposit at every client
    (not counted), then the DEPOSITS as in _deliveries."""
    await asyncio.to_thread(websocket)
    tx = (await asyncio.to_thread(_deposit, chain))[0]
    await until(lambda: all(tx in c.seen for c in clients), 120)
    await asyncio.sleep(2)  # the follower's work after it (state, snapshot) done
    await _deliveries(fig.setdefault("W", {}), chain, clients, until)


def _cpu(w: load.LoadResult) -> str:
    assert w.cpu is not None
    return WRK.format(w, w.cpu.cores("stream")) + CPU.format(w.cpu.cores("web"), w.cpu.other_cores)


def _quantiles(run: dict) -> tuple[list[float], list[float], list[float], int]:
    """p50, p95, max of confirmation to message, to the outbox row, from it to the message;
    the (client, deposit) pairs received."""
    pairs = [x for one in run["pairs"] for x in one]
    streamed = [x - at for one, at in zip(run["pairs"], run["written"], strict=True) for x in one]
    p, pw, ps = (
        [load.percentile(x or [math.nan], q) for q in (0.5, 0.95, 1)]
        for x in [pairs, run["written"], streamed]
    )
    return p, pw, ps, len(pairs)


def _report(result: SectionResult, fig: dict) -> None:
    p, pw, ps, received = _quantiles(fig)
    p_w, pw_w, ps_w, received_w = _quantiles(fig["W"])
    missed, missed_w = STREAMS * DEPOSITS - received, STREAMS * DEPOSITS - received_w
    (before, opened), runs = fig["rss"], fig["runs"]
    loaded = [w for k, w in runs.items() if k.startswith("streams open")]
    without = [w for k, w in runs.items() if k.startswith("no streams")]
    ratio = load.merge(loaded).p99_ms / load.merge(without).p99_ms  # medians of the p99s
    result.columns = ["figure", "value"]
    result.rows = [
        ["streams", f"{STREAMS:,} opened in {fig['open s']:.1f} s, {len(fig['errors'])} failed"],
        ["A, head polled: confirmation to message, s", QUANTILES.format(*p)],
        ["  of which to the outbox row", QUANTILES.format(*pw)],
        ["  and from it to the client", QUANTILES.format(*ps)],
        ["(client, deposit) messages", f"{received:,} received, {missed:,} missed"],
        ["W, WS_URL set: confirmation to message, s", QUANTILES.format(*p_w)],
        ["  of which to the outbox row", QUANTILES.format(*pw_w)],
        ["  and from it to the client", QUANTILES.format(*ps_w)],
        ["(client, deposit) messages, W", f"{received_w:,} received, {missed_w:,} missed"],
        ["stream process RSS", f"{before / 1024:.1f} MiB, {opened / 1024:.1f} MiB streams open"],
        ["RSS per open stream", f"{(opened - before) / STREAMS:.1f} KiB"],
        *([f"WSGI reads, {k}", _cpu(w)] for k, w in runs.items()),
    ]
    result.failures += [f"WSGI reads, {k}: {w.errors} errors" for k, w in runs.items() if w.errors]
    result.failures += [f"{missed} (client, deposit) message(s) never arrived"] if missed else []
    if missed_w:
        result.failures.append(f"W: {missed_w} (client, deposit) message(s) never arrived")
    if errors := fig["errors"]:
        result.failures.append(f"{len(errors)} stream(s) failed: {errors[0]}; log:\n{fig['log']}")
    for run, q, lost, limit in (("", p, missed, TARGET_P95), ("W: ", p_w, missed_w, TARGET_P95_W)):
        result.target(
            f"{run}p95 at most {limit:g} s from confirmation to the message at every client",
            q[1],
            f"p95 {q[1]:.2f} s, {lost} missed",
            at_most=limit,
            also=not lost,
        )
    # Each run with the streams beside the mean of the runs just before and after it.
    apart = ", ".join(
        f"{w.p99_ms / ((a.p99_ms + b.p99_ms) / 2):.2f}x"
        for w, a, b in zip(loaded, without, without[1:], strict=False)
    )
    result.target(
        f"WSGI reads' p99 with the streams open within {MAX_P99_FACTOR:g}x of without",
        ratio,
        f"{ratio:.2f}x: the median p99 of the {len(loaded)} runs with the streams over that of "
        f"the {len(without)} without, run in turn (each with its neighbours: {apart})",
        at_most=MAX_P99_FACTOR,
    )
    result.notes.append(
        f"No stream filter; deposits {SPACING:g} s apart; nearest rank. WSGI reads: wrk on GET "
        "/lat/{latETH}/events (web: 2 gthread workers); keep-alives every 5 s (default 15)."
    )
