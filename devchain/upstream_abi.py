"""The external interface of upstream's LAT contracts, as signatures, for the test that keeps the
devnet's contracts from drifting from it (tests/chain/test_upstream_abi.py).

``python -m devchain.upstream_abi GIT_DIR [--commit 947e426]`` reads ``src/interfaces/*.sol`` of a
clone of EigenExplorer/liquid-avs-token at the commit, compiles them with the project's solcjs
(the EigenLayer types they import are stood in for by their ABI shapes: contract types are
addresses, ``SignatureWithExpiry`` is ``(bytes, uint256)``), and writes
``tests/data/upstream_interface_abi.json``: per contract, the signatures of every function, event
and error its interface declares. Nothing of upstream's is kept but those signatures.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from chain.abitypes import abi_type
from devchain.compile import NODE_MODULES, CompileError, _run_solcjs

REPO = "EigenExplorer/liquid-avs-token"
COMMIT = "947e4265163cb9bfcef9575c54576cfa4b53f623"  # main, "Mainnet v1" (tag v1.0.7's src/)
OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "upstream_interface_abi.json"
INTERFACES = {
    "LiquidToken": "ILiquidToken",
    "LiquidTokenManager": "ILiquidTokenManager",
    "StakerNode": "IStakerNode",
    "StakerNodeCoordinator": "IStakerNodeCoordinator",
    "TokenRegistryOracle": "ITokenRegistryOracle",
}
# The EigenLayer interfaces upstream's import, by their ABI shape only.
_EIGENLAYER_STANDINS = {
    "IStrategyManager.sol": "interface IStrategyManager {}",
    "IDelegationManager.sol": "interface IDelegationManager {}",
    "IStrategy.sol": "interface IStrategy {}",
    "ISignatureUtilsMixin.sol": (
        "interface ISignatureUtilsMixinTypes {\n"
        "    struct SignatureWithExpiry { bytes signature; uint256 expiry; }\n"
        "}"
    ),
}


def signatures(abi: list[dict[str, Any]]) -> dict[str, list[str]]:
    """{"functions", "events", "errors"}: sorted signatures of an ABI.

    A function: "name(types) mutability returns (types)"; an event: "name(type indexed, ...)";
    an error: "name(types)". Constructors, fallbacks and receive are left out."""
    functions, events, errors = [], [], []
    for entry in abi:
        inputs = entry.get("inputs", [])
        if entry["type"] == "function":
            outputs = ",".join(abi_type(p) for p in entry["outputs"])
            arguments = ",".join(abi_type(p) for p in inputs)
            functions.append(
                f"{entry['name']}({arguments}) {entry['stateMutability']} returns ({outputs})"
            )
        elif entry["type"] == "event":
            arguments = ",".join(abi_type(p) + (" indexed" if p["indexed"] else "") for p in inputs)
            events.append(f"{entry['name']}({arguments})")
        elif entry["type"] == "error":
            errors.append(f"{entry['name']}({','.join(abi_type(p) for p in inputs)})")
    return {"functions": sorted(functions), "events": sorted(events), "errors": sorted(errors)}


def upstream_signatures(git_dir: str, commit: str) -> dict[str, Any]:
    def show(path: str) -> str:
        return subprocess.run(
            ["git", "--git-dir", git_dir, "show", f"{commit}:{path}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout

    sources = {
        f"src/interfaces/{name}.sol": {"content": show(f"src/interfaces/{name}.sol")}
        for name in INTERFACES.values()
    }
    for file, text in _EIGENLAYER_STANDINS.items():
        content = f"// SPDX-License-Identifier: MIT\npragma solidity ^0.8.0;\n{text}\n"
        sources[f"@eigenlayer/contracts/interfaces/{file}"] = {"content": content}
    ierc20 = "@openzeppelin/contracts/token/ERC20/IERC20.sol"
    if not (NODE_MODULES / ierc20).is_file():
        raise CompileError("node_modules lacks @openzeppelin/contracts: run `npm install`")
    sources[ierc20] = {"content": (NODE_MODULES / ierc20).read_text()}
    output = _run_solcjs(
        {
            "language": "Solidity",
            "sources": sources,
            "settings": {"outputSelection": {"*": {"*": ["abi"]}}},
        }
    )
    problems = [m for m in output.get("errors", []) if m.get("severity") == "error"]
    if problems:
        raise CompileError("\n".join(m.get("formattedMessage", m["message"]) for m in problems))
    contracts = {}
    for contract, interface in INTERFACES.items():
        abi = output["contracts"][f"src/interfaces/{interface}.sol"][interface]["abi"]
        contracts[contract] = {"interface": interface, **signatures(abi)}
    return {
        "source": f"https://github.com/{REPO}",
        "commit": commit,
        "files": "src/interfaces/*.sol",
        "note": (
            "Signatures of upstream's interfaces (Mainnet v1), written by "
            "`python -m devchain.upstream_abi`; contract types are addresses and EigenLayer's "
            "SignatureWithExpiry is (bytes,uint256) in the ABI."
        ),
        "contracts": contracts,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devchain.upstream_abi", description=__doc__)
    parser.add_argument("git_dir", help="a clone (or bare mirror) of the upstream repository")
    parser.add_argument("--commit", default=COMMIT)
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    try:
        document = upstream_signatures(args.git_dir, args.commit)
    except (CompileError, subprocess.CalledProcessError) as exc:
        print(exc, file=sys.stderr)
        return 1
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
