"""Wait until a region server serves a version, through its `/health` endpoint."""

from __future__ import annotations

import http.client
import json
import time

from venice_core.config import ClusterConfig
from venice_core.errors import ComponentError


def wait_until_served(config: ClusterConfig, store: str, number: int, regions: list[str], timeout: float = 30) -> None:
    """Region servers pick up a swap within a second; wait so a read right after the push sees the new data."""

    for region in regions:
        deadline = time.monotonic() + timeout
        while True:
            try:
                conn = http.client.HTTPConnection(
                    config.server_host if config.server_host != "0.0.0.0" else "127.0.0.1",
                    config.server_port(region),
                    timeout=5,
                )
                conn.request("GET", "/health")
                if json.loads(conn.getresponse().read()).get("stores", {}).get(store) == number:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise ComponentError(f"region {region} did not start serving {store} v{number} within {timeout}s")
            time.sleep(0.2)
