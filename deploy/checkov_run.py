"""``make checkov``: checkov's Kubernetes checks on the rendered production overlay.

Renders ``deploy/k8s/overlays/prod`` (what is applied), runs checkov on it and fails on any
failed check. A check that does not apply is skipped in the manifest itself with a
``checkov.io/skipN: CKV_<id>=<why>`` annotation (``deploy/checks.py`` refuses one without
its reason); the skips are printed with their reasons so a reviewer sees them.
checkov lives in its own virtualenv (``.venv-checkov``), so its pins never touch ours.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from deploy.render import overlay_dir, render


def run_checkov(checkov: str, overlay: str = "prod") -> dict[str, Any]:
    """checkov's JSON report on the rendered overlay."""
    with tempfile.TemporaryDirectory(prefix="kishpa-checkov-") as tmp:
        manifest = Path(tmp) / f"{overlay}.yaml"
        manifest.write_text(yaml.safe_dump_all(render(overlay_dir(overlay))))
        done = subprocess.run(  # noqa: S603 - our own tool on our own file
            [checkov, "-f", str(manifest), "--framework", "kubernetes", "-o", "json", "--quiet"],
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
    if not done.stdout.strip():
        raise RuntimeError(f"checkov produced no report: {done.stderr[-2000:]}")
    report = json.loads(done.stdout)
    if isinstance(report, list):  # one entry per framework
        report = report[0]
    if not isinstance(report, dict):
        raise RuntimeError("checkov's report is not a JSON object")
    return report


def findings(report: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(failed checks, skipped checks with their reasons) as printable lines."""
    results = report.get("results", {})
    failed = [
        f"{c['check_id']} {c['resource']}: {c.get('check_name', '')}"
        for c in results.get("failed_checks", [])
    ]
    skipped = [
        f"{c['check_id']} {c['resource']}: {c.get('check_result', {}).get('suppress_comment', '')}"
        for c in results.get("skipped_checks", [])
    ]
    return failed, skipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.checkov_run", description=__doc__)
    parser.add_argument("--checkov", default="checkov", help="the checkov executable")
    parser.add_argument("--overlay", default="prod")
    args = parser.parse_args(argv)
    report = run_checkov(args.checkov, args.overlay)
    failed, skipped = findings(report)
    summary = report.get("summary", {})
    print(
        f"checkov on the {args.overlay} overlay: {summary.get('passed', 0)} passed, "
        f"{len(failed)} failed, {len(skipped)} skipped (with reasons)"
    )
    for line in skipped:
        print(f"  skipped {line}")
    for line in failed:
        print(f"  FAILED {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
