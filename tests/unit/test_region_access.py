"""Who may ask a secured region server for what (`RegionServer.authorize`), and the clients' certificate settings
(no server: the rules alone; `tests/integration/test_security.py` runs them over TLS)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.platform import make_platform_env, metadata_env
from venice_core.controller import store_readers
from venice_core.errors import ConfigError
from venice_core.security import tls
from venice_core.server.region_server import RegionServer


def _ask(principal: str | None, path: str) -> str | None:
    server = SimpleNamespace(readers={"users": frozenset({"reader"}), "a b": frozenset({"spaced"})})
    return RegionServer.authorize(server, principal, path)  # type: ignore[arg-type]  # the rules need the readers alone


@pytest.mark.parametrize("path", ["/storage/users/a2V5", "/storage/users", "/schema/users", "/dictionary/users/2"])
def test_a_stores_reads_are_for_its_readers_and_the_platform(path: str) -> None:
    assert _ask("reader", path) is None
    assert _ask("admin", path) is None and _ask("region-server", path) is None
    refusal = _ask("stranger", path)
    assert refusal is not None and "stranger may not read store 'users'" in refusal
    assert "venice store acl grant users --principal stranger --read" in refusal
    assert _ask(None, path) is not None
    assert _ask("reader", path.replace("users", "other")) is not None  # another store's


def test_the_internal_endpoints_are_the_platforms_and_health_anyones() -> None:
    for path in ("/sync", "/metrics", "/whatever"):
        assert _ask("reader", path) == f"{path} is for the platform's principals only"
        assert _ask("admin", path) is None
    assert _ask("reader", "/health") is None and _ask("stranger", "/health") is None
    assert _ask("davinci-client", "/schema/users") is None  # it reads every topic already
    assert _ask("davinci-client", "/dictionary/users/1") is None
    assert _ask("davinci-client", "/storage/users/a2V5") is not None  # but not the store's values
    assert _ask("reader", "/routing/users") is None and _ask("stranger", "/routing/users") is not None
    assert _ask("spaced", "/storage/a%20b/a2V5") is None  # the name as the reads decode it


def test_a_client_certificate_without_its_key_is_refused(tmp_path: Path) -> None:
    config = make_platform_env(tmp_path / "home", {"security.enabled": "true", "security.client.cert": "/x.pem"})
    with pytest.raises(ConfigError, match="security.client.cert and security.client.key are set together"):
        tls.client_context(config.config)
    assert tls.client_context(make_platform_env(tmp_path / "plain").config) is None  # no security, no TLS


def test_a_peer_certificates_principal_is_its_common_name() -> None:
    peer = {"subject": ((("organizationName", "x"),), (("commonName", "reader"),))}
    assert tls.principal_of(peer) == "reader"
    assert tls.principal_of({}) is None and tls.principal_of(None) is None


def test_store_acl_commands_keep_a_stores_readers_and_refuse_what_they_cannot_do(tmp_path: Path) -> None:
    env, meta = metadata_env(tmp_path, "", **{"security.enabled": "true"})
    try:
        missing = env.cli("store", "acl", "grant", "users", "--principal", "reader")
        assert missing.returncode == 2 and "say which permission: --read" in missing.stderr
        granted = env.cli("store", "acl", "grant", "users", "--principal", "reader", "--read", check=True)
        assert "reader may now read 'users'" in granted.stdout
        again = env.cli("store", "acl", "grant", "users", "--principal", "reader", "--read", check=True)
        assert "could already read" in again.stdout
        listed = env.cli("store", "acl", "list", "users", "--json", check=True)
        assert json.loads(listed.stdout) == {"store": "users", "read": ["reader"]}
        assert store_readers.every_reader(meta) == {"users": frozenset({"reader"})}
        bad = env.cli("store", "acl", "grant", "users", "--principal", "no spaces", "--read")
        assert bad.returncode == 2 and "invalid principal 'no spaces'" in bad.stderr
        unknown = env.cli("store", "acl", "grant", "nope", "--principal", "reader", "--read")
        assert unknown.returncode == 1 and "nope" in unknown.stderr
        env.cli("store", "acl", "revoke", "users", "--principal", "reader", "--read", check=True)
        assert store_readers.readers(meta, "users") == []
        for reserved in ("admin", "region-server", "broker", "kafka-1", "server-dc-0"):
            refused = env.cli("security", "certificate", reserved)
            assert refused.returncode == 2 and "a name of the platform's own" in refused.stderr, reserved
        issued = env.cli("security", "certificate", "analytics", check=True)
        assert "certificate" in issued.stdout and (env.config.data_dir / "security/certs/analytics.key").exists()
    finally:
        meta.dispose()
