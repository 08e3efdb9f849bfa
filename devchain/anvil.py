"""Start (or reuse) a local anvil node from ``node_modules/.bin/anvil``, on 127.0.0.1 only.

``start_anvil()`` returns an :class:`AnvilNode` with ``.url`` and ``.stop()``; the node
auto-mines one block per transaction, with 30 funded accounts of the default test mnemonic.
``start_anvil(timestamp=...)`` starts its chain in the past (the devnet needs days of history:
``devchain.devnet.devnet_genesis()``). ``python -m devchain.anvil [--port N] [--state FILE]
[--timestamp T]`` runs one in the foreground.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
ANVIL_BIN = REPO_ROOT / "node_modules" / ".bin" / "anvil"
HOST = "127.0.0.1"
DEFAULT_CHAIN_ID = 31337
DEFAULT_ACCOUNTS = 30  # the devnet's actors use accounts 0 to 25
DEFAULT_GAS_LIMIT = 300_000_000
DEFAULT_MNEMONIC = "test test test test test test test test test test test junk"


class AnvilError(RuntimeError):
    """anvil is missing, did not come up, or a reused node is on another chain."""


@dataclass
class AnvilNode:
    url: str
    port: int
    chain_id: int
    process: subprocess.Popen[bytes] | None = None  # None: a node we reused, not ours to stop
    log_path: Path | None = None
    _stopped: bool = field(default=False, repr=False)

    @property
    def owned(self) -> bool:
        return self.process is not None

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the node if this process started it (a reused node is left running)."""
        if self._stopped or self.process is None:
            return
        self._stopped = True
        if self.process.poll() is None:
            # SIGINT lets anvil dump --state before exiting.
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        if self.log_path is not None:
            with contextlib.suppress(OSError):
                self.log_path.unlink()

    def __enter__(self) -> AnvilNode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def find_anvil() -> Path:
    """The anvil binary of the npm package: the platform package's executable when present
    (no node wrapper in between, so signals reach anvil itself), else ``.bin/anvil``."""
    arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower(), platform.machine().lower()
    )
    native = REPO_ROOT / "node_modules" / "@foundry-rs" / f"anvil-{sys.platform}-{arch}" / "bin"
    if (native / "anvil").exists():
        return native / "anvil"
    if not ANVIL_BIN.exists():
        raise AnvilError(f"{ANVIL_BIN} not found: run `npm install --no-audit --no-fund`")
    return ANVIL_BIN


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def rpc_chain_id(url: str, timeout: float = 1.0) -> int | None:
    """The node's chain id, or None when nothing answers JSON-RPC at ``url``."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return int(json.load(response)["result"], 16)
    except (OSError, ValueError, KeyError, urllib.error.URLError):
        return None


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """Linux: have the kernel stop anvil if the Python process that started it dies."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def start_anvil(
    *,
    port: int | None = None,
    chain_id: int = DEFAULT_CHAIN_ID,
    accounts: int = DEFAULT_ACCOUNTS,
    gas_limit: int = DEFAULT_GAS_LIMIT,
    state_file: str | os.PathLike[str] | None = None,
    timestamp: int | None = None,
    reuse: bool = True,
    timeout: float = 10.0,
) -> AnvilNode:
    """Start anvil on 127.0.0.1 and wait until it answers ``eth_chainId``.

    ``port=None`` picks a free port. With a given port where a node already answers, that node
    is reused when ``reuse`` (its chain id must match) instead of starting a second one.
    ``state_file`` is anvil's ``--state``: loaded at start when it exists, written at stop, so a
    demo chain survives restarts. ``timestamp`` is anvil's ``--timestamp``, the genesis block's
    time, from which the chain's clock runs on; only for a new chain (anvil would mine a loaded
    state's next blocks before its last one), and ignored for a node that is reused.
    """
    if port is not None:
        running = _running_node(port, chain_id, reuse=reuse)
        if running is not None:
            return running
    port = port if port is not None else free_port()
    args = _anvil_args(port, chain_id, accounts, gas_limit, state_file, timestamp)
    process, log_path = _spawn(args)
    node = AnvilNode(
        url=f"http://{HOST}:{port}",
        port=port,
        chain_id=chain_id,
        process=process,
        log_path=log_path,
    )
    atexit.register(node.stop)
    _wait_until_up(node, process, log_path, timeout)
    return node


def _running_node(port: int, chain_id: int, *, reuse: bool) -> AnvilNode | None:
    """The node already answering on ``port``, to reuse; None when the port is free."""
    url = f"http://{HOST}:{port}"
    running = rpc_chain_id(url)
    if running is None:
        return None
    if not reuse:
        raise AnvilError(f"port {port} is taken by a node on chain {running}")
    if running != chain_id:
        raise AnvilError(f"node at {url} is on chain {running}, expected {chain_id}")
    return AnvilNode(url=url, port=port, chain_id=running)


def _anvil_args(
    port: int,
    chain_id: int,
    accounts: int,
    gas_limit: int,
    state_file: str | os.PathLike[str] | None,
    timestamp: int | None,
) -> list[str]:
    args = [
        str(find_anvil()),
        "--host", HOST,
        "--port", str(port),
        "--chain-id", str(chain_id),
        "--accounts", str(accounts),
        "--mnemonic", DEFAULT_MNEMONIC,
        "--gas-limit", str(gas_limit),
        "--quiet",
    ]  # fmt: skip
    if state_file is not None:
        args += ["--state", os.fspath(state_file)]
    if timestamp is not None:
        args += ["--timestamp", str(timestamp)]
    return args


def _spawn(args: list[str]) -> tuple[subprocess.Popen[bytes], Path]:
    """Start anvil with its output going to a temporary log file; return the process and log."""
    log_fd, log_name = tempfile.mkstemp(prefix="anvil-", suffix=".log")
    with os.fdopen(log_fd, "wb") as log:
        process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO_ROOT,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
    return process, Path(log_name)


def _wait_until_up(
    node: AnvilNode, process: subprocess.Popen[bytes], log_path: Path, timeout: float
) -> None:
    """Wait until the node answers with its chain id; stop it and raise if it exits or is late."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = log_path.read_text(errors="replace")[-2000:]
            node.stop()
            raise AnvilError(f"anvil exited with {process.returncode}: {output}")
        if rpc_chain_id(node.url, timeout=0.5) == node.chain_id:
            return
        time.sleep(0.05)
    node.stop()
    raise AnvilError(f"anvil did not answer at {node.url} within {timeout} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devchain.anvil", description=__doc__)
    parser.add_argument("--port", type=int, default=8545)
    parser.add_argument("--chain-id", type=int, default=DEFAULT_CHAIN_ID)
    parser.add_argument("--state", dest="state_file", help="anvil --state file to load and dump")
    parser.add_argument("--timestamp", type=int, help="the genesis block's time (a new chain)")
    args = parser.parse_args(argv)
    node = start_anvil(
        port=args.port,
        chain_id=args.chain_id,
        state_file=args.state_file,
        timestamp=args.timestamp,
        reuse=False,
    )
    print(f"anvil listening at {node.url} (chain {node.chain_id}); Ctrl-C stops it", flush=True)
    try:
        while node.process is not None and node.process.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        node.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
