"""Compile the project's Solidity test contracts with solcjs (from npm), offline.

``python -m devchain.compile`` compiles ``devchain/contracts/**/*.sol`` and writes
``build/contracts.json`` (ABI and bytecode of every deployable contract; gitignored) and the
committed ``chain/abis/<Contract>.json`` the runtime gateway reads (ABI only, sorted keys,
stable). ``--check`` compiles and fails if the committed ABIs differ.

Imports of OpenZeppelin (``@openzeppelin/contracts`` and ``@openzeppelin/contracts-upgradeable``,
4.9.0 from npm) are resolved here, from ``node_modules``, and handed to solcjs with the
project's sources. Of the library's contracts only the proxies a deployment uses
(``LIBRARY_CONTRACTS``) are kept in the build.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import posixpath
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
CONTRACTS_DIR = Path(__file__).resolve().parent / "contracts"
BUILD_FILE = REPO_ROOT / "build" / "contracts.json"
ABI_DIR = REPO_ROOT / "chain" / "abis"  # committed: the runtime gateway reads them
NODE_MODULES = REPO_ROOT / "node_modules"
SOLCJS = NODE_MODULES / ".bin" / "solcjs"
EVM_VERSION = "cancun"
OPTIMIZER_RUNS = 200
# Deployable contracts of the imported libraries that the build keeps (the rest are inherited or
# linked into the project's own contracts).
LIBRARY_CONTRACTS = frozenset(
    {"TransparentUpgradeableProxy", "ProxyAdmin", "BeaconProxy", "UpgradeableBeacon"}
)
# `import "x";`, `import {A, B} from "x";`, `import * as X from "x";`, `import "x" as X;`
_IMPORT = re.compile(r"""^\s*import\s+(?:[^"';]*?\bfrom\s+)?["']([^"']+)["']""", re.MULTILINE)


class CompileError(Exception):
    """solcjs is missing, crashed, or reported errors in the sources."""


def source_files() -> list[Path]:
    return sorted(CONTRACTS_DIR.rglob("*.sol"))


def sources_hash() -> str:
    """A digest of the sources (the imported library files too) and compiler settings;
    build/contracts.json records it."""
    digest = hashlib.sha256(f"{EVM_VERSION}:{OPTIMIZER_RUNS}".encode())
    for unit, text in sorted(resolve_sources(source_files()).items()):
        digest.update(unit.encode() + b"\0" + text.encode() + b"\0")
    return digest.hexdigest()


def _unit_name(path: Path) -> str:
    """A file's source unit name: "contracts/<path under devchain/contracts>", or
    "contracts/<file>" for a file elsewhere. Unit names are part of the bytecode's metadata
    hash, so they do not depend on where the checkout lives."""
    try:
        return "contracts/" + path.resolve().relative_to(CONTRACTS_DIR.resolve()).as_posix()
    except ValueError:
        return f"contracts/{path.name}"


def _library_path(unit: str) -> Path:
    if not unit.startswith("@openzeppelin/"):
        raise CompileError(f"cannot resolve import {unit!r}: only @openzeppelin/ is installed")
    return NODE_MODULES / unit


def resolve_sources(paths: list[Path]) -> dict[str, str]:
    """{source unit name: text} of ``paths`` and everything they import, transitively.

    Relative imports resolve against the importing unit's name, as solc does; a bare path is a
    library file under node_modules. Raises CompileError for an import that is not there."""
    sources: dict[str, str] = {}
    files = {_unit_name(path): path for path in paths}
    pending = list(files)
    while pending:
        unit = pending.pop()
        if unit in sources:
            continue
        path = files.get(unit)
        if path is None:
            path = (
                CONTRACTS_DIR / unit.removeprefix("contracts/")
                if unit.startswith("contracts/")
                else _library_path(unit)
            )
        if not path.is_file():
            raise CompileError(f"{unit}: no such file ({path}); run `npm install`?")
        text = path.read_text()
        sources[unit] = text
        for imported in _IMPORT.findall(text):
            if imported.startswith("."):
                imported = posixpath.normpath(posixpath.join(posixpath.dirname(unit), imported))
            pending.append(imported)
    return sources


def _standard_input(paths: list[Path]) -> dict[str, Any]:
    return {
        "language": "Solidity",
        "sources": {unit: {"content": text} for unit, text in resolve_sources(paths).items()},
        "settings": {
            "evmVersion": EVM_VERSION,
            "optimizer": {"enabled": True, "runs": OPTIMIZER_RUNS},
            "outputSelection": {
                "*": {"*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"]}
            },
        },
    }


def _run_solcjs(standard_input: dict[str, Any]) -> dict[str, Any]:
    if not SOLCJS.exists():
        raise CompileError(f"{SOLCJS} not found: run `npm install --no-audit --no-fund`")
    # stdin and stdout are files, not pipes: solcjs reads a large piped input with one
    # non-blocking read (EAGAIN), and exits before node flushes a large piped write.
    with tempfile.TemporaryFile(mode="w+") as inp, tempfile.TemporaryFile(mode="w+") as out:
        json.dump(standard_input, inp)
        inp.seek(0)
        proc = subprocess.run(
            [str(SOLCJS), "--standard-json"],
            stdin=inp,
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO_ROOT,
            timeout=120,
            check=False,
        )
        out.seek(0)
        stdout = out.read()
    # solcjs prints a ">>>" banner line before the JSON document.
    start = stdout.find("{")
    if proc.returncode != 0 or start < 0:
        raise CompileError(f"solcjs failed (exit {proc.returncode}): {proc.stderr or stdout}")
    return json.loads(stdout[start:])


def compile_contracts() -> dict[str, Any]:
    """Compile devchain/contracts/*.sol; return the build document (see ``BUILD_FILE``).

    Raises CompileError with the formatted compiler errors. Warnings go to stderr.
    """
    return {
        "compiler": _compiler_version(),
        "evmVersion": EVM_VERSION,
        "sourcesHash": sources_hash(),
        "contracts": compile_files(source_files()),
    }


def compile_files(paths: list[Path]) -> dict[str, dict[str, Any]]:
    """Compile Solidity files with the project's solcjs and settings: {contract name: {source,
    abi, bytecode, deployedBytecode}} of every deployable contract. Raises CompileError with
    the formatted compiler errors; warnings go to stderr."""
    output = _run_solcjs(_standard_input(paths))
    messages = output.get("errors", [])
    errors = [m for m in messages if m.get("severity") == "error"]
    for warning in (m for m in messages if m.get("severity") != "error"):
        print(warning.get("formattedMessage", warning.get("message")), file=sys.stderr)
    if errors:
        raise CompileError("\n".join(m.get("formattedMessage", m["message"]) for m in errors))

    contracts: dict[str, dict[str, Any]] = {}
    for source, by_name in sorted(output.get("contracts", {}).items()):
        for name, data in sorted(by_name.items()):
            bytecode = data["evm"]["bytecode"]["object"]
            if not bytecode:  # interfaces and abstract contracts
                continue
            if not source.startswith("contracts/") and name not in LIBRARY_CONTRACTS:
                continue  # a library's own contract, not one a deployment uses
            if name in contracts:
                raise CompileError(f"contract name {name} is defined twice ({source})")
            contracts[name] = {
                "source": source,
                "abi": data["abi"],
                "bytecode": "0x" + bytecode,
                "deployedBytecode": "0x" + data["evm"]["deployedBytecode"]["object"],
            }
    return contracts


def _compiler_version() -> str:
    package = REPO_ROOT / "node_modules" / "solc" / "package.json"
    return json.loads(package.read_text())["version"] if package.exists() else "unknown"


def abi_text(abi: list[dict[str, Any]]) -> str:
    return json.dumps(abi, sort_keys=True, indent=2) + "\n"


def _write_atomically(path: Path, text: str) -> None:
    """Readers (parallel test workers) never see a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(tmp, path)


def write_build(build: dict[str, Any]) -> None:
    _write_atomically(BUILD_FILE, json.dumps(build, sort_keys=True, indent=1) + "\n")


def write_abis(build: dict[str, Any]) -> None:
    """Write one ABI file per contract and remove ABI files of contracts that are gone."""
    ABI_DIR.mkdir(parents=True, exist_ok=True)
    wanted = {f"{name}.json": abi_text(c["abi"]) for name, c in build["contracts"].items()}
    for stale in ABI_DIR.glob("*.json"):
        if stale.name not in wanted:
            stale.unlink()
    for filename, text in wanted.items():
        path = ABI_DIR / filename
        if not path.exists() or path.read_text() != text:
            _write_atomically(path, text)


def abi_differences(build: dict[str, Any]) -> list[str]:
    """Committed ABI files that are missing, stale or extra compared with ``build``."""
    wanted = {f"{name}.json": abi_text(c["abi"]) for name, c in build["contracts"].items()}
    present = {p.name for p in ABI_DIR.glob("*.json")}
    problems = [f"extra: {name}" for name in sorted(present - wanted.keys())]
    for filename, text in sorted(wanted.items()):
        path = ABI_DIR / filename
        if not path.exists():
            problems.append(f"missing: {filename}")
        elif path.read_text() != text:
            problems.append(f"differs: {filename}")
    return problems


def load_build(*, compile_if_stale: bool = True) -> dict[str, Any]:
    """The build document, recompiling (and rewriting ABIs) when sources changed."""
    if BUILD_FILE.exists():
        build = json.loads(BUILD_FILE.read_text())
        if not compile_if_stale or build.get("sourcesHash") == sources_hash():
            return build
    elif not compile_if_stale:
        raise CompileError(f"{BUILD_FILE} is missing: run `python -m devchain.compile`")
    build = compile_contracts()
    write_build(build)
    write_abis(build)
    return build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devchain.compile", description=__doc__)
    parser.add_argument(
        "--check",
        action="store_true",
        help="fail if the committed ABIs in chain/abis differ from a fresh compile",
    )
    args = parser.parse_args(argv)
    try:
        build = compile_contracts()
    except CompileError as exc:
        print(exc, file=sys.stderr)
        return 1
    write_build(build)
    if args.check:
        problems = abi_differences(build)
        for problem in problems:
            print(f"chain/abis {problem}", file=sys.stderr)
        if problems:
            print("run `python -m devchain.compile` and commit the ABIs", file=sys.stderr)
            return 1
        print(f"{len(build['contracts'])} contract ABIs up to date")
        return 0
    write_abis(build)
    print(f"compiled {len(build['contracts'])} contracts with solc {build['compiler']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
