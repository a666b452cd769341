"""Test certificates, made with ``cryptography``: a CA and workload certificates signed by it.

Each workload certificate names its workload as the URI SAN ``spiffe://kishpa/<name>`` (the
production convention, docs/operations.md) and is valid for ``localhost`` and 127.0.0.1 so
loopback clients verify it.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

_PEM = serialization.Encoding.PEM


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(_PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


@dataclass(frozen=True)
class Issued:
    """A certificate and its key, as PEM, and where they were written."""

    name: str
    cert_pem: bytes
    key_pem: bytes
    cert_file: Path
    key_file: Path
    serial: int


class TestCA:
    """A self-signed CA writing its certificate and the ones it signs under ``directory``."""

    __test__ = False  # not a pytest class

    def __init__(self, directory: Path, name: str = "kishpa-test-ca") -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._key = _key()
        now = datetime.datetime.now(datetime.UTC)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.cert_pem = self.cert.public_bytes(_PEM)
        self.ca_file = directory / f"{name}.crt"
        self.ca_file.write_bytes(self.cert_pem)

    def issue(
        self,
        workload: str,
        *,
        cert_file: Path | None = None,
        key_file: Path | None = None,
        uri: bool = True,
        common_name: str | None = None,
        dns_names: Sequence[str] = (),
    ) -> Issued:
        """A certificate for ``workload`` (URI SAN unless ``uri=False``), written to files."""
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        serial = x509.random_serial_number()
        names: list[x509.GeneralName] = [
            x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            *(x509.DNSName(name) for name in dns_names),
        ]
        if uri:
            names.insert(0, x509.UniformResourceIdentifier(f"spiffe://kishpa/{workload}"))
        cert = (
            x509.CertificateBuilder()
            .subject_name(
                x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name or workload)])
            )
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(serial)
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=2))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        cert_path = cert_file or self.directory / f"{workload}.crt"
        key_path = key_file or self.directory / f"{workload}.key"
        cert_pem, key_pem = cert.public_bytes(_PEM), _key_pem(key)
        key_path.write_bytes(key_pem)
        cert_path.write_bytes(cert_pem)
        return Issued(workload, cert_pem, key_pem, cert_path, key_path, serial)
