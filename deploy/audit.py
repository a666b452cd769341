"""``make audit``: known vulnerabilities in the Python and npm dependencies (a release step).

Runs ``pip-audit`` on the installed Python environment and ``npm audit`` on ``web/``, then
compares what they report with the reviewed allow-list ``deploy/audit-allowlist.toml``:
every finding must be listed there (advisory id, package, why it is accepted, until when),
or the audit fails. An entry past its ``until`` date fails too (review it again); an entry
nothing matches any more is reported, to be removed. Both tools need their advisory
services (PyPI's and OSV's, npm's), so this runs where those are reachable, not in
``make test`` (docs/operations.md, "Releasing").
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ALLOWLIST = ROOT / "deploy" / "audit-allowlist.toml"


@dataclass(frozen=True)
class Finding:
    """One advisory against one installed package."""

    ecosystem: str  # "pypi" or "npm"
    package: str
    advisory: str
    aliases: frozenset[str] = frozenset()

    def ids(self) -> frozenset[str]:
        return self.aliases | {self.advisory}


@dataclass(frozen=True)
class Accepted:
    """A reviewed allow-list entry."""

    advisory: str
    package: str
    reason: str
    until: datetime.date


def load_allowlist(text: str) -> list[Accepted]:
    """The ``[[accept]]`` entries; each needs an id, a package, a reason and a date."""
    entries = []
    for raw in tomllib.loads(text).get("accept", []):
        missing = {"id", "package", "reason", "until"} - set(raw)
        if missing or len(str(raw.get("reason", "")).strip()) < 20:
            raise ValueError(f"allow-list entry {raw!r}: needs id, package, a reason, until")
        until = raw["until"]
        if not isinstance(until, datetime.date):
            raise ValueError(f"allow-list entry {raw['id']}: until must be a date (2027-01-31)")
        entries.append(Accepted(str(raw["id"]), str(raw["package"]), str(raw["reason"]), until))
    return entries


def pip_audit_findings(report: dict[str, Any]) -> list[Finding]:
    """Findings of ``pip-audit --format json``."""
    out = []
    for dep in report.get("dependencies", []):
        for vuln in dep.get("vulns", []):
            out.append(
                Finding("pypi", dep["name"].lower(), vuln["id"], frozenset(vuln.get("aliases", [])))
            )
    return out


def npm_audit_findings(report: dict[str, Any]) -> list[Finding]:
    """Findings of ``npm audit --json`` (npm 7+): one per advisory and package."""
    out = []
    for name, vuln in report.get("vulnerabilities", {}).items():
        for via in vuln.get("via", []):
            if isinstance(via, dict):  # a string names the dependency that carries it
                advisory = str(via.get("url", "")).rsplit("/", 1)[-1] or str(via.get("source"))
                out.append(Finding("npm", name, advisory))
    return out


def verdict(
    found: list[Finding], accepted: list[Accepted], today: datetime.date
) -> tuple[list[str], list[str]]:
    """(problems that fail the audit, notes) for these findings against the allow-list."""
    problems, notes = [], []
    used: set[tuple[str, str]] = set()
    for finding in found:
        match = next(
            (a for a in accepted if a.package == finding.package and a.advisory in finding.ids()),
            None,
        )
        if match is None:
            problems.append(
                f"{finding.ecosystem} {finding.package}: {finding.advisory} is not in "
                f"{ALLOWLIST.name}: upgrade, or review and accept it there"
            )
            continue
        used.add((match.advisory, match.package))
        if match.until < today:
            problems.append(
                f"{finding.package}: the acceptance of {match.advisory} ended {match.until}: "
                "review it again"
            )
    for entry in accepted:
        if (entry.advisory, entry.package) not in used:
            notes.append(f"{entry.package} {entry.advisory}: no longer reported; remove it")
    return problems, notes


def _run_json(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    done = subprocess.run(  # noqa: S603 - the audit tools, with fixed arguments
        command,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
        env={**os.environ, **(env or {})},
    )
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise RuntimeError(f"{command[0]} failed: {done.stderr[-2000:]}") from None
    if not isinstance(report, dict):
        raise RuntimeError(f"{command[0]} gave no JSON object")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.audit", description=__doc__)
    parser.add_argument("--pip-audit", default="pip-audit", help="the pip-audit executable")
    parser.add_argument("--python", default=sys.executable, help="the environment to audit")
    parser.add_argument("--npm", default="npm")
    args = parser.parse_args(argv)
    accepted = load_allowlist(ALLOWLIST.read_text())
    # pip-audit runs in its own virtualenv; pip-api's variable points it at ours.
    python = _run_json(
        [args.pip_audit, "--format", "json", "--progress-spinner", "off", "--skip-editable"],
        ROOT,
        env={"PIPAPI_PYTHON_LOCATION": args.python},
    )
    npm = _run_json([args.npm, "audit", "--json"], ROOT / "web")
    found = pip_audit_findings(python) + npm_audit_findings(npm)
    problems, notes = verdict(found, accepted, datetime.date.today())
    print(f"audit: {len(found)} advisories, {len(problems)} not accepted")
    for line in notes:
        print(f"  note: {line}")
    for line in problems:
        print(f"  {line}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
