"""Nothing is pushed before it is durable (extensions.md, "Webhooks"): every transaction that
writes outbox rows commits with `synchronous_commit` on, whatever the indexer or the server's
configuration set. What PostgreSQL has in force is read at the commit itself, by a deferred
constraint trigger on the outbox (it runs as the transaction commits, after anything the code
ran in it), on a server whose sessions default to `synchronous_commit = off` (as a database
tuned for write throughput has it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from django.core.management import call_command
from django.db import connection

from devchain.devnet import make_deposits
from webhooks.models import OutboxEvent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.chain]
DEVNET = pytest.mark.parametrize("devnet_kind", ["multicall3"], indirect=True)
WAD = 10**18

_CREATE = """
CREATE TABLE test_outbox_commits (setting text NOT NULL, type text NOT NULL);
CREATE FUNCTION test_outbox_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO test_outbox_commits VALUES (current_setting('synchronous_commit'), NEW.type);
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER test_outbox_commit AFTER INSERT ON webhooks_outboxevent
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_outbox_commit();
"""
_DROP = """
DROP TRIGGER IF EXISTS test_outbox_commit ON webhooks_outboxevent;
DROP FUNCTION IF EXISTS test_outbox_commit();
DROP TABLE IF EXISTS test_outbox_commits;
"""


@pytest.fixture
def commits(transactional_db) -> Iterator[Callable[[], list[tuple[str, str]]]]:
    """The (synchronous_commit, type) in force at the commit of each outbox row written, on a
    connection whose sessions default to synchronous_commit off."""
    with connection.cursor() as cursor:
        cursor.execute(_CREATE)
        cursor.execute("SET synchronous_commit = off")  # the session's default from now on

    def read() -> list[tuple[str, str]]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT setting, type FROM test_outbox_commits")
            return cursor.fetchall()

    try:
        yield read
    finally:
        with connection.cursor() as cursor:
            cursor.execute(_DROP)
            cursor.execute("RESET synchronous_commit")


def sync() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone() == ("off",)  # the session's default, as the jobs find it
    call_command("lat_sync", "--no-progress")


@DEVNET
def test_the_indexer_commits_outbox_rows_durably(synced, commits):
    chain, manifest = synced, synced.manifests[0]
    make_deposits(chain.url, manifest, 1, [manifest["tokens"][0]["address"]], [WAD])
    lt = chain.contract("LiquidToken", manifest["proxyAddress"])
    tx = lt.functions.transfer(chain.account(7), WAD // 2).transact({"from": chain.account(1)})
    chain.w3.eth.wait_for_transaction_receipt(tx)
    sync()
    got = commits()
    assert sorted(kind for _, kind in got) == ["deposit", "transfer"]
    assert {setting for setting, _ in got} == {"on"}
    assert OutboxEvent.objects.count() == 2


@DEVNET
def test_the_state_refresh_commits_a_status_change_durably(synced, commits):
    chain, manifest = synced, synced.manifests[0]
    lt = chain.contract("LiquidToken", manifest["proxyAddress"])
    chain.w3.eth.wait_for_transaction_receipt(
        lt.functions.pause().transact({"from": chain.account(0)})
    )
    sync()
    got = commits()
    assert ("on", "statusChanged") in got
    assert {setting for setting, _ in got} == {"on"}  # the `paused` event's too
