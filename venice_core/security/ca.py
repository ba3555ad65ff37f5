"""The platform's certificate authority (issue 45, point 1): made at the first `venice up` of a secured config
(`security.enabled`), or brought by the operator (`security.ca.cert` and `security.ca.key`: the files are used as
they are, never written); a certificate for each host (each process `venice up` runs: its address as the subject's
alternative name, for serving and for its own calls) and one for each client role. Private keys are written mode
0600, whole or not at all (a temporary file renamed into place). A certificate is issued again when it is missing,
when it no longer covers its host's address, when it was signed by another CA, or when it has less than
`RENEW_BEFORE` left: `venice up` renews; `venice status` shows each one's expiry."""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from venice_core.config import ClusterConfig
from venice_core.config.security_layout import DATABASE_CLIENT
from venice_core.errors import ConfigError
from venice_core.security.files import certificates_folder, folder, write_private

CA_DAYS = 3650
LEAF_DAYS = 397  # what browsers accept for a server certificate
RENEW_BEFORE = datetime.timedelta(days=30)
# The client roles' certificates (security.principals says which principal presents which).
CLIENT_ROLES = ("admin", "region-server", "push-job", "nearline-writer", "davinci-client", "reader", DATABASE_CLIENT)


@dataclass(frozen=True)
class Issued:
    """A certificate and its key on disk, and when it expires."""

    name: str
    cert: Path
    key: Path
    not_after: datetime.datetime


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _write_public(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def _key_bytes(key: ec.EllipticCurvePrivateKey) -> bytes:
    # PKCS#8, unencrypted: what Kafka's PEM key stores (KIP-651), PostgreSQL and Redis read.
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def load_certificate(path: Path) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} is not a readable PEM certificate: {exc}") from None


class Authority:
    """A CA's certificate and key, loaded from disk."""

    def __init__(self, cert_path: Path, key_path: Path) -> None:
        self.cert_path, self.key_path = cert_path, key_path
        self.certificate = load_certificate(cert_path)
        try:
            key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        except (OSError, ValueError, TypeError) as exc:
            raise ConfigError(f"{key_path} is not a readable, unencrypted PEM private key: {exc}") from None
        if key.public_key().public_numbers() != self.certificate.public_key().public_numbers():  # type: ignore[union-attr]  # every key type has them
            raise ConfigError(f"{key_path} is not the key of the CA certificate {cert_path}")
        self.key = key
        constraints = self.certificate.extensions.get_extension_for_class(x509.BasicConstraints).value
        if not constraints.ca:
            raise ConfigError(f"{cert_path} is not a CA certificate (its basic constraints say CA:FALSE)")

    @classmethod
    def make(cls, cert_path: Path, key_path: Path, common_name: str) -> Authority:
        """A new self-signed CA (an EC P-256 key), written to the two paths."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        now = _now()
        certificate = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )  # key_cert_sign, crl_sign
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        write_private(key_path, _key_bytes(key))
        _write_public(cert_path, certificate.public_bytes(serialization.Encoding.PEM))
        return cls(cert_path, key_path)

    def issue(self, folder: Path, name: str, addresses: Iterable[str] = (), server: bool = True) -> Issued:
        """`<folder>/<name>.pem` and `.key`: a certificate for `name` (its common name and a DNS name) and
        `addresses` (IP alternative names), for TLS clients and, with `server`, servers; kept while still good."""
        cert_path, key_path = folder / f"{name}.pem", folder / f"{name}.key"
        wanted = {ipaddress.ip_address(a) for a in addresses}
        kept = self._still_good(cert_path, wanted) if key_path.exists() else None
        if kept is not None:
            return Issued(name, cert_path, key_path, kept.not_valid_after_utc)
        key = ec.generate_private_key(ec.SECP256R1())
        now = _now()
        names: list[x509.GeneralName] = [x509.DNSName(name), *(x509.IPAddress(a) for a in sorted(wanted, key=str))]
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH, *([ExtendedKeyUsageOID.SERVER_AUTH] if server else [])]
        certificate = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(min(now + datetime.timedelta(days=LEAF_DAYS), self.certificate.not_valid_after_utc))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.certificate.public_key()),  # type: ignore[arg-type]  # the CA's key is EC or RSA
                critical=False,
            )
            .sign(self.key, hashes.SHA256())  # type: ignore[arg-type]  # a CA key signs
        )
        write_private(key_path, _key_bytes(key))
        _write_public(cert_path, certificate.public_bytes(serialization.Encoding.PEM))
        return Issued(name, cert_path, key_path, certificate.not_valid_after_utc)

    def _still_good(
        self, cert_path: Path, addresses: set[ipaddress.IPv4Address | ipaddress.IPv6Address]
    ) -> x509.Certificate | None:
        """The certificate at `cert_path` when it can be kept (this CA's, naming `addresses`, not near its end)."""
        try:
            certificate = load_certificate(cert_path)
            certificate.verify_directly_issued_by(self.certificate)
            alternative = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except Exception:  # noqa: BLE001 - any doubt (missing, unreadable, another CA's, no alternative names): again
            return None
        covered = set(alternative.get_values_for_type(x509.IPAddress))
        good = addresses <= covered and time_left(certificate.not_valid_after_utc) > RENEW_BEFORE
        return certificate if good else None


def time_left(expires: datetime.datetime) -> datetime.timedelta:
    return expires - _now()


def authority(config: ClusterConfig) -> Authority:
    """The operator's CA (`security.ca.cert`, `security.ca.key`), else the platform's own, made the first time."""
    own = config.security
    if own.ca_cert is not None or own.ca_key is not None:
        if own.ca_cert is None or own.ca_key is None:
            raise ConfigError("security.ca.cert and security.ca.key are set together (a CA's certificate and its key)")
        for setting, path in (("security.ca.cert", own.ca_cert), ("security.ca.key", own.ca_key)):
            if not path.is_file():
                raise ConfigError(f"{setting}: {path} is not a file")
        return Authority(own.ca_cert, own.ca_key)
    cert_path, key_path = folder(config) / "ca.pem", folder(config) / "ca.key"
    if cert_path.exists() and key_path.exists():
        return Authority(cert_path, key_path)
    return Authority.make(cert_path, key_path, f"{config.cluster_name} platform CA")


def issue_all(config: ClusterConfig, hosts: Iterable[str]) -> tuple[Authority, list[Issued]]:
    """The CA, a certificate for each host (its address) and one for each client role."""
    ca = authority(config)
    certs = certificates_folder(config)
    issued = [ca.issue(certs, host, [config.hosts.address(host)]) for host in hosts]
    issued += [ca.issue(certs, role, server=False) for role in CLIENT_ROLES]
    return ca, issued
