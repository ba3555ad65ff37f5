"""The platform's CA and certificates (issue 45, point 1; `venice_core.security.ca`), with the real `cryptography`:
made once, keys mode 0600, each host's certificate naming its address and signed by the CA, kept while good and issued
again when not, an operator's CA used and never written, its bad files refused by name, and each one's expiry in
`venice status`."""

from __future__ import annotations

import datetime
import ipaddress
import stat
from pathlib import Path

import pytest
from cryptography import x509

from tests.support.platform import make_platform_env
from venice_core.config import ClusterConfig
from venice_core.embedded import platform
from venice_core.errors import ConfigError
from venice_core.security import ca
from venice_core.security import files as security_files

HOSTS = ["kafka-0", "server-dc-1.2", "postgres"]


def _config(tmp_path: Path, **extra: str) -> ClusterConfig:
    settings = {"security.enabled": "true", "hosts.enabled": "true", "regions": "dc-0,dc-1", **extra}
    return make_platform_env(tmp_path / "home", settings).config


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_ca_and_each_hosts_and_roles_certificate_are_made_once_keys_private(tmp_path: Path) -> None:
    config = _config(tmp_path)
    authority, issued = ca.issue_all(config, HOSTS)
    assert [i.name for i in issued] == [*HOSTS, *ca.CLIENT_ROLES]
    assert authority.cert_path == security_files.folder(config) / "ca.pem"
    assert _mode(authority.key_path) == 0o600
    assert all(_mode(i.key) == 0o600 for i in issued)
    for host, cert in zip(HOSTS, issued, strict=False):
        certificate = ca.load_certificate(cert.cert)
        certificate.verify_directly_issued_by(authority.certificate)  # raises if another CA signed it
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address(config.hosts.address(host))]
        assert names.get_values_for_type(x509.DNSName) == [host]
    roles = {i.name: ca.load_certificate(i.cert) for i in issued[len(HOSTS) :]}
    for certificate in roles.values():
        usage = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert list(usage) == [x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]  # a client role serves nothing

    # A second run keeps everything (the same serials), the CA too.
    again_ca, again = ca.issue_all(config, HOSTS)
    assert again_ca.certificate.serial_number == authority.certificate.serial_number
    assert [ca.load_certificate(i.cert).serial_number for i in again] == [
        ca.load_certificate(i.cert).serial_number for i in issued
    ]


def test_a_certificate_is_issued_again_when_it_expires_soon_or_no_longer_names_its_host(tmp_path: Path) -> None:
    config = _config(tmp_path)
    authority, issued = ca.issue_all(config, HOSTS)
    kafka = issued[0]
    serial = ca.load_certificate(kafka.cert).serial_number
    folder = kafka.cert.parent
    # Another address for the host (the layout moved it): issued again, for the new one.
    moved = authority.issue(folder, "kafka-0", ["10.213.2.9"])
    assert ca.load_certificate(moved.cert).serial_number != serial
    # Signed by another CA (the operator's was brought after): issued again by this one.
    other = ca.Authority.make(tmp_path / "other.pem", tmp_path / "other.key", "another CA")
    other.issue(folder, "postgres", [config.hosts.address("postgres")])
    reissued = authority.issue(folder, "postgres", [config.hosts.address("postgres")])
    ca.load_certificate(reissued.cert).verify_directly_issued_by(authority.certificate)


def test_expiring_soon_is_issued_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(tmp_path)
    _, issued = ca.issue_all(config, HOSTS[:1])
    serial = ca.load_certificate(issued[0].cert).serial_number
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=ca.LEAF_DAYS) - ca.RENEW_BEFORE / 2
    monkeypatch.setattr(ca, "_now", lambda: later)  # within the renewal margin of its end
    _, again = ca.issue_all(config, HOSTS[:1])
    assert ca.load_certificate(again[0].cert).serial_number != serial


def test_an_operators_ca_is_used_and_never_written(tmp_path: Path) -> None:
    own = ca.Authority.make(tmp_path / "own" / "ca.pem", tmp_path / "own" / "ca.key", "the operator's CA")
    before = (own.cert_path.read_bytes(), own.key_path.read_bytes())
    config = _config(tmp_path, **{"security.ca.cert": str(own.cert_path), "security.ca.key": str(own.key_path)})
    authority, issued = ca.issue_all(config, HOSTS)
    assert authority.cert_path == own.cert_path
    assert not (security_files.folder(config) / "ca.pem").exists()
    for cert in issued:
        ca.load_certificate(cert.cert).verify_directly_issued_by(own.certificate)
    assert (own.cert_path.read_bytes(), own.key_path.read_bytes()) == before


def test_an_operators_bad_ca_files_are_refused_by_name(tmp_path: Path) -> None:
    own = ca.Authority.make(tmp_path / "own" / "ca.pem", tmp_path / "own" / "ca.key", "the operator's CA")
    other = ca.Authority.make(tmp_path / "other" / "ca.pem", tmp_path / "other" / "ca.key", "another CA")
    leaf = own.issue(tmp_path / "leaf", "leaf", ["10.0.0.1"])
    cases = {
        "security.ca.cert and security.ca.key are set together": {"security.ca.cert": str(own.cert_path)},
        f"security.ca.key: {tmp_path / 'none.key'} is not a file": {
            "security.ca.cert": str(own.cert_path),
            "security.ca.key": str(tmp_path / "none.key"),
        },
        f"{other.key_path} is not the key of the CA certificate {own.cert_path}": {
            "security.ca.cert": str(own.cert_path),
            "security.ca.key": str(other.key_path),
        },
        "is not a CA certificate": {"security.ca.cert": str(leaf.cert), "security.ca.key": str(leaf.key)},
        f"{own.key_path} is not a readable PEM certificate": {
            "security.ca.cert": str(own.key_path),
            "security.ca.key": str(own.key_path),
        },
    }
    for n, (message, settings) in enumerate(cases.items()):
        config = _config(tmp_path / f"case-{n}", **settings)
        with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
            ca.issue_all(config, HOSTS)
        assert not (security_files.folder(config) / "certs").exists()  # nothing issued by a CA refused


def test_status_shows_each_certificates_expiry(tmp_path: Path) -> None:
    config = _config(tmp_path)
    lines = platform._certificate_statuses(config)
    assert [(line.name, line.healthy) for line in lines] == [("certificate-ca", False)]  # not made yet
    authority, issued = ca.issue_all(config, HOSTS)
    lines = {line.name: line for line in platform._certificate_statuses(config)}
    expected = {"certificate-ca", *(f"certificate-{i.name}" for i in issued)}
    assert set(lines) == expected
    assert all(line.healthy for line in lines.values())
    ca_expiry = f"{authority.certificate.not_valid_after_utc:%Y-%m-%d}"
    assert lines["certificate-ca"].detail.startswith(f"expires {ca_expiry} ("), lines["certificate-ca"].detail
