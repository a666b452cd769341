"""The rotation helpers both TLS sides share: a file stamp, and whether a key fits its cert."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from devkit.tlscerts import TestCA
from services.common.tls import check_pair
from shared.tls import TlsConfigError, file_stamp, key_matches

pytestmark = pytest.mark.unit


def test_a_key_matches_its_own_certificate_only(tmp_path: Path) -> None:
    ca = TestCA(tmp_path)
    table, worker = ca.issue("table"), ca.issue("worker")
    assert key_matches(table.cert_pem, table.key_pem)
    assert not key_matches(table.cert_pem, worker.key_pem)
    with pytest.raises(ValueError, match="PEM"):
        key_matches(b"not a certificate", table.key_pem)
    # The server side states the same verdicts as configuration errors.
    check_pair(table.cert_pem, table.key_pem)
    with pytest.raises(TlsConfigError, match="does not belong"):
        check_pair(table.cert_pem, worker.key_pem)
    with pytest.raises(TlsConfigError, match="not valid PEM"):
        check_pair(table.cert_pem, b"junk")


def test_a_stamp_changes_with_a_rewrite_and_marks_a_missing_file(tmp_path: Path) -> None:
    cert, absent = tmp_path / "tls.crt", tmp_path / "gone.key"
    cert.write_bytes(b"one")
    os.utime(cert, ns=(1_000_000_000, 1_000_000_000))
    first = file_stamp([cert, absent, None])
    assert first == ((1_000_000_000, 3), None, None)
    cert.write_bytes(b"two!")
    os.utime(cert, ns=(2_000_000_000, 2_000_000_000))
    assert file_stamp([cert, absent, None]) == ((2_000_000_000, 4), None, None)
