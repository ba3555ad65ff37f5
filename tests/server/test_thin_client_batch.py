"""The thin client's batch get against a real region server in this process (storage seeded directly, no broker):
values of several schemas in one batch, many of one decoded in one reader call, a few of another one at a time,
absent keys left out; and its key encoder, which skips fastavro for string keys, against fastavro."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.regions import route_to, seeded_region
from venice_core.client import ReadClient
from venice_core.client.thin import DECODE_MANY_FROM
from venice_core.errors import VeniceError
from venice_core.protocol import serde
from venice_core.server.http import serve

STORE = "people"
V1 = {f"v1-{i:03d}": {"name": f"n{i}", "age": i % 90, "score": i / 4} for i in range(40)}
V2 = {f"v2-{i:03d}": {"name": f"m{i}", "age": i, "score": -i / 2, "city": "Zürich" * (i % 3)} for i in range(3)}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReadClient]:
    region = seeded_region(tmp_path_factory.mktemp("region") / "home", STORE, {1: V1, 2: V2})
    http = serve(region, "127.0.0.1", 0, region.config.server.limits)
    route_to(region, STORE, http.server_address[:2])
    reader = ReadClient(*http.server_address[:2])
    try:
        yield reader
    finally:
        reader.close()
        http.shutdown()
        region.hosted[(STORE, 1)].partitions[0].storage.close()
        region.meta.dispose()


def test_a_batch_of_two_schemas_decodes_each_value_with_its_own(client: ReadClient) -> None:
    assert len(V1) >= DECODE_MANY_FROM > len(V2)  # one schema's values decoded at once, the other's one by one
    keys = [*V2][:1] + [*V1] + ["absent"] + [*V2][1:] + ["v1-000"]  # a key asked twice
    assert client.batch_get(STORE, keys) == {**V1, **V2}
    assert list(client.batch_get(STORE, keys)) == [k for k in dict.fromkeys(keys) if k != "absent"]  # as asked
    assert client.batch_get(STORE, ["absent"]) == {}
    assert client.get(STORE, "v2-002") == V2["v2-002"]


def test_a_key_that_does_not_fit_the_key_schema_is_named(client: ReadClient) -> None:
    with pytest.raises(VeniceError, match=r"key 7 does not match the key schema of 'people'"):
        client.batch_get(STORE, ["v1-001", 7])


@pytest.mark.parametrize("text", ["", "a", "user-000000001", "é" * 31, "x" * 63, "x" * 64, "ü" * 40, "x" * 5000])
def test_the_string_key_encoder_writes_what_fastavro_writes(text: str) -> None:
    assert serde.serializer("string")(text) == serde.serialize("string", text)


def test_the_string_key_encoder_refuses_what_fastavro_refuses() -> None:
    for datum in (7, None, b"bytes"):
        with pytest.raises((ValueError, TypeError, AttributeError)):
            serde.serialize("string", datum)
        with pytest.raises((ValueError, TypeError, AttributeError)):
            serde.serializer("string")(datum)
