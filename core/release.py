"""What code this process runs: its version and commit (GET /version; the read endpoints' ETags
include them, so that a deployment that changes a representation changes its tag)."""

from __future__ import annotations

import os
import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Final

from django.conf import settings

DISTRIBUTION: Final = "latsite"
UNKNOWN: Final = "unknown"


def service_version() -> str:
    """The checkout's pyproject.toml `version` (an editable install's metadata goes stale when
    it changes), else the installed distribution's, else unknown."""
    try:
        with (Path(settings.BASE_DIR) / "pyproject.toml").open("rb") as file:
            return str(tomllib.load(file)["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        pass
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return UNKNOWN


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _git_commit(checkout: Path) -> str | None:
    """HEAD's commit from a checkout's .git (a directory, or a worktree's `gitdir:` file)."""
    git = checkout / ".git"
    if git.is_file():
        pointer = _read(git) or ""
        if not pointer.startswith("gitdir:"):
            return None
        git = (checkout / pointer.removeprefix("gitdir:").strip()).resolve()
    head = _read(git / "HEAD")
    if head is None or not head.startswith("ref:"):
        return head or None
    ref = head.removeprefix("ref:").strip()
    common = git / (_read(git / "commondir") or ".")
    for directory in (git, common):
        if (commit := _read(directory / ref)) is not None:
            return commit
    for line in (_read(common / "packed-refs") or "").splitlines():
        commit, _, name = line.partition(" ")
        if name == ref:
            return commit
    return None


def service_commit() -> str:
    """GIT_COMMIT or SOURCE_COMMIT from the environment, else the checkout's HEAD, else unknown."""
    for name in ("GIT_COMMIT", "SOURCE_COMMIT"):
        if value := os.environ.get(name, "").strip():
            return value
    return _git_commit(Path(settings.BASE_DIR)) or UNKNOWN


@cache
def release() -> str:
    """This process's version and commit, read once."""
    return f"{service_version()}+{service_commit()}"
