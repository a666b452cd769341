"""checkov on the production overlay (``make checkov``): zero failures, every skip explained.

The run needs checkov, which ``make checkov`` installs in ``.venv-checkov`` (it is not a
dependency of the services); without it only the report parsing is tested here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deploy.checkov_run import findings, run_checkov

pytestmark = pytest.mark.unit

CHECKOV = Path(__file__).resolve().parents[2] / ".venv-checkov" / "bin" / "checkov"


def test_findings_list_failures_and_skips_with_their_reasons() -> None:
    report = {
        "results": {
            "failed_checks": [
                {
                    "check_id": "CKV_K8S_43",
                    "resource": "Deployment.kishpa.wallet",
                    "check_name": "Image should use digest",
                }
            ],
            "skipped_checks": [
                {
                    "check_id": "CKV_K8S_8",
                    "resource": "Deployment.kishpa.beat",
                    "check_result": {"suppress_comment": "Celery beat serves no port"},
                }
            ],
        }
    }
    failed, skipped = findings(report)
    assert failed == ["CKV_K8S_43 Deployment.kishpa.wallet: Image should use digest"]
    assert skipped == ["CKV_K8S_8 Deployment.kishpa.beat: Celery beat serves no port"]


@pytest.mark.skipif(not CHECKOV.exists(), reason="checkov not installed: run `make checkov`")
def test_the_production_overlay_has_no_unexplained_checkov_failure() -> None:
    failed, skipped = findings(run_checkov(str(CHECKOV)))
    assert failed == []
    assert all(": " in line and len(line.split(": ", 1)[1]) >= 30 for line in skipped), skipped
