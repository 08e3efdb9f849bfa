"""Section `stream`: STREAMS clients of GET /stream/events (raw sockets, one asyncio loop) on the
Procfile's stream process beside its web and follower, on anvil: confirmation (as in `freshness`)
to the message at every client, memory per open stream, WSGI reads' p99 without and with them.

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
TARGET_P95, MAX_P99_FACTOR, WAIT = 2.0, 1.2, 30.0  # WAIT: s after the last confirmation
TARGET_P95_W = 0.5  # s, run W (WS_URL set): as `freshness`'s W, confirmation to the API
WRK = "p50 {0.p50_ms:.2f} ms, p99 {0.p99_ms:.2f} ms, {0.rps:,.0f} req/s; stream CPU {1:.2f} cores"
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
        with load.CpuMonitor(lambda: {"stream": [pid]}) as cpu:
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
    fig = {"rss": [rss_kib()], "runs": {"no streams (before)": await asyncio.to_thread(reads)}}
    clients, tasks, began = [Client() for _ in range(STREAMS)], [], time.monotonic()
    for k in range(0, STREAMS, CONNECTING):  # CONNECTING at a time, each until its first message
        tasks += [asyncio.create_task(c.run(port)) for c in clients[k : k + CONNECTING]]
        await asyncio.gather(*(c.ready.wait() for c in clients[k : k + CONNECTING]))
    fig["open s"] = time.monotonic() - began
    await asyncio.sleep(2)
    fig["rss"].append(rss_kib())
    # Before the deposits: the follower's work after them (state, snapshots) would load the
    # machine during the reads.
    fig["runs"]["streams open"] = await asyncio.to_thread(reads)
    fig |= await _confirmations(clients, chain, until)
    # Run W: the follower again with WS_URL set, a warm-up deposit at every client, not counted.
    await asyncio.to_thread(websocket)
    tx = (await asyncio.to_thread(_deposit, chain))[0]
    await until(lambda: all(tx in c.seen for c in clients), 120)
    await asyncio.sleep(2)  # the follower's work after it (state, snapshot) done
    fig["W"] = await _confirmations(clients, chain, until)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    fig["errors"] = [c.error for c in clients if c.error]
    await asyncio.sleep(5)  # the follower's work after the deposits done
    fig["runs"]["no streams (after)"] = await asyncio.to_thread(reads)
    return fig


async def _confirmations(clients: list[Client], chain: tuple, until) -> dict:
    """DEPOSITS deposits SPACING s apart: each one's seconds from its confirmation to its
    message at each client that got it (`pairs`), and to its outbox row (`written`)."""
    deposits = []
    for _ in range(DEPOSITS):  # SPACING s apart, or as fast as they go
        made = asyncio.gather(asyncio.to_thread(_deposit, chain), asyncio.sleep(SPACING))
        deposits.append((await made)[0])
    await until(lambda: all(d[0] in c.seen for c in clients for d in deposits), WAIT)
    pairs = [[c.seen[tx] - at for c in clients if tx in c.seen] for tx, _, at in deposits]
    offset = time.time() - time.monotonic()  # the wall clock of createdAt on the monotonic one
    stamp = lambda x: datetime.fromisoformat(x).timestamp() if x else math.nan  # noqa: E731
    written = [stamp(Client.written.get(tx)) - offset - at for tx, _, at in deposits]
    return {"pairs": pairs, "written": written}


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
    loaded, without = runs["streams open"], [runs[f"no streams ({k})"] for k in ("before", "after")]
    ratio = loaded.p99_ms / load.merge(without).p99_ms  # over the mean of before and after
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
        *([f"WSGI reads, {k}", WRK.format(w, w.cpu.cores("stream"))] for k, w in runs.items()),
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
    apart = " and ".join(f"{loaded.p99_ms / w.p99_ms:.2f}x" for w in without)
    result.target(
        f"WSGI reads' p99 with the streams open within {MAX_P99_FACTOR:g}x of without",
        ratio,
        f"{ratio:.2f}x the mean of the runs before and after ({apart} each)",
        at_most=MAX_P99_FACTOR,
    )
    result.notes.append(
        f"No stream filter; deposits {SPACING:g} s apart; nearest rank. WSGI reads: wrk on GET "
        "/lat/{latETH}/events (web: 2 gthread workers); keep-alives every 5 s (default 15)."
    )
