"""A region server killed with SIGKILL mid-ingestion resumes from its checkpoint and ends with exactly the data."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from scripts.generate_dataset import generate
from tests.integration.test_push_e2e import _expected
from tests.support.platform import PlatformEnv
from venice_core.client import ReadClient
from venice_core.controller import versions
from venice_core.embedded import servers
from venice_core.meta import MetadataStore

pytestmark = pytest.mark.slow


def test_sigkill_mid_ingestion_resumes_with_exact_data(platform_env: PlatformEnv, tmp_path: Path) -> None:
    config = platform_env.config
    store = platform_env.create_user_store("crash", 2)
    data = generate(tmp_path / "in", 200_000, files=2)
    push = platform_env.venice_background("push", store, "--input", str(data))
    meta = MetadataStore(config.metadata_db_url)
    try:
        deadline = time.monotonic() + 300
        progress = []
        while time.monotonic() < deadline:  # wait until dc-1 has ingested part of the version
            progress = [
                p
                for p in (versions.partition_progress(meta, store, 1) if _has_version(meta, store) else [])
                if p.region == "dc-1"
            ]
            if any(p.records > 0 for p in progress) and not all(p.status == "COMPLETED" for p in progress):
                break
            assert push.poll() is None, push.communicate()
            time.sleep(0.05)
        else:
            pytest.fail("dc-1 never reported partial progress")
        log_before = servers.process(config, "dc-1").log_file.read_text()
        servers.process(config, "dc-1").kill()
        servers.start(config, "dc-1")
        stdout, stderr = push.communicate(timeout=600)
        assert push.returncode == 0, stderr
    finally:
        if push.poll() is None:
            push.kill()
        meta.dispose()

    log_after = servers.process(config, "dc-1").log_file.read_text()[len(log_before) :]
    resumed = [int(m) for m in re.findall(r"from its checkpoint at offset (\d+)", log_after)]
    assert resumed and max(resumed) > 0, "the restarted server did not resume from a checkpoint"

    expected = _expected(data)
    client = ReadClient("127.0.0.1", config.server_port("dc-1"))
    keys = sorted(expected)
    got = {}
    for start in range(0, len(keys), 1000):
        got.update(client.batch_get(store, keys[start : start + 1000]))
    assert got == expected
    counts = {
        p.partition: p.records
        for p in versions.partition_progress(MetadataStore(config.metadata_db_url), store, 1)
        if p.region == "dc-1"
    }
    assert sum(counts.values()) == len(expected)  # no record counted twice


def _has_version(meta: MetadataStore, store: str) -> bool:
    try:
        versions.get_version(meta, store, 1)
        return True
    except Exception:  # noqa: BLE001 - not created yet
        return False
