"""``kishpa run --tls``: a development CA, one certificate per workload, and a development
operator issuer, so the production identity model runs on one machine.

Everything lives in one directory (``var/tls``) and is made once, then reused (tokens and
browser exceptions survive a restart of the stack); a certificate close to expiry is made
again. Each workload certificate names its workload as the URI SAN ``spiffe://kishpa/<name>``
(its identity, docs/operations.md) and ``localhost``/``127.0.0.1`` (the names its clients
dial here). The ``cli`` certificate is for people's tools (``kishpa play``, ``kishpa admin``):
it names no workload, so it opens the TLS door and grants nothing.

The development operator issuer is an OpenID Connect issuer (:data:`DEV_ISSUER`) whose
public key set is a file the services read (``file://`` JWKS URL) and whose private key only
the operator's shell gets (``operator.env``), never a workload. Production refuses it
(``KISHPA_PRODUCTION=1``).
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from services.common.settings import DEV_ISSUER

DEV_AUDIENCE = "kishpa"
DEV_KEY_ID = "kishpa-dev-1"
CLI = "cli"
"""The certificate of people's tools: a name that is no workload."""
CA_DAYS = 3650
LEAF_DAYS = 90
RENEW_DAYS = 30
DEV_OPERATOR_TOKEN_SECONDS = 900
"""Tokens the development issuer signs live 15 minutes (under the 3600 s operator limit)."""

_PEM = serialization.Encoding.PEM


def _private(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(_PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _load_key(path: Path) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{path} is not an EC private key")
    return key


def _fresh(cert_file: Path, key_file: Path) -> bool:
    """Whether the files hold a certificate that is still good for RENEW_DAYS."""
    if not (cert_file.exists() and key_file.exists()):
        return False
    cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
    left = cert.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    return left > datetime.timedelta(days=RENEW_DAYS)


@dataclass(frozen=True)
class Files:
    """One certificate chain and its key, on disk."""

    cert: Path
    key: Path


class DevPki:
    """The run's CA, its certificates and the development operator issuer, under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        root.chmod(0o700)
        self.ca_file = root / "ca.crt"
        self._ca_key_file = root / "ca.key"
        if not _fresh(self.ca_file, self._ca_key_file):
            self._make_ca()
        self._ca_key = _load_key(self._ca_key_file)
        self._ca = x509.load_pem_x509_certificate(self.ca_file.read_bytes())
        self.issuer_key_file = root / "dev-issuer.key"
        self.jwks_file = root / "dev-issuer-jwks.json"
        if not self.issuer_key_file.exists():
            _private(self.issuer_key_file, ec.generate_private_key(ec.SECP256R1()))
        self._publish_issuer_keys()

    def _make_ca(self) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kishpa-dev-ca")])
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(key, hashes.SHA256())
        )
        _private(self._ca_key_file, key)
        self.ca_file.write_bytes(cert.public_bytes(_PEM))

    def issue(self, name: str) -> Files:
        """The certificate of ``name`` (made now unless a fresh one is on disk)."""
        files = Files(self.root / f"{name}.crt", self.root / f"{name}.key")
        if _fresh(files.cert, files.key) and self._signed_by_ca(files.cert):
            return files
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        names: list[x509.GeneralName] = [
            x509.UniformResourceIdentifier(f"spiffe://kishpa/{name}"),
            x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("::1")),
        ]
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self._ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=LEAF_DAYS))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .sign(self._ca_key, hashes.SHA256())
        )
        _private(files.key, key)
        files.cert.write_bytes(cert.public_bytes(_PEM))
        return files

    def issue_all(self, names: Iterable[str]) -> dict[str, Files]:
        """A certificate for each of ``names``."""
        return {name: self.issue(name) for name in names}

    def _signed_by_ca(self, cert_file: Path) -> bool:
        cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
        return cert.issuer == self._ca.subject and cert.not_valid_before_utc >= (
            self._ca.not_valid_before_utc
        )

    def _publish_issuer_keys(self) -> None:
        public = _load_key(self.issuer_key_file).public_key()
        jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(public))
        jwk.update({"kid": DEV_KEY_ID, "use": "sig", "alg": "ES256"})
        self.jwks_file.write_text(json.dumps({"keys": [jwk]}))

    def oidc_environment(self) -> dict[str, str]:
        """What the services need to trust the development issuer (public data only)."""
        return {
            "KISHPA_OIDC_ISSUER": DEV_ISSUER,
            "KISHPA_OIDC_AUDIENCE": DEV_AUDIENCE,
            "KISHPA_OIDC_JWKS_URL": self.jwks_file.resolve().as_uri(),
        }


def dev_operator_token(
    key_file: Path,
    operator: str,
    roles: Collection[str],
    *,
    audience: str = DEV_AUDIENCE,
    ttl_seconds: int = DEV_OPERATOR_TOKEN_SECONDS,
) -> str:
    """A token of the development issuer for ``operator`` with operator ``roles``."""
    now = int(time.time())
    claims = {
        "iss": DEV_ISSUER,
        "aud": audience,
        "sub": operator,
        "name": operator,
        "roles": [f"kishpa-{role}" for role in sorted(set(roles))],
        "iat": now,
        "exp": now + ttl_seconds,
    }
    key = _load_key(key_file)
    return jwt.encode(claims, key, algorithm="ES256", headers={"kid": DEV_KEY_ID})
