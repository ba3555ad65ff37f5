"""The routing read client against a replicated region of real HTTP fronts (`server.http.serve`) in this process,
over in-memory backends (`fake_region`): reads go to a ready replica of their partition, a killed, broken or slow
instance costs no read, a stale routing table (a replica moved, a new version) is refreshed, a batch is split across
instances and asked of them at once; and a region without routing tables is read as before."""

from __future__ import annotations

import base64
import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.client.fake_region import REGION, STORE, Region, key_bytes, records, start_region
from tests.support.platform import make_platform_env
from venice_core.client import ReadClient
from venice_core.client.routing import RoutingTable, Unrouted
from venice_core.errors import ComponentError, NoCurrentVersion, VeniceError
from venice_core.protocol.batch_get import BATCH_CONTENT_TYPE, decode_records, encode_keys

Start = Callable[..., Region]


@pytest.fixture
def start() -> Iterator[Start]:
    """Start a region (`fake_region.start_region`'s arguments); every one started is stopped at the end."""
    started: list[Region] = []

    def start(*args: Any, **kwargs: Any) -> Region:
        started.append(start_region(*args, **kwargs))
        return started[-1]

    yield start
    for region in started:
        for instance in region.instances:
            instance.delay = 0.0
            if not instance.stopped:
                instance.stop()


def client_of(region: Region, long_tail_ms: float = 20.0) -> ReadClient:
    return ReadClient(seeds=[i.address for i in region.instances], long_tail_retry_ms=long_tail_ms, region=REGION)


def routing_fetches(region: Region) -> int:
    return sum(i.routing_asked for i in region.instances)


def table_of(client: ReadClient) -> RoutingTable:
    table = client._router.cached(STORE)
    assert isinstance(table, RoutingTable)
    return table


def test_a_swap_asks_every_instance_of_the_region_to_sync(start: Start) -> None:
    """`serving.request_sync` (what a swap sends before it waits for the region to serve the new version):
    `POST /sync` answered 202 by each instance's HTTP front, which asks its backend to sync now; one that does not
    answer is passed over."""
    from venice_core.client.serving import request_sync

    region = start(2, 2, [[0], [1]], records(10))
    for instance in region.instances:
        request_sync(*instance.address)
    assert [i.syncs_requested for i in region.instances] == [1, 1]
    host, port = region.instances[1].address
    status, _headers, body = _http_post(f"http://{host}:{port}/sync")
    assert (status, json.loads(body)) == (202, {"sync": "requested"})
    assert region.instances[1].syncs_requested == 2
    region.instances[0].stop()
    request_sync(*region.instances[0].address, timeout=1)  # down: nothing raised


def test_each_get_goes_to_a_ready_replica_of_its_keys_partition_in_turn(start: Start) -> None:
    values = records(120)
    region = start(3, 4, [[0, 1], [1, 2], [2, 0], [0, 1]], values)
    client = client_of(region)
    for _ in range(2):
        for key, value in values.items():
            assert client.get(STORE, key) == value
    assert client.get(STORE, "absent") is None
    assert [i.not_hosted for i in region.instances] == [0, 0, 0]  # never sent where its partition is not
    for partition, replicas in enumerate(region.table):
        assert all(any(r == [partition] for r in i.reads) for i in replicas), partition  # each replica took some
    assert routing_fetches(region) == 1  # every answer named the table's version: fetched once
    table = table_of(client)
    assert (table.region, table.version, table.partition_count) == (REGION, 1, 4)
    client.close()


def test_a_killed_instance_fails_no_read(start: Start) -> None:
    values = records(60)
    region = start(3, 2, [[0, 1], [1, 2]], values)
    client = client_of(region, long_tail_ms=0)  # retries alone
    for key, value in values.items():  # a keep-alive connection to every instance
        assert client.get(STORE, key) == value
    killed = region.instances[1]
    killed.stop()
    started = time.monotonic()
    for key, value in values.items():
        assert client.get(STORE, key) == value
    assert client.batch_get(STORE, list(values)) == values
    assert time.monotonic() - started < 5
    assert client._router.is_suspect(killed.address)  # the next reads try the others first


def test_a_seed_that_is_down_is_passed_over(start: Start) -> None:
    values = records(10)
    region = start(3, 1, [[1, 2]], values)
    region.instances[0].stop()
    client = client_of(region)  # the schema and the table come from the next seed
    assert client.get(STORE, "user-0007") == values["user-0007"]
    assert client.batch_get(STORE, list(values)) == values


def test_a_slow_replica_is_gone_around_after_the_long_tail_delay(start: Start) -> None:
    values = records(20)
    region = start(2, 1, [[0, 1]], values)
    slow = region.instances[0]
    slow.delay = 1.0
    client = client_of(region, long_tail_ms=20)
    took = []
    for key, value in values.items():
        began = time.monotonic()
        assert client.get(STORE, key) == value
        took.append(time.monotonic() - began)
    assert slow.asked >= 1  # in its turn, it was asked first
    assert max(took) < 0.5, took  # answered by the other, well before the slow one would have

    time.sleep(slow.delay)  # the slow one idle again: it takes a request as it comes (then sleeps)
    batches = client_of(region, long_tail_ms=20)
    asked = slow.asked
    for _ in range(2):  # the first batch goes to the slow one first (turns start at the first replica)
        began = time.monotonic()
        assert batches.batch_get(STORE, list(values)) == values
        assert time.monotonic() - began < 0.5
    assert slow.asked > asked

    # the answers the slow one sent late were never read: a connection left waiting was closed, not reused
    slow.delay = 0.0
    time.sleep(1.1)
    for reader in (client, batches):
        for _ in range(2):
            for key, value in values.items():
                assert reader.get(STORE, key) == value
            assert reader.batch_get(STORE, list(values)) == values


def test_a_stuck_seed_does_not_hold_up_the_schema_or_the_table(start: Start) -> None:
    """What any instance answers (the schema, the routing table) is asked of the next one too after the long-tail
    delay: a first seed busy with a slow read costs a new client no more than that."""
    values = records(4)
    region = start(2, 1, [[0, 1]], values)
    stuck = region.instances[0]
    stuck.delay = 1.0
    key = base64.urlsafe_b64encode(key_bytes("user-0001")).decode().rstrip("=")
    with socket.create_connection(stuck.address) as busy:  # a read that keeps its event loop busy for 1 s
        busy.sendall(f"GET /storage/{STORE}/{key} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        while stuck.asked == 0:
            time.sleep(0.005)
        began = time.monotonic()
        assert client_of(region).get(STORE, "user-0002") == values["user-0002"]
        assert time.monotonic() - began < 0.5


def test_without_the_long_tail_a_slow_replica_is_waited_for(start: Start) -> None:
    """The contrast to the long tail: with it off (0), a read sent to the slow replica waits for its answer."""
    values = records(4)
    region = start(2, 1, [[0, 1]], values)
    region.instances[0].delay = 0.3
    client = client_of(region, long_tail_ms=0)
    took = []
    for key in values:
        began = time.monotonic()
        client.get(STORE, key)
        took.append(time.monotonic() - began)
    assert max(took) >= 0.3


def test_a_replica_that_no_longer_hosts_the_partition_sends_the_read_on_and_the_table_is_refreshed(
    start: Start,
) -> None:
    values = records(30)
    region = start(3, 1, [[0, 1]], values)
    client = client_of(region, long_tail_ms=0)
    for key, value in values.items():
        assert client.get(STORE, key) == value
    old_a, old_b, new = region.instances

    region.place([[1]])  # instance 0 drops its replica: the client's table still lists it
    time.sleep(0.1)  # past the minimum interval between refreshes a stale answer asks for
    for key, value in values.items():
        assert client.get(STORE, key) == value
    assert old_a.not_hosted == 1  # one read was sent there (its turn); the table was refreshed after it
    assert routing_fetches(region) == 2
    assert not client._router.is_suspect(old_a.address)  # its 503 was the table's fault, not the instance's

    region.place([[2]])  # the partition moved to the third instance: every replica the client knows is stale
    new_reads = len(new.reads)
    for key, value in values.items():
        assert client.get(STORE, key) == value
    assert old_b.not_hosted == 1  # the first read found no replica left: refreshed at once, read from the new one
    assert routing_fetches(region) == 3
    assert len(new.reads) - new_reads == len(values)
    assert client.batch_get(STORE, list(values)) == values
    assert [table_of(client).replicas[0]] == [(new.address,)]


def test_an_answer_from_a_new_version_refreshes_the_table(start: Start) -> None:
    values = records(40)
    region = start(2, 1, [[0, 1]], values)
    client = client_of(region)
    for key, value in values.items():
        assert client.get(STORE, key) == value
    assert routing_fetches(region) == 1

    # version 2 in two partitions: both instances hold both (no read is refused), the table lists one each
    first, second = region.instances
    region.version, region.partition_count = 2, 2
    region.table = [[first], [second]]
    first.hosted = second.hosted = {0, 1}
    time.sleep(0.1)  # past the minimum interval between refreshes
    assert client.get(STORE, "user-0001") == values["user-0001"]  # answered with X-Venice-Version: 2
    assert routing_fetches(region) == 2
    assert (table_of(client).version, table_of(client).partition_count) == (2, 2)
    first.reads.clear()
    second.reads.clear()
    for key, value in values.items():
        assert client.get(STORE, key) == value
    assert first.reads and {p for r in first.reads for p in r} == {0}  # routed by the new table
    assert second.reads and {p for r in second.reads for p in r} == {1}
    assert routing_fetches(region) == 2


def test_a_read_whose_table_changed_version_under_it_starts_over_on_the_new_one(start: Start) -> None:
    values = records(20)
    region = start(2, 1, [[0]], values)
    client = client_of(region)
    assert client.batch_get(STORE, list(values)) == values
    region.version, region.partition_count = 2, 3
    region.place([[1], [1], [1]])  # version 2 lives on the other instance only
    assert client.get(STORE, "user-0003") == values["user-0003"]
    assert (table_of(client).version, table_of(client).partition_count) == (2, 3)
    region.version, region.partition_count = 3, 2
    region.place([[0], [0]])
    assert client.batch_get(STORE, list(values)) == values
    assert table_of(client).version == 3


def test_a_batch_is_split_by_partition_across_instances_and_a_failed_part_asked_again(start: Start) -> None:
    values = records(200)
    region = start(3, 6, [[0, 1], [1, 2], [2, 0], [0, 1], [1, 2], [2, 0]], values)
    client = client_of(region, long_tail_ms=0)
    keys = [*reversed(values), "absent-1", "user-0005"]  # a key asked twice
    expected = {k: values[k] for k in keys if k in values}
    result = client.batch_get(STORE, keys)
    assert result == expected and list(result) == list(expected)  # in the order asked
    assert [i.not_hosted for i in region.instances] == [0, 0, 0]
    parts = [r for i in region.instances for r in i.reads]
    assert sum(1 for i in region.instances if i.reads) >= 2  # split across instances
    assert sorted(p for r in parts for p in r) == list(range(6))  # each partition asked once

    broken = region.instances[1]
    broken.error = VeniceError("disk on fire")  # 500 to every read
    for instance in region.instances:
        instance.reads.clear()
    asked = broken.asked
    for _ in range(3):
        assert client.batch_get(STORE, keys) == expected
    assert broken.asked > asked  # its parts failed and were asked of the other replicas
    assert not broken.reads
    region.instances[2].stop()  # partitions 1 and 4 now have their second replica broken, the first one killed
    with pytest.raises(ComponentError, match=r"every replica of partition \d of 'users' \(version 1\) in region dc-0"):
        client.batch_get(STORE, keys)
    broken.error = None
    assert client.batch_get(STORE, keys) == expected


def test_a_batch_asks_its_instances_at_once(start: Start) -> None:
    values = records(50)
    region = start(2, 2, [[0], [1]], values)
    client = client_of(region, long_tail_ms=0)
    client.get(STORE, "user-0001")  # the schema and the table
    for instance in region.instances:
        instance.delay = 0.5
    began = time.monotonic()
    assert client.batch_get(STORE, list(values)) == values
    took = time.monotonic() - began
    assert all(i.reads for i in region.instances)
    assert took < 0.9, took  # one after the other would take 1 s


def test_a_read_fails_only_when_every_replica_failed_naming_them(start: Start) -> None:
    values = records(10)
    region = start(3, 1, [[0, 1]], values)
    client = client_of(region)
    assert client.get(STORE, "user-0001") == values["user-0001"]
    first, second, _ = region.instances
    first.stop()
    second.error = VeniceError("disk on fire")
    with pytest.raises(ComponentError) as failed:
        client.get(STORE, "user-0002")
    message = str(failed.value)
    assert message.startswith("every replica of partition 0 of 'users' (version 1) in region dc-0 failed: ")
    assert f"{first.name}: " in message and f"{second.name}: answered 500 VeniceError" in message

    region.table = [[]]  # no replica ready
    with pytest.raises(ComponentError, match=r"^no ready replica of partition 0 of 'users' \(version 1\)"):
        client_of(region).get(STORE, "user-0002")


def test_a_store_without_a_current_version_says_so_through_the_routing_table(start: Start) -> None:
    region = start(2, 1, [[0, 1]], records(2))
    region.version = None
    client = client_of(region)
    with pytest.raises(NoCurrentVersion, match=r"^store 'users' has no current version in dc-0$"):
        client.get(STORE, "user-0001")
    with pytest.raises(NoCurrentVersion):
        client.batch_get(STORE, ["user-0001"])


def test_a_region_without_routing_tables_is_read_from_its_one_instance_as_before(start: Start) -> None:
    values = records(10)
    region = start(1, 1, [[0]], values, routed=False)
    (instance,) = region.instances
    client = ReadClient(*instance.address)
    assert client.get(STORE, "user-0003") == values["user-0003"]
    assert client.get(STORE, "absent") is None
    assert client.batch_get(STORE, list(values)) == values
    route = client._router.cached(STORE)
    assert isinstance(route, Unrouted) and route.address == instance.address
    instance.stop()
    with pytest.raises(ComponentError, match=rf"^region server {instance.name} is unreachable: "):
        client.get(STORE, "user-0003")


def _http(url: str, body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, body, {"Content-Type": BATCH_CONTENT_TYPE} if body else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def _http_post(url: str) -> tuple[int, dict[str, str], bytes]:
    with urllib.request.urlopen(urllib.request.Request(url, b"", method="POST"), timeout=10) as answer:
        return answer.status, dict(answer.headers), answer.read()


def test_the_http_front_serves_routing_tables_versions_and_partition_not_hosted(start: Start) -> None:
    region = start(2, 1, [[0]], records(3))
    hosting, other = (f"http://{i.name}" for i in region.instances)
    status, _, body = _http(f"{other}/routing/{STORE}")
    assert (status, json.loads(body)) == (200, region.routing())
    assert json.loads(body)["replicas"] == [[region.instances[0].name]]
    status, headers, body = _http(f"{other}/routing/nobody")
    assert (status, headers["X-Venice-Error"]) == (404, "StoreNotFound")
    assert json.loads(body) == {"error": "unknown store 'nobody'"}

    key = base64.urlsafe_b64encode(key_bytes("user-0001")).decode().rstrip("=")
    status, headers, _ = _http(f"{hosting}/storage/{STORE}/{key}")
    assert (status, headers["X-Venice-Version"]) == (200, "1")
    status, headers, _ = _http(f"{hosting}/storage/{STORE}/{base64.urlsafe_b64encode(b'x').decode().rstrip('=')}")
    assert (status, headers["X-Venice-Error"], headers["X-Venice-Version"]) == (404, "key-not-found", "1")
    status, headers, body = _http(f"{hosting}/storage/{STORE}", encode_keys([key_bytes("user-0001")]))
    assert (status, headers["X-Venice-Version"]) == (200, "1") and decode_records(body, 1)[0] is not None
    for answer in (_http(f"{other}/storage/{STORE}/{key}"), _http(f"{other}/storage/{STORE}", encode_keys([b"k"]))):
        assert (answer[0], answer[1]["X-Venice-Error"]) == (503, "PartitionNotHosted")

    older = start(1, 1, [[0]], records(3), routed=False).instances[0]  # a backend without routing tables
    status, headers, _ = _http(f"http://{older.name}/routing/{STORE}")
    assert (status, headers["X-Venice-Error"]) == (404, "no-route")
    status, headers, _ = _http(f"http://{older.name}/storage/{STORE}/{key}")
    assert status == 200 and "X-Venice-Version" not in headers


def test_venice_get_reads_through_any_instance_of_the_region(start: Start, tmp_path: Path) -> None:
    env = make_platform_env(tmp_path / "home", {"region.dc-0.instances": "2"})
    config = env.config
    values = records(5)
    # instance 0 (the first seed) is down; instance 1 serves the store
    start(1, 1, [[0]], values, ports=[config.server_port("dc-0", 1)])
    result = env.cli("get", STORE, "user-0002")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == values["user-0002"]
