"""Production settings pass Django's deployment checks; debug off requires a secret key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "SECURE_"))}
    base.pop("SESSION_COOKIE_SECURE", None)
    base.pop("CSRF_COOKIE_SECURE", None)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=base | env,
        check=False,
    )


def test_check_deploy_is_clean_with_production_settings():
    result = run_manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        env={"DJANGO_SECRET_KEY": "x" * 60 + "prod-secret-key-with-enough-entropy-1234567890"},
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert "no issues" in result.stdout


def test_debug_off_without_secret_key_refuses_to_start():
    result = run_manage("check", env={})
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY" in result.stderr


def test_a_bad_metrics_allowed_ips_entry_refuses_to_start():
    """Refused when the settings load (gunicorn, the worker, manage.py), naming the setting
    and the entry, not at the first scrape."""
    result = run_manage(
        "check",
        env={"DJANGO_DEBUG": "true", "METRICS_ALLOWED_IPS": "10.0.0.0/8,10.0.0.300"},
    )
    assert result.returncode != 0
    assert "METRICS_ALLOWED_IPS" in result.stderr
    assert "10.0.0.300" in result.stderr
    ok = run_manage("check", env={"DJANGO_DEBUG": "true", "METRICS_ALLOWED_IPS": "10.0.0.0/8"})
    assert ok.returncode == 0, ok.stderr
