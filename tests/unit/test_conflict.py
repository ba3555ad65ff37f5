"""Conflict resolution of active-active writes: a pure function of the writes, so every region converges."""

from __future__ import annotations

import random

from venice_core.ingestion.conflict import WriteStamp, stamp_wins
from venice_core.protocol.div import Validator
from venice_core.protocol.envelope import (
    BATCH_WRITE_TIMESTAMP,
    ControlMessageType,
    Message,
    MessageType,
    ProducerMetadata,
)

BATCH_STAMP = WriteStamp(BATCH_WRITE_TIMESTAMP)  # what batch data carries


def wins(incoming: WriteStamp, existing: WriteStamp) -> bool:
    """`stamp_wins` on decoded stamps, as ingestion compares the encoded ones."""
    return stamp_wins(incoming.encode(), existing.encode())


def test_the_later_timestamp_wins_then_the_larger_region_name() -> None:
    assert wins(WriteStamp(2, "dc-0"), WriteStamp(1, "dc-2"))
    assert not wins(WriteStamp(1, "dc-2"), WriteStamp(2, "dc-0"))
    assert wins(WriteStamp(5, "dc-2"), WriteStamp(5, "dc-0"))
    assert not wins(WriteStamp(5, "dc-0"), WriteStamp(5, "dc-2"))
    assert wins(WriteStamp(5, "dc-1"), WriteStamp(5, "dc-1"))  # one region's later write, same millisecond
    assert wins(WriteStamp(0, "dc-0"), BATCH_STAMP)  # any nearline write beats batch data


def test_a_tombstone_holds_against_an_older_put() -> None:
    tombstone = WriteStamp(10, "dc-1", tombstone=True)
    assert not wins(WriteStamp(9, "dc-2"), tombstone)
    assert WriteStamp.decode(tombstone.encode()) == tombstone
    assert WriteStamp.decode(WriteStamp(-1, "").encode()) == WriteStamp(-1, "")


def test_every_interleaving_of_the_regions_streams_converges() -> None:
    rng = random.Random(7)
    streams = {region: [(rng.randint(0, 5), f"{region}:{i}") for i in range(6)] for region in ("dc-0", "dc-1", "dc-2")}
    finals = set()
    for _ in range(500):  # random interleavings; each region's own writes keep their order, as in its topic
        order = ["dc-0"] * 6 + ["dc-1"] * 6 + ["dc-2"] * 6
        rng.shuffle(order)
        position = dict.fromkeys(streams, 0)
        current, value = BATCH_STAMP, "batch"
        for region in order:
            timestamp, written = streams[region][position[region]]
            position[region] += 1
            if wins(WriteStamp(timestamp, region), current):
                current, value = WriteStamp(timestamp, region), written
        finals.add(value)
    assert len(finals) == 1


def test_ended_producers_are_forgotten_beyond_the_kept_number() -> None:
    validator = Validator()
    for n in range(5):
        guid = bytes([n]) * 16
        start = Message(
            MessageType.CONTROL_MESSAGE,
            ProducerMetadata(guid, 0, 0, 0),
            b"",
            control_type=ControlMessageType.START_OF_SEGMENT,
        )
        end = Message(
            MessageType.CONTROL_MESSAGE,
            ProducerMetadata(guid, 0, 1, 0),
            b"",
            control_type=ControlMessageType.END_OF_SEGMENT,
            control={"checksum": 0},
        )
        assert validator.accept(start, None) and validator.accept(end, None)
    validator.forget_ended(2)
    assert sorted(validator.state()) == [(bytes([3]) * 16).hex(), (bytes([4]) * 16).hex()]
    assert validator.accept_data(bytes([4]) * 16, 0, 1, b"k", b"v") is False  # a kept one still skips replays
