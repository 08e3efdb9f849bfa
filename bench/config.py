"""Where the benchmarks run: the repository, the environment and the bench database's URL."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable

# The Makefile's TEST_ENV, so that `python bench/run.py` also works without `make`.
TEST_ENV_DEFAULTS = {
    "DJANGO_DEBUG": "false",
    "DJANGO_SECRET_KEY": "test-only-secret-key-not-for-production",
    "SECURE_SSL_REDIRECT": "false",
    "SESSION_COOKIE_SECURE": "false",
    "CSRF_COOKIE_SECURE": "false",
    "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/lat",
    "REDIS_URL": "redis://127.0.0.1:6379/15",
}
DEFAULT_BENCH_DB = "lat_bench"


def base_env() -> dict[str, str]:
    """The caller's environment with TEST_ENV's values filled in where missing."""
    env = dict(os.environ)
    for key, value in TEST_ENV_DEFAULTS.items():
        env.setdefault(key, value)
    env.setdefault("DJANGO_SETTINGS_MODULE", "latsite.settings")
    return env


def with_database(url: str, name: str) -> str:
    """The same server and credentials as `url`, another database name."""
    parts = urlsplit(url)
    if parts.scheme not in {"postgres", "postgresql", "pgsql"}:
        raise SystemExit(f"bench: DATABASE_URL must be a PostgreSQL URL, got {parts.scheme!r}.")
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


def database_name(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def libpq_url(url: str) -> str:
    """psycopg wants postgres:// or postgresql:// (django-environ also accepts pgsql://)."""
    parts = urlsplit(url)
    return urlunsplit(("postgresql", *parts[1:]))


def machine_facts() -> dict[str, str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    except OSError:
        pass
    return {
        "nproc": str(len(os.sched_getaffinity(0))),
        "cpu": cpu,
        "memory": mem,
        "os": platform.platform(),
        "python": platform.python_version(),
    }


def software_versions(db_url: str) -> str:
    import psycopg

    try:
        with psycopg.connect(libpq_url(db_url)) as conn:
            server = conn.execute("SHOW server_version").fetchone()[0].split()[0]
    except psycopg.Error:
        server = "?"
    try:
        from importlib.metadata import version

        gunicorn, django = version("gunicorn"), version("django")
    except Exception:
        gunicorn = django = "?"
    return f"PostgreSQL {server}, gunicorn {gunicorn}, Django {django}"
