"""``make audit``'s verdict: canned pip-audit and npm audit reports against an allow-list."""

from __future__ import annotations

import datetime

import pytest

from deploy.audit import (
    ALLOWLIST,
    load_allowlist,
    npm_audit_findings,
    pip_audit_findings,
    verdict,
)

pytestmark = pytest.mark.unit

TODAY = datetime.date(2026, 12, 2)
PIP_REPORT = {
    "dependencies": [
        {
            "name": "Jinja2",
            "version": "3.1.0",
            "vulns": [
                {
                    "id": "PYSEC-2024-1",
                    "aliases": ["GHSA-aaaa-bbbb-cccc"],
                    "fix_versions": ["3.1.4"],
                }
            ],
        },
        {"name": "grpcio", "version": "1.85.3", "vulns": []},
    ]
}
NPM_REPORT = {
    "vulnerabilities": {
        "esbuild": {"via": [{"source": 1102341, "url": "https://github.com/advisories/GHSA-67mh"}]},
        "vite": {"via": ["esbuild"]},
    }
}
ALLOW = """
[[accept]]
id = "GHSA-aaaa-bbbb-cccc"
package = "jinja2"
reason = "Only sandboxed templates are affected; we render none. Reviewed by ops."
until = 2027-01-31
"""


def test_findings_are_read_from_both_reports() -> None:
    pip = pip_audit_findings(PIP_REPORT)
    npm = npm_audit_findings(NPM_REPORT)
    assert [(f.package, f.advisory) for f in pip] == [("jinja2", "PYSEC-2024-1")]
    assert [(f.package, f.advisory) for f in npm] == [("esbuild", "GHSA-67mh")]


def test_an_accepted_advisory_passes_and_an_unknown_one_fails() -> None:
    found = pip_audit_findings(PIP_REPORT) + npm_audit_findings(NPM_REPORT)
    problems, notes = verdict(found, load_allowlist(ALLOW), TODAY)
    assert len(problems) == 1
    assert "esbuild: GHSA-67mh is not in audit-allowlist.toml" in problems[0]
    assert notes == []


def test_an_expired_acceptance_fails_and_a_stale_one_is_noted() -> None:
    expired = ALLOW.replace("2027-01-31", "2026-11-30")
    problems, _ = verdict(pip_audit_findings(PIP_REPORT), load_allowlist(expired), TODAY)
    assert problems == [
        "jinja2: the acceptance of GHSA-aaaa-bbbb-cccc ended 2026-11-30: review it again"
    ]
    _, notes = verdict([], load_allowlist(ALLOW), TODAY)
    assert notes == ["jinja2 GHSA-aaaa-bbbb-cccc: no longer reported; remove it"]


def test_an_entry_without_a_reason_is_refused() -> None:
    reason = "Only sandboxed templates are affected; we render none. Reviewed by ops."
    with pytest.raises(ValueError, match="needs id, package, a reason, until"):
        load_allowlist(ALLOW.replace(reason, "fine"))


def test_the_shipped_allowlist_loads() -> None:
    assert isinstance(load_allowlist(ALLOWLIST.read_text()), list)
