"""An endpoint update asks its new URL (a HEAD, up to 3 s) before it writes: a secret rotation,
or the service disabling the endpoint after every delivery failed, that lands meanwhile
survives the update (only what the update changes is written, on the row as it is then), and
an endpoint deleted meanwhile stays deleted."""

from __future__ import annotations

import datetime as dt
import socket
import threading
from collections.abc import Iterator

import pytest
from django.db import connection, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from tests.webhooks.conftest import register
from tests.webhooks.test_delivery import announce
from webhooks.models import Delivery, Endpoint
from webhooks.sending import AttemptResult
from webhooks.services import (
    delivery_record_attempt,
    endpoint_delete,
    endpoint_staff_disable,
    outbox_fan_out,
)

pytestmark = pytest.mark.django_db(transaction=True)


class SilentReceiver:
    """Accepts connections and never answers: a probe of it waits for its deadline."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.probed = threading.Event()
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.held.append(conn)
            self.probed.set()

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def close(self) -> None:
        self.listener.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def silent(settings) -> Iterator[SilentReceiver]:
    server = SilentReceiver()
    settings.WEBHOOK_ALLOWED_PORTS = [*settings.WEBHOOK_ALLOWED_PORTS, server.port]
    yield server
    server.close()


def in_thread(client: APIClient, method: str, path: str, body: dict) -> tuple:
    """The request sent from another thread (its own connection); (thread, answers)."""
    answers: list = []

    def run() -> None:
        try:
            answers.append(getattr(client, method)(path, body, format="json"))
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, answers


def keyed_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_X_API_TOKEN=key)
    return client


def test_a_rotation_during_an_updates_probe_survives_it(key, keyed, receiver, silent):
    created = register(keyed, receiver().url())
    path = f"/webhooks/{created['id']}"
    updating, answers = in_thread(keyed_client(key[1]), "patch", path, {"url": silent.url()})
    assert silent.probed.wait(10)  # the update is asking the new URL
    rotated = keyed.post(f"{path}/rotate-secret").json()["data"]["secret"]
    updating.join(20)
    assert answers[0].status_code == 200, answers[0].content
    endpoint = Endpoint.objects.get()
    assert (endpoint.url, endpoint.secret, endpoint.previous_secret) == (
        silent.url(),
        rotated,
        created["secret"],
    )


def failing_past_the_limit(keyed, receiver, settings) -> tuple[dict, Endpoint]:
    """An endpoint registered, failing for longer than WEBHOOK_DISABLE_AFTER (60 s), with a
    delivery due: its next failed attempt disables it."""
    settings.WEBHOOK_DISABLE_AFTER = 60
    created = register(keyed, receiver().url())
    endpoint = Endpoint.objects.get()
    Endpoint.objects.filter(id=endpoint.id).update(
        failing_since=timezone.now() - dt.timedelta(seconds=61)
    )
    announce()
    outbox_fan_out()
    return created, endpoint


def test_an_auto_disable_during_an_updates_probe_survives_it(
    key, keyed, receiver, silent, settings
):
    created, endpoint = failing_past_the_limit(keyed, receiver, settings)
    path = f"/webhooks/{created['id']}"
    body = {"url": silent.url(), "description": "moved"}
    updating, answers = in_thread(keyed_client(key[1]), "patch", path, body)
    assert silent.probed.wait(10)
    failed = AttemptResult(None, "connection refused", 3, "")
    delivery_record_attempt(delivery_id=Delivery.objects.get().id, at=timezone.now(), result=failed)
    assert Endpoint.objects.get().enabled is False  # the service disabled it meanwhile
    updating.join(20)
    assert answers[0].status_code == 200, answers[0].content
    assert answers[0].json()["data"]["enabled"] is False
    endpoint.refresh_from_db()
    assert (endpoint.url, endpoint.description, endpoint.enabled) == (silent.url(), "moved", False)
    assert endpoint.disabled_reason.startswith("Every delivery failed for ")


def test_an_endpoint_deleted_during_an_updates_probe_stays_deleted(key, keyed, receiver, silent):
    """The update then answers 404: it does not write the row back (which re-created the
    endpoint, without its deliveries, under its old id)."""
    created = register(keyed, receiver().url())
    path = f"/webhooks/{created['id']}"
    updating, answers = in_thread(keyed_client(key[1]), "patch", path, {"url": silent.url()})
    assert silent.probed.wait(10)
    assert keyed.delete(path).status_code == 204
    updating.join(20)
    assert answers[0].status_code == 404, answers[0].content
    assert answers[0].json()["error"]["code"] == "not_found"
    assert not Endpoint.objects.exists()


def test_a_rotation_of_an_endpoint_being_deleted_is_a_404(key, keyed, receiver):
    """The delete holds the endpoint's row (lock order: the endpoint, then its deliveries); a
    rotation waits for it, then finds no endpoint."""
    created = register(keyed, receiver().url())
    endpoint = Endpoint.objects.get()
    locked, go = threading.Event(), threading.Event()

    def delete() -> None:
        try:
            with transaction.atomic():
                Endpoint.objects.select_for_update().get(id=endpoint.id)
                locked.set()
                go.wait(10)
                endpoint_delete(endpoint=endpoint)
        finally:
            connection.close()

    deleter = threading.Thread(target=delete)
    deleter.start()
    assert locked.wait(10)
    rotating, answers = in_thread(
        keyed_client(key[1]), "post", f"/webhooks/{created['id']}/rotate-secret", {}
    )
    rotating.join(0.5)
    assert rotating.is_alive()  # waiting for the delete's lock
    go.set()
    deleter.join(20)
    rotating.join(20)
    assert answers[0].status_code == 404, answers[0].content
    assert not Endpoint.objects.exists()


def test_staff_disabling_during_an_attempts_record_stays_staffs(
    keyed, receiver, settings, admin_user
):
    """The dispatcher read the endpoint enabled, then staff disabled it before the attempt's
    failure could disable it too: "Disabled by ..." stays, so only staff enable it again."""
    created, endpoint = failing_past_the_limit(keyed, receiver, settings)
    locked, go = threading.Event(), threading.Event()

    def staff() -> None:
        try:
            with transaction.atomic():
                endpoint_staff_disable(endpoint=endpoint, by=str(admin_user))
                locked.set()
                go.wait(10)
        finally:
            connection.close()

    def record() -> None:
        try:
            failed = AttemptResult(None, "connection refused", 3, "")
            delivery_record_attempt(
                delivery_id=Delivery.objects.get().id, at=timezone.now(), result=failed
            )
        finally:
            connection.close()

    staffing = threading.Thread(target=staff)
    staffing.start()
    assert locked.wait(10)
    recording = threading.Thread(target=record)
    recording.start()
    recording.join(0.5)  # it reads the endpoint enabled, then waits for the staff's lock
    go.set()
    staffing.join(20)
    recording.join(20)
    endpoint.refresh_from_db()
    assert (endpoint.enabled, endpoint.disabled_reason) == (False, f"Disabled by {admin_user}.")
    response = keyed.patch(f"/webhooks/{created['id']}", {"enabled": True}, format="json")
    assert response.status_code == 403
