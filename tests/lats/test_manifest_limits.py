"""lat_import's limits: a manifest too large, nested too deep, or with a value its column cannot
hold (a name or symbol too long, a number out of range, a character PostgreSQL does not store)
is refused with the import's own error naming the file and the field, never a traceback or a
crash. No chain is needed: --skip-chain-check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from lats.models import Avs, Lat
from tests.processes import database_url

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[2]
MANIFEST = (
    REPO / "tests" / "data" / "published-manifests" / "mainnet-xlagrange-deployment_data.json"
)
INT_MAX = 2**31 - 1  # PostgreSQL's integer, Lat.max_nodes
BIGINT_MAX = 2**63 - 1  # PostgreSQL's bigint, the blocks and chain ids


def published() -> dict[str, Any]:
    return json.loads(MANIFEST.read_text())


@pytest.fixture
def write(tmp_path) -> Callable[..., Path]:
    def write_file(content: dict[str, Any] | str | bytes, name: str = "info.json") -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, dict):
            content = json.dumps(content)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        return path

    return write_file


def refused(path: Path) -> str:
    with pytest.raises(CommandError) as excinfo:
        call_command("lat_import", str(path), "--skip-chain-check")
    assert (Lat.objects.count(), Avs.objects.count()) == (0, 0)
    return str(excinfo.value)


def with_member(**members: Any) -> dict[str, Any]:
    return {**published(), **members}


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        (with_member(symbol="X" * 65), "symbol must be at most 64 characters"),
        (with_member(name="N" * 201), "name must be at most 200 characters"),
        (with_member(maxNodes=2**31), f"maxNodes must be at most {INT_MAX}, not {2**31}"),
        (with_member(deploymentBlock=2**63), f"deploymentBlock must be at most {BIGINT_MAX}"),
        (with_member(chainId=2**64), f"chainId must be at most {BIGINT_MAX}"),
        (with_member(name="a\u0000b"), "name must not hold the character U+0000"),
        (with_member(notes={"k": "\ud800"}), "notes.k must not hold the character U+D800"),
        (
            with_member(**{"odd\u0000key": 1}),
            "the member name 'odd\\x00key' must not hold the character U+0000",
        ),
    ],
)
def test_a_value_its_column_cannot_hold_is_the_imports_own_error(write, manifest, message):
    path = write(manifest)
    assert refused(path).startswith(f"{path}: {message}")


def test_a_block_of_the_contract_deployments_out_of_range_is_refused(write):
    manifest = published()
    manifest["contractDeployments"]["proxy"]["liquidTokenManager"]["block"] = 2**64
    path = write(manifest)
    assert refused(path).startswith(
        f"{path}: contractDeployments.proxy.liquidTokenManager.block must be at most {BIGINT_MAX}"
    )


def test_the_largest_values_the_columns_hold_import(write):
    manifest = with_member(
        symbol="S" * 64, name="N" * 200, maxNodes=INT_MAX, deploymentBlock=BIGINT_MAX
    )
    call_command("lat_import", str(write(manifest)), "--skip-chain-check")
    lat = Lat.objects.get()
    assert (lat.symbol, lat.name, lat.max_nodes, lat.deployment_block) == (
        "S" * 64,
        "N" * 200,
        INT_MAX,
        BIGINT_MAX,
    )


def test_a_version_folder_name_too_long_is_refused(tmp_path, write):
    version = "v1-" + "x" * 62  # 65 characters: Lat.manifest_version holds 64
    path = write(published(), name=f"mainnet/xlagrange/{version}/info.json")
    with pytest.raises(CommandError) as excinfo:
        call_command("lat_import", str(tmp_path / "mainnet"), "--skip-chain-check")
    assert str(excinfo.value).startswith(
        f"{path}: its version folder's name must be at most 64 characters"
    )
    assert Lat.objects.count() == 0


def test_a_file_over_the_size_cap_is_refused_unread(write):
    """2 MiB: a JSON manifest padded with spaces (a valid document, were it read)."""
    text = json.dumps(published())
    path = write(text[:-1] + " " * (2 << 20) + "}")
    message = refused(path)
    assert message == f"{path}: is larger than 1048576 bytes (a manifest is a few kilobytes)"


def test_a_manifest_nested_too_deep_is_refused():
    """100,000 levels: json's C scanner recursed past the C stack and the command died with a
    segmentation fault. Run as ops run it, in a process of its own."""
    manifest = published()
    text = json.dumps(manifest)
    deep = text[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    path = REPO / "var" / f"deep-manifest-{os.getpid()}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(deep)
    try:
        done = subprocess.run(
            [sys.executable, "manage.py", "lat_import", str(path), "--skip-chain-check"],
            cwd=REPO,
            env={**os.environ, "DATABASE_URL": database_url()},
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        path.unlink()
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
    assert f"CommandError: {path}: nests arrays or objects deeper than 32 levels" in done.stderr
