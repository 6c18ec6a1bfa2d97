"""Self-signed TLS for the simulated API servers.

kubectl refuses to send a bearer token over plain http, so each simulated cluster serves HTTPS with
a certificate made at start: a small CA (EC P-256, a few milliseconds to make) and a server
certificate it signs for ``IP:127.0.0.1`` and ``DNS:localhost``. The CA goes into the kubeconfig as
``certificate-authority-data`` so clients verify the server properly, as against a real cluster.
The certificates carry the extensions strict verifiers want (basic constraints, key usage, subject
and authority key identifiers), so Python's ``VERIFY_X509_STRICT`` and Go's crypto/x509 accept them.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
import ssl
import tempfile
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["TlsMaterial", "make_tls"]

_VALIDITY = dt.timedelta(days=365)


@dataclass(frozen=True)
class TlsMaterial:
    """A CA certificate and a server certificate and key it signed, all PEM."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    @property
    def ca_data(self) -> str:
        """The CA as a kubeconfig's ``certificate-authority-data`` (base64 of the PEM)."""
        return base64.b64encode(self.ca_pem).decode()

    def server_context(self) -> ssl.SSLContext:
        """An SSL context serving the certificate (``load_cert_chain`` only reads files, so briefly via a
        private temporary directory that is removed at once)."""
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with tempfile.TemporaryDirectory(prefix="sim-tls-") as tmp:
            cert = os.path.join(tmp, "tls.crt")
            key = os.path.join(tmp, "tls.key")
            with open(cert, "wb") as f:
                f.write(self.cert_pem)
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(self.key_pem)
            ctx.load_cert_chain(cert, key)
        return ctx

    def client_context(self) -> ssl.SSLContext:
        """An SSL context that trusts only this CA (for aiohttp clients in tests and benchmarks)."""
        return ssl.create_default_context(cadata=self.ca_pem.decode())


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "dispatcher-sim"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def make_tls(name: str, *, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> TlsMaterial:
    """A fresh CA and a server certificate for ``hosts`` (IP addresses and DNS names), named after ``name``."""
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(f"{name}-ca")
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return TlsMaterial(
        ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM),
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )
