"""JSON-RPC to one node: single requests and batches chunked at `batch_size`, each answer
checked (garbage and unreachable nodes become `ChainUnavailable`, reverts `ChainCallReverted`
with the decoded reason), and the HTTP provider, built with an explicit timeout and with web3's
retries off (one retry policy: the jobs').

Every round trip is counted and timed (core/telemetry.py) by chain id and method, never by
URL (it holds API keys)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import requests
from web3 import HTTPProvider, Web3
from web3.providers import JSONBaseProvider
from web3.types import RPCEndpoint

from chain.abi import decode_revert
from chain.errors import ChainCallReverted, ChainError, ChainUnavailable
from core.telemetry import UNKNOWN_CHAIN, RpcCall

DEFAULT_BATCH_SIZE = 100

# Messages with which nodes report a call that failed in the EVM without reverting (an invalid
# opcode, out of gas, a bad jump): aggregate3 reports those as a failed call with no data.
_EVM_FAILURES = (
    "out of gas",
    "invalid opcode",
    "invalidfeopcode",
    "opcodenotfound",
    "invalid jump",
    "stack underflow",
    "stack overflow",
    "evm error",
)


def check(response: Any, method: str) -> Any:
    """The result of one JSON-RPC response, or the ChainError it stands for."""
    if not isinstance(response, dict) or ("result" not in response and "error" not in response):
        raise ChainUnavailable(f"the node answered {method} with something that is not JSON-RPC")
    if "error" in response and response["error"] is not None:
        error = response["error"]
        data = error.get("data") if isinstance(error, dict) else None
        if isinstance(data, dict):  # some nodes nest it
            data = data.get("data")
        message = str(error.get("message", "")) if isinstance(error, dict) else str(error)
        if (isinstance(data, str) and data.startswith("0x")) or "revert" in message.lower():
            raise decode_revert(data if isinstance(data, str) else None, message=message)
        if method == "eth_call" and any(f in message.lower() for f in _EVM_FAILURES):
            raise decode_revert(None)
        raise ChainUnavailable(f"the node refused {method}: {message[:200]}", refused=True)
    return response["result"]


def hex_bytes(raw: Any, method: str) -> bytes:
    """A result that must be hex data ("0x…"), as bytes."""
    if not isinstance(raw, str) or not raw.startswith("0x"):
        raise ChainUnavailable(f"the node answered {method} with something that is not hex data")
    try:
        return bytes.fromhex(raw[2:])
    except ValueError as exc:
        raise ChainUnavailable(f"the node answered {method} with malformed hex data") from exc


def error_kind(exc: ChainError) -> str:
    """The `kind` label of a failed request: timeout, unreachable, invalid, refused, reverted."""
    if isinstance(exc, ChainCallReverted):
        return "reverted"
    cause = exc.__cause__
    if isinstance(cause, requests.Timeout | TimeoutError):
        return "timeout"
    if isinstance(cause, requests.RequestException | OSError):
        return "unreachable"
    if isinstance(exc, ChainUnavailable) and exc.refused:
        return "refused"
    return "invalid"


class Transport:
    """JSON-RPC through one `Web3`'s provider; a batch carries at most `batch_size` requests.

    `chain` labels its metrics (the chain id; "unknown" where the caller did not say)."""

    def __init__(
        self, w3: Web3, *, batch_size: int = DEFAULT_BATCH_SIZE, chain: str = UNKNOWN_CHAIN
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.w3 = w3
        self.batch_size = batch_size
        self.chain = chain

    def request(self, method: str, params: list[Any]) -> Any:
        with RpcCall(self.chain, [method]) as call:
            try:
                return check(self._send(method, params), method)
            except ChainError as exc:
                call.failed(error_kind(exc))
                raise

    def _send(self, method: str, params: list[Any]) -> Any:
        try:
            return self.w3.provider.make_request(RPCEndpoint(method), params)
        except ChainError:
            raise
        except (requests.RequestException, OSError, ValueError, TimeoutError) as exc:
            raise ChainUnavailable(f"the node could not be reached ({type(exc).__name__})") from exc

    def batch(self, calls: Sequence[tuple[str, list[Any]]]) -> list[Any]:
        """JSON-RPC batches of at most `batch_size` requests; each item is its result or the
        ChainError it raised."""
        out: list[Any] = []
        for start in range(0, len(calls), self.batch_size):
            out += self._batch_chunk(calls[start : start + self.batch_size])
        return out

    def _batch_chunk(self, calls: Sequence[tuple[str, list[Any]]]) -> list[Any]:
        return checked_batch(self.chain, calls, self._send_batch)

    def _send_batch(self, calls: Sequence[tuple[str, list[Any]]]) -> list[Any]:
        try:
            # Every provider here is a JSON-RPC one (http_web3 and the tests' own).
            provider = cast(JSONBaseProvider, self.w3.provider)
            responses = provider.make_batch_request(
                [(RPCEndpoint(method), params) for method, params in calls]
            )
        except (requests.RequestException, OSError, ValueError, TimeoutError) as exc:
            raise ChainUnavailable(f"the node could not be reached ({type(exc).__name__})") from exc
        if not isinstance(responses, list) or len(responses) != len(calls):
            raise ChainUnavailable("the node answered a batch with something that is not a batch")
        return responses


def http_web3(url: str, *, timeout: float) -> Web3:
    """A `Web3` on the node at `url`: an explicit timeout, the environment's proxies read once,
    and no retries."""
    # The proxy settings of the environment are read once here, not on every request
    # (requests does that when trust_env is on: half a millisecond per call).
    session = requests.Session()
    session.trust_env = False
    session.proxies = requests.utils.get_environ_proxies(url)
    provider = HTTPProvider(
        url,
        request_kwargs={"timeout": timeout},
        session=session,
        exception_retry_configuration=None,  # the jobs retry; web3 never does
    )
    return Web3(provider)


def checked_batch(
    chain: str,
    calls: Sequence[tuple[str, list[Any]]],
    send: Callable[[Sequence[tuple[str, list[Any]]]], list[Any]],
) -> list[Any]:
    """One JSON-RPC batch sent by `send` (its answers in request order), timed and counted:
    each item is its result or the ChainError it stands for; a batch that failed as a whole
    raises."""
    with RpcCall(chain, [method for method, _ in calls], batch=True) as call:
        try:
            responses = send(calls)
        except ChainError as exc:
            call.failed(error_kind(exc))
            raise
        out: list[Any] = []
        for response, (method, _) in zip(responses, calls, strict=True):
            try:
                out.append(check(response, method))
            except ChainError as exc:
                call.failed(error_kind(exc), [method])
                out.append(exc)
        return out


def rpc_url_for(chain_id: int, *, urls: dict[int, str], default: str) -> str:
    url = urls.get(chain_id) or default
    if not url:
        raise ChainUnavailable(f"no node is configured for chain {chain_id} (RPC_URL_{chain_id})")
    return url
