"""The admin login is throttled per client address (django-axes): after 5 failed logins within
the cool-off, the address is refused with a 429 for 5 minutes, without a password check; the
count lives in the database, so the login page works the same while Redis is down."""

from __future__ import annotations

import datetime as dt

import pytest
import redis
from axes.models import AccessAttempt
from django.contrib.auth import base_user
from django.contrib.auth.models import User
from django.test import Client

from tests.ports import closed_port

pytestmark = pytest.mark.django_db

LOGIN = "/admin/login/?next=/admin/"
PASSWORD = "correct horse battery staple"


@pytest.fixture
def boss(db) -> User:
    return User.objects.create_superuser("boss", "boss@example.com", PASSWORD)


@pytest.fixture
def password_checks(monkeypatch) -> list[str]:
    """Every password the user model checked."""
    checked: list[str] = []
    real = base_user.check_password

    def spy(password, encoded, setter=None, **kwargs):
        checked.append(password)
        return real(password, encoded, setter, **kwargs)

    monkeypatch.setattr(base_user, "check_password", spy)
    return checked


def from_address(address: str) -> Client:
    return Client(REMOTE_ADDR=address)


def login(client: Client, password: str):
    return client.post(LOGIN, {"username": "boss", "password": password})


def logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_five_failures_lock_the_address_out_without_checking_the_password(
    boss, password_checks, settings
):
    assert (settings.AXES_FAILURE_LIMIT, settings.AXES_COOLOFF_TIME) == (
        5,
        dt.timedelta(minutes=5),
    )
    client = from_address("203.0.113.7")
    for attempt in range(1, 5):
        response = login(client, f"wrong-{attempt}")
        assert response.status_code == 200  # the form again, with its error
        assert b"Please enter the correct username and password" in response.content
    assert login(client, "wrong-5").status_code == 429  # the fifth failure locks
    assert len(password_checks) == 5

    response = login(client, PASSWORD)
    assert response.status_code == 429
    assert response["Retry-After"] == "300"
    assert b"Too many failed logins" in response.content
    assert not logged_in(client)
    assert len(password_checks) == 5  # refused before any password check

    other = from_address("203.0.113.8")
    assert login(other, PASSWORD).status_code == 302
    assert logged_in(other)


def test_lockout_ends_after_the_cool_off(boss):
    client = from_address("203.0.113.9")
    for attempt in range(5):
        login(client, f"wrong-{attempt}")
    assert login(client, PASSWORD).status_code == 429
    AccessAttempt.objects.update(
        attempt_time=dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5, seconds=1)
    )
    assert login(client, PASSWORD).status_code == 302
    assert logged_in(client)


def test_a_success_resets_the_count(boss):
    client = from_address("203.0.113.10")
    for attempt in range(4):
        assert login(client, f"wrong-{attempt}").status_code == 200
    assert login(client, PASSWORD).status_code == 302
    client.logout()
    for attempt in range(4):
        assert login(client, f"wrong-again-{attempt}").status_code == 200
    assert login(client, PASSWORD).status_code == 302


def test_login_and_lockout_work_while_redis_is_down(boss, settings):
    settings.CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{closed_port()}/0",
            "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 0.2, "SOCKET_TIMEOUT": 0.2},
        }
    }
    from django.core.cache import cache

    with pytest.raises(redis.exceptions.ConnectionError):
        cache.get("anything")  # the cache is really unreachable
    client = from_address("203.0.113.11")
    assert client.get(LOGIN).status_code == 200
    for attempt in range(4):
        assert login(client, f"wrong-{attempt}").status_code == 200
    assert login(client, "wrong-5").status_code == 429
    other = from_address("203.0.113.12")
    assert login(other, PASSWORD).status_code == 302
    assert other.get("/admin/").status_code == 200
