from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from rest_framework.test import APIClient
from rest_framework_api_key.models import APIKey

from tests.webhooks.receivers import Answer, Receiver


@pytest.fixture
def key(db) -> tuple[APIKey, str]:
    return APIKey.objects.create_key(name="webhook tests")


@pytest.fixture
def keyed(key) -> APIClient:
    """An API client presenting the key."""
    client = APIClient()
    client.credentials(HTTP_X_API_TOKEN=key[1])
    return client


@pytest.fixture
def receiver(settings) -> Iterator[Callable[..., Receiver]]:
    """receiver(*answers): a receiver on loopback, with plain http, loopback hosts and its port
    allowed; retries after 0.2 s, 0.4 s, 0.6 s."""
    started: list[Receiver] = []
    settings.WEBHOOK_ALLOW_HTTP = True
    settings.WEBHOOK_ALLOW_PRIVATE_HOSTS = True
    settings.WEBHOOK_ALLOWED_PORTS = []
    settings.WEBHOOK_RETRY_SCHEDULE = [0.2, 0.4, 0.6]
    settings.WEBHOOK_TIMEOUT = 2.0

    def start(*answers: Answer) -> Receiver:
        server = Receiver(*answers)
        started.append(server)
        settings.WEBHOOK_ALLOWED_PORTS = [*settings.WEBHOOK_ALLOWED_PORTS, server.port]
        return server

    yield start
    for server in started:
        server.stop()


def register(client: APIClient, url: str, **filters) -> dict:
    response = client.post("/webhooks", {"url": url, **filters}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()["data"]
