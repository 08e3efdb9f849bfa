"""The live stream as browsers use it: Chromium's own `EventSource`, on a page of another
origin, against the Procfile's stream process on anvil's devnet. It receives every deposit in
chain order; when the stream process is killed and started again, the browser reconnects by
itself with `Last-Event-ID` and receives what happened meanwhile, each deposit once.

What the page receives is compared with the deposits plain web3 decodes from the chain
(`get_logs`), never with the service's tables."""

from __future__ import annotations

import http.server
import signal
import threading
import time
from collections.abc import Iterator
from functools import partial

import pytest
from django.core.management import call_command

from devchain.devnet import make_deposits
from tests.browser import WAIT_SECONDS
from tests.ports import closed_port
from tests.processes import database_url
from tests.stream.client import StreamProcess
from tests.webhooks.test_chain import expected

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.chain]
DEVNET = pytest.mark.parametrize("devnet_kind", ["multicall3"], indirect=True)
WAD = 10**18

# The README's snippet, listening to every deposit of one LAT; what it receives is kept for
# the test to read (`window.received`), with the times the stream opened and failed.
PAGE = """<!doctype html>
<html><head><title>deposits</title></head><body><ol id="deposits"></ol><script>
window.received = []; window.opened = 0; window.errors = 0;
const stream = new EventSource("STREAM_URL");
stream.onopen = () => { window.opened += 1; };
stream.onerror = () => { window.errors += 1; };
stream.addEventListener("deposit", (e) => {
  const { id, data } = JSON.parse(e.data);
  window.received.push({ lastEventId: e.lastEventId, id, data });
  const item = document.createElement("li");
  item.textContent = `${data.args.amount} of ${data.args.asset} to ${data.args.receiver}`;
  document.getElementById("deposits").appendChild(item);
});
</script></body></html>
"""


class _Page(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def page_origin() -> Iterator[partial]:
    """serve(html) -> the URL of a page on an origin of its own (another port than the
    stream's: another origin, as a dashboard's site is)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def serve(html: str) -> str:
        _Page.body = html.encode()
        return f"http://127.0.0.1:{server.server_address[1]}/deposits.html"

    yield partial(serve)
    server.shutdown()
    server.server_close()


def _deposit(chain, manifest: dict, sender: int, amount: int) -> None:
    make_deposits(chain.url, manifest, sender, [manifest["tokens"][0]["address"]], [amount])
    call_command("lat_sync", "--no-progress")


def _received(browser, count: int, timeout: float = WAIT_SECONDS) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = browser.execute_script("return window.received")
        if len(got) >= count:
            return got
        time.sleep(0.1)
    raise AssertionError(f"{len(got)} of {count} deposits reached the page")


@DEVNET
def test_a_browser_receives_every_deposit_and_resumes_after_the_server_drops_it(
    browser, synced, page_origin, redis_server
):
    chain = synced
    manifest = chain.manifests[0]
    lat = manifest["proxyAddress"]
    port = closed_port()
    env = {"DATABASE_URL": database_url(), "REDIS_URL": redis_server.url()}
    process = StreamProcess(env, port=port)
    before = chain.w3.eth.block_number
    try:
        url = f"http://127.0.0.1:{port}/stream/events?lats={lat}&types=deposit"
        browser.get(page_origin(PAGE.replace("STREAM_URL", url)))
        deadline = time.monotonic() + WAIT_SECONDS
        while browser.execute_script("return window.opened") < 1:
            assert time.monotonic() < deadline, process.log
            time.sleep(0.05)

        _deposit(chain, manifest, 1, WAD)
        _deposit(chain, manifest, 2, 2 * WAD)
        assert len(_received(browser, 2)) == 2

        process.process.send_signal(signal.SIGKILL)  # the connection drops, unannounced
        process.process.wait(10)
        deadline = time.monotonic() + WAIT_SECONDS
        while browser.execute_script("return window.errors") < 1:  # the browser noticed
            assert time.monotonic() < deadline
            time.sleep(0.05)
        _deposit(chain, manifest, 3, 3 * WAD)  # while no stream process runs
        process = StreamProcess(env, port=port)
        _deposit(chain, manifest, 1, 4 * WAD)
        got = _received(browser, 4)
    finally:
        process.stop()

    want = expected(chain, [manifest], before)  # every feed event since, from get_logs
    deposits = [(event_id, data) for event_id, data in want.items() if data["type"] == "deposit"]
    deposits.sort(key=lambda item: (item[1]["blockNumber"], item[1]["logIndex"]))
    assert [d["args"]["amount"] for _, d in deposits] == [str(n * WAD) for n in (1, 2, 3, 4)]
    assert [(g["id"], g["data"]) for g in got] == deposits  # in order, each once
    cursors = [int(g["lastEventId"]) for g in got]
    assert cursors == sorted(set(cursors))
    assert browser.execute_script("return window.opened") == 2  # it reconnected by itself
    items = browser.find_elements("css selector", "#deposits li")
    assert [item.text.split()[0] for item in items] == [str(n * WAD) for n in (1, 2, 3, 4)]
