"""Where a secured platform keeps its security material under its data dir. One place for the layout: the config
needs it too (the embedded PostgreSQL's URL names the files its clients connect with), and `venice_core.security`
builds on it."""

from __future__ import annotations

from pathlib import Path

# The client role whose certificate the embedded PostgreSQL's clients present (each process of the platform): its
# common name is the database role's, which the server checks (`clientcert=verify-full`).
DATABASE_CLIENT = "venice"


def security_dir(data_dir: Path) -> Path:
    """The platform's CA (when it made it), the certificates it issued, its secrets."""
    return data_dir / "security"


def ca_file(data_dir: Path, own_ca: Path | None) -> Path:
    """The CA certificate every certificate of the platform is checked against: the operator's, or its own."""
    return own_ca or security_dir(data_dir) / "ca.pem"


def certificates_dir(data_dir: Path) -> Path:
    return security_dir(data_dir) / "certs"


def certificate_files(data_dir: Path, name: str) -> tuple[Path, Path]:
    """The certificate and key the platform issued `name` (a host or a client role)."""
    certs = certificates_dir(data_dir)
    return certs / f"{name}.pem", certs / f"{name}.key"


def secrets_dir(data_dir: Path) -> Path:
    return security_dir(data_dir) / "secrets"


def postgres_passfile(data_dir: Path) -> Path:
    """The embedded PostgreSQL's password in libpq's password-file format, mode 0600 (its clients' `passfile`)."""
    return security_dir(data_dir) / "postgres.pgpass"
