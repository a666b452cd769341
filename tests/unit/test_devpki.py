"""`kishpa run --tls`'s development CA and operator issuer (cli/devpki.py)."""

from __future__ import annotations

import time
from pathlib import Path

import jwt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from cli.devpki import DEV_KEY_ID, DevPki, dev_operator_token
from services.common.auth import Admin, TokenAuthority
from services.common.errors import Unauthenticated
from services.common.oidc import OidcConfig, OidcVerifier
from services.common.settings import DEV_ISSUER
from services.common.tls import check_pair

pytestmark = pytest.mark.unit


def test_each_workload_certificate_names_it_and_is_signed_by_the_ca(tmp_path: Path) -> None:
    pki = DevPki(tmp_path / "tls")
    files = pki.issue("table")
    cert = x509.load_pem_x509_certificate(files.cert.read_bytes())
    ca = x509.load_pem_x509_certificate(pki.ca_file.read_bytes())
    cert.verify_directly_issued_by(ca)  # raises unless the CA signed it
    check_pair(files.cert.read_bytes(), files.key.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.UniformResourceIdentifier) == ["spiffe://kishpa/table"]
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    assert "127.0.0.1" in [str(ip) for ip in names.get_values_for_type(x509.IPAddress)]
    # Only the owner may read the keys.
    assert files.key.stat().st_mode & 0o077 == 0
    assert (tmp_path / "tls" / "ca.key").stat().st_mode & 0o077 == 0
    # A restart of the stack keeps the CA and the certificates (browsers' exceptions too).
    again = DevPki(tmp_path / "tls")
    assert again.issue("table").cert.read_bytes() == files.cert.read_bytes()
    assert again.ca_file.read_bytes() == pki.ca_file.read_bytes()


def _verifier(pki: DevPki) -> TokenAuthority:
    env = pki.oidc_environment()
    config = OidcConfig(
        issuer=env["KISHPA_OIDC_ISSUER"],
        audience=env["KISHPA_OIDC_AUDIENCE"],
        jwks_url=env["KISHPA_OIDC_JWKS_URL"],
    )
    return TokenAuthority("t" * 40, None, external=OidcVerifier(config))


def test_the_development_issuer_makes_operators_only_with_its_own_key(tmp_path: Path) -> None:
    pki = DevPki(tmp_path / "tls")
    assert pki.oidc_environment()["KISHPA_OIDC_JWKS_URL"].startswith("file://")
    authority = _verifier(pki)
    token = dev_operator_token(pki.issuer_key_file, "ann", ["finance"])
    assert authority.verify(token) == Admin("oidc:ann", "ann", frozenset({"finance"}))
    # Another key under the issuer's key id (a workload's TLS key, say) proves nothing.
    now = int(time.time())
    forged = jwt.encode(
        {
            "iss": DEV_ISSUER,
            "aud": "kishpa",
            "sub": "mallory",
            "roles": ["kishpa-finance"],
            "iat": now,
            "exp": now + 60,
        },
        ec.generate_private_key(ec.SECP256R1()),
        algorithm="ES256",
        headers={"kid": DEV_KEY_ID},
    )
    with pytest.raises(Unauthenticated) as refused:
        authority.verify(forged)
    assert refused.value.reason == "TOKEN_INVALID"
