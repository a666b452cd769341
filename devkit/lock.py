"""The dependency lock: ``requirements/*.lock`` from ``pyproject.toml`` (docs/DEVELOPING.md).

``make lock`` writes both locks with ``uv pip compile`` (exact versions and hashes for every
package, test and lint tools included) and stamps each with the digest of what it was made
from; ``make lint`` runs ``python -m devkit.lock --check``, which fails when the stamp no
longer matches ``pyproject.toml`` (someone changed a requirement and did not relock) or when
a locked version no longer satisfies a requirement.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
BUILD_IN = ROOT / "requirements" / "build.in"
REQS = ROOT / "requirements"
# Every extra (what `make install` and CI use); the runtime alone (the container image); the
# image builder's protobuf code generator. Each: its lock and what `uv pip compile` reads.
LOCKS = {
    "dev": (REQS / "dev.lock", ["pyproject.toml", "requirements/build.in", "--all-extras"]),
    "runtime": (REQS / "runtime.lock", ["pyproject.toml", "requirements/build.in"]),
    "codegen": (REQS / "codegen.lock", ["requirements/codegen.in"]),
}
STAMP = "# inputs-sha256: "
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)")


def inputs_digest() -> str:
    """A digest of every requirement the locks are made from (nothing else in the files)."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    inputs = {
        "python": project.get("requires-python"),
        "dependencies": project.get("dependencies", []),
        "optional": project.get("optional-dependencies", {}),
        "codegen": (REQS / "codegen.in").read_text(),
        "build": [
            line.strip()
            for line in BUILD_IN.read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")
        ],
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def pins(lock: Path) -> dict[str, str]:
    """Package name -> the exact version the lock holds."""
    found: dict[str, str] = {}
    for line in lock.read_text().splitlines():
        match = PIN.match(line)
        if match:
            found[canonicalize_name(match.group(1))] = match.group(2)
    return found


def problems(name: str) -> list[str]:
    lock, _ = LOCKS[name]
    if not lock.exists():
        return [f"{lock.relative_to(ROOT)} is missing: run `make lock`"]
    text = lock.read_text()
    said = next((ln[len(STAMP) :] for ln in text.splitlines() if ln.startswith(STAMP)), "")
    found: list[str] = []
    if said != inputs_digest():
        found.append(
            f"{lock.relative_to(ROOT)} was made from other requirements than pyproject.toml's "
            "and requirements/build.in's today: run `make lock` and commit the result"
        )
    locked = pins(lock)
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    wanted = list(project.get("dependencies", []))
    if name == "dev":
        for extra in project.get("optional-dependencies", {}).values():
            wanted += extra
    elif name == "codegen":
        dev = project["optional-dependencies"]["dev"]
        wanted = [r for r in dev if r.startswith("grpcio-tools")]
    for spec in wanted:
        req = Requirement(spec)
        if req.marker is not None and not req.marker.evaluate():
            continue
        version = locked.get(canonicalize_name(req.name))
        if version is None:
            found.append(f"{lock.relative_to(ROOT)} has no pin for {req.name}")
        elif not req.specifier.contains(version, prereleases=True):
            pinned = f"{req.name}=={version}"
            found.append(f"{lock.relative_to(ROOT)} pins {pinned}, not {req.specifier}")
    return found


def write(uv: str) -> None:
    dev_lock, _ = LOCKS["dev"]
    for name, (lock, sources) in LOCKS.items():
        command = [
            uv, "pip", "compile", *sources,
            "--generate-hashes", "--universal", "--python-version", "3.11", "--quiet",
            "--custom-compile-command", "make lock", "-o", str(lock.relative_to(ROOT)),
        ]  # fmt: skip
        if name != "dev":
            command += ["--constraint", str(dev_lock.relative_to(ROOT))]  # the same versions
        subprocess.run(command, cwd=ROOT, check=True)
        lines = [ln for ln in lock.read_text().splitlines() if not ln.startswith(STAMP)]
        lock.write_text("\n".join([STAMP + inputs_digest(), *lines]) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--check", action="store_true", help="fail if a lock is stale")
    group.add_argument("--write", metavar="UV", help="relock with this uv executable")
    args = parser.parse_args(argv)
    if args.write:
        write(args.write)
        return 0
    found = [p for name in LOCKS for p in problems(name)]
    for problem in found:
        print(f"lock: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
