"""Certificates and keys for one real cluster of the rig, written as files the Go components read.

One CA per cluster signs everything in it, as kubeadm does: the API server's serving certificate, the client
certificates of the control-plane components (their user names are the ones Kubernetes' bootstrap RBAC grants,
``system:kube-controller-manager`` and ``system:kube-scheduler``), the webhook serving certificates of Kueue and
JobSet, and the service-account signing key. EC P-256 keys: a few milliseconds each.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertPair", "ClusterPki", "write_private"]

_VALIDITY = dt.timedelta(days=365)


def write_private(path: Path, data: bytes | str) -> None:
    """Write a file only its owner can read (keys, tokens, kubeconfigs with credentials)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=not ca,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


@dataclass(frozen=True)
class CertPair:
    """A certificate and its key, as PEM and as the files written for the components."""

    cert_pem: bytes
    key_pem: bytes
    cert_file: Path
    key_file: Path

    @property
    def cert_data(self) -> str:
        return base64.b64encode(self.cert_pem).decode()

    @property
    def key_data(self) -> str:
        return base64.b64encode(self.key_pem).decode()


class ClusterPki:
    """The CA of one cluster and what it issues, kept under ``directory`` (created mode 0700)."""

    def __init__(
        self,
        name: str,
        directory: Path,
        *,
        ca_dns: str | None = None,
        service_accounts: bool = True,
        rsa_ca: bool = False,
    ) -> None:
        self.name = name
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(0o700)
        self._now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
        # cert-controller reads its CA key with x509.ParsePKCS1PrivateKey: an RSA key in PKCS#1 form.
        self._ca_key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey = (
            rsa.generate_private_key(public_exponent=65537, key_size=2048)
            if rsa_ca
            else ec.generate_private_key(ec.SECP256R1())
        )
        ca_name = x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kueue-dispatcher-rig"),
                x509.NameAttribute(NameOID.COMMON_NAME, f"{name}-ca"),
            ]
        )
        self._ca_ski = x509.SubjectKeyIdentifier.from_public_key(self._ca_key.public_key())
        ca_builder = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(self._ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self._now)
            .not_valid_after(self._now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_usage(ca=True), critical=True)
            .add_extension(self._ca_ski, critical=False)
        )
        if ca_dns:
            # cert-controller (Kueue's certificate rotator) verifies its CA for the DNS name it calls the CA by.
            ca_builder = ca_builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(ca_dns)]), critical=False)
        self._ca_cert = ca_builder.sign(self._ca_key, hashes.SHA256())
        self.ca_pem = self._ca_cert.public_bytes(serialization.Encoding.PEM)
        self.ca_key_pem = self._ca_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL if rsa_ca else serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        self.ca_file = directory / "ca.crt"
        self.ca_file.write_bytes(self.ca_pem)
        self.sa_key_file = directory / "sa.key"
        self.sa_pub_file = directory / "sa.pub"
        if not service_accounts:
            return
        # The service-account token signing key (kube-apiserver signs, kube-controller-manager's token
        # controller signs the legacy secrets, both verify with the public half).
        sa_key = ec.generate_private_key(ec.SECP256R1())
        write_private(self.sa_key_file, _key_pem(sa_key))
        self.sa_pub_file.write_bytes(
            sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )

    @property
    def ca_data(self) -> str:
        """The CA as a kubeconfig's ``certificate-authority-data`` or a webhook's ``caBundle``."""
        return base64.b64encode(self.ca_pem).decode()

    def _issue(
        self,
        stem: str,
        common_name: str,
        *,
        organizations: tuple[str, ...] = (),
        hosts: tuple[str, ...] = (),
        server: bool = False,
    ) -> CertPair:
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(self._ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self._now)
            .not_valid_after(self._now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_usage(ca=False), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(self._ca_ski), critical=False)
        )
        if hosts:
            sans: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    sans.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    sans.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._ca_key, hashes.SHA256())
        pair = CertPair(
            cert_pem=cert.public_bytes(serialization.Encoding.PEM),
            key_pem=_key_pem(key),
            cert_file=self.directory / f"{stem}.crt",
            key_file=self.directory / f"{stem}.key",
        )
        pair.cert_file.write_bytes(pair.cert_pem)
        write_private(pair.key_file, pair.key_pem)
        return pair

    def serving(self, stem: str, common_name: str, hosts: tuple[str, ...]) -> CertPair:
        """A TLS serving certificate for ``hosts`` (IP addresses and DNS names)."""
        return self._issue(stem, common_name, hosts=hosts, server=True)

    def client(self, stem: str, user: str, groups: tuple[str, ...] = ()) -> CertPair:
        """A client certificate: the API server takes CN as the user name and O as the groups."""
        return self._issue(stem, user, organizations=groups)
