"""A store that exists but serves no version in a region (none pushed yet, or its only version rolled back) is
said so in one line: by the region server's HTTP read (404 with the reason), by the thin client and by `venice get`.
A real region server in this process, with its real sync, on the region's configured port (no broker: there is
nothing to host)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from tests.support.metadata import migrated
from tests.support.platform import SCHEMAS, PlatformEnv, make_platform_env
from tests.support.regions import url_key
from venice_core.client import ReadClient
from venice_core.controller import stores
from venice_core.errors import NoCurrentVersion, StoreNotFound
from venice_core.meta import MetadataStore
from venice_core.server.http import serve
from venice_core.server.region_server import RegionServer


@pytest.fixture
def region(tmp_path) -> Iterator[tuple[PlatformEnv, int]]:
    env = make_platform_env(tmp_path / "home")
    config = env.config
    meta = MetadataStore(config.metadata_db_url)
    migrated(meta)
    key_schema, value_schema = (SCHEMAS / "user_key.avsc").read_text(), (SCHEMAS / "user_value_v1.avsc").read_text()
    stores.create_store(meta, config, "users", key_schema, value_schema, partitions=1)
    meta.dispose()
    server = RegionServer(config, "dc-0")
    server.sync_once()
    port = config.server_port("dc-0")
    http = serve(server, "127.0.0.1", port, config.server.limits)
    try:
        yield env, port
    finally:
        http.shutdown()
        http.server_close()
        server.meta.dispose()


def test_a_store_without_a_current_version_is_a_404_saying_so(region: tuple[PlatformEnv, int]) -> None:
    _, port = region
    with pytest.raises(urllib.error.HTTPError) as answer:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/storage/users/{url_key(b'user-1')}", timeout=10)
    assert answer.value.code == 404
    assert answer.value.headers["X-Venice-Error"] == "NoCurrentVersion"
    assert json.loads(answer.value.read()) == {"error": "store 'users' has no current version in dc-0"}

    client = ReadClient("127.0.0.1", port)
    try:
        with pytest.raises(NoCurrentVersion, match=r"^store 'users' has no current version in dc-0$"):
            client.get("users", "user-1")
        with pytest.raises(NoCurrentVersion, match=r"^store 'users' has no current version in dc-0$"):
            client.batch_get("users", ["user-1", "user-2"])
        with pytest.raises(StoreNotFound):  # an unknown store is still that
            client.get("nobody", "user-1")
    finally:
        client.close()


def test_venice_get_says_so_in_one_line(region: tuple[PlatformEnv, int]) -> None:
    env, _ = region
    result = env.cli("get", "users", "user-1")
    assert result.returncode == 1
    assert result.stderr == "error: store 'users' has no current version in dc-0\n"
    assert result.stdout == ""
