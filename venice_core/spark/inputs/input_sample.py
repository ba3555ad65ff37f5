"""A bounded, spread-out sample of a local push input's values, serialised as the push job stores them (Avro, with the
value schema the push writes with; before compression): what a ZSTD_WITH_DICT version's dictionary is trained on,
before the version exists (Venice's push job samples its input the same way, in its schema-validation mapper).

Read without Spark, as `input_files` reads the input's schema. The sample comes from `WINDOWS` places spread evenly
over the whole input, each a run of consecutive records that stops at its share of the byte budget or at the next
window: Parquet by rows (the row groups holding them are read, their value columns only), Avro and JSON lines by
bytes (a window starts at the first Avro block, or JSON line, from its byte on: an Avro file is read from the sync
marker there, behind its header). A record whose value does not fit the schema is left out (the job refuses it,
saying why). Input the platform cannot read before the job (a URL, JSON whose schema only Spark's inference settles)
has no sample: a ZSTD_WITH_DICT push of it is refused before anything is created (`input_files.check_sampleable`).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from venice_core.controller.store_description import StoreDescription
from venice_core.errors import PushJobError
from venice_core.protocol import serde
from venice_core.spark.inputs.input_files import check_sampleable, input_files, input_format, read_input_schema
from venice_core.spark.inputs.input_schema import choose_value_schema, input_value

WINDOWS = 16
_ROWS_AT_ONCE = 1024  # Parquet rows converted to Python at a time


def sample_values(info: StoreDescription, path: str, key_field: str, value_field: str, budget: int) -> list[bytes]:
    """Values of the input (`budget` bytes of them at most, as serialised), as the push job serialises them with the
    value schema it writes with (registered by the rollout's schema_registration step before this runs). Empty for
    an input without records."""
    struct = read_input_schema(path)
    check_sampleable(path, struct)
    value_columns, value_struct, single_value = input_value(struct, key_field, value_field)
    choice = choose_value_schema(info, value_struct, single_value, value_field)
    schema = serde.parse(choice.schema)

    def serialise(row: dict[str, Any]) -> bytes:
        return serde.serialize(schema, row[value_field] if single_value else row)

    fmt = input_format(path)
    files = input_files(path, fmt)
    windows = {"parquet": _parquet_windows, "avro": _avro_windows, "json": _json_windows}[fmt]
    sample: list[bytes] = []
    refusals: list[str] = []
    share = max(1, budget // WINDOWS)
    for window in windows(files, value_columns):
        taken = 0
        for row in window:
            try:
                value = serialise(row)
            except (ValueError, TypeError, AttributeError, KeyError) as exc:
                refusals.append(str(exc))
                continue
            sample.append(value)
            taken += len(value)
            if taken >= share:
                break
    if not sample and refusals:
        raise PushJobError(f"no value of input {path} fits value schema {choice.schema_id}: {refusals[0]}")
    return sample


Window = Iterator[dict[str, Any]]


def _spans(sizes: list[int]) -> Iterator[list[tuple[int, int, int]]]:
    """`WINDOWS` spans spread evenly over items of `sizes` (files' bytes, row groups' rows) taken end to end: each
    from its position to the next span's, as (item, start, end) parts of consecutive items (fewer spans when the
    items hold fewer positions)."""
    total = sum(sizes)
    if not total:
        return
    cuts = sorted({total * i // WINDOWS for i in range(WINDOWS)})
    for cut, following in zip(cuts, [*cuts[1:], total], strict=True):
        parts, before = [], 0
        for item, size in enumerate(sizes):
            start, end = max(cut, before), min(following, before + size)
            if start < end:
                parts.append((item, start - before, end - before))
            before += size
        yield parts


def _parquet_windows(files: list[Path], columns: list[str]) -> Iterator[Window]:
    import pyarrow.parquet as pq

    groups = []  # (file, row group, rows) of every row group of the input, in order
    for file in files:
        metadata = pq.ParquetFile(file).metadata
        groups += [(file, g, metadata.row_group(g).num_rows) for g in range(metadata.num_row_groups)]
    cache: dict[tuple[Path, int], Any] = {}

    def rows(parts: list[tuple[int, int, int]]) -> Window:
        for group, start, end in parts:
            file, index, _ = groups[group]
            if (file, index) not in cache:
                cache.clear()  # one row group held at a time (windows come in order)
                cache[(file, index)] = pq.ParquetFile(file).read_row_group(index, columns=columns)
            table = cache[(file, index)]
            for at in range(start, end, _ROWS_AT_ONCE):
                yield from table.slice(at, min(_ROWS_AT_ONCE, end - at)).to_pylist()

    for parts in _spans([rows for _, _, rows in groups]):
        yield rows(parts)


def _json_windows(files: list[Path], _columns: list[str]) -> Iterator[Window]:
    def lines(parts: list[tuple[int, int, int]]) -> Window:
        for item, start, end in parts:
            with files[item].open("rb") as handle:
                handle.seek(start)
                if start:
                    handle.readline()  # the line the span's first byte falls in started before it
                while handle.tell() < end:  # a line that starts in the span is the span's
                    line = handle.readline()
                    if not line:
                        break
                    if line.strip():
                        try:
                            yield json.loads(line)
                        except ValueError:
                            continue  # the job refuses it, naming it

    for parts in _spans([file.stat().st_size for file in files]):
        yield lines(parts)


def _avro_windows(files: list[Path], _columns: list[str]) -> Iterator[Window]:
    def records(parts: list[tuple[int, int, int]]) -> Window:
        for item, start, end in parts:
            yield from _avro_span(files[item], start, end)

    for parts in _spans([file.stat().st_size for file in files]):
        yield records(parts)


def _avro_span(file: Path, start: int, end: int) -> Window:
    """The records of the Avro blocks of `file` that start in bytes [start, end) (the header's end counting as the
    first block's start)."""
    import fastavro
    from fastavro.read import HEADER_SCHEMA, SYNC_SIZE

    with file.open("rb") as handle:
        header_record: Any = fastavro.schemaless_reader(handle, HEADER_SCHEMA)
        sync: bytes = header_record["sync"]
        header_end = handle.tell()
        handle.seek(0)
        header = handle.read(header_end)
        block = header_end if start <= header_end else _after_sync(handle, start - SYNC_SIZE, sync)
        if block is None or block >= end:
            return
        handle.seek(block)
        try:
            for read in fastavro.block_reader(io.BufferedReader(_Behind(header, handle))):
                if block + read.offset - header_end >= end:
                    return
                yield from read  # type: ignore[misc]  # records: the input's rows are records
        except (ValueError, EOFError, StopIteration):
            return  # a block cut short, or 16 bytes of data taken for the sync marker: the span ends


def _after_sync(handle: IO[bytes], start: int, sync: bytes) -> int | None:
    """The position right after the first sync marker at or after `start` (None: none)."""
    handle.seek(max(0, start))
    carried, at = b"", max(0, start)
    while chunk := handle.read(1 << 16):
        data = carried + chunk
        found = data.find(sync)
        if found >= 0:
            return at - len(carried) + found + len(sync)
        carried = data[-(len(sync) - 1) :]
        at += len(chunk)
    return None


class _Behind(io.RawIOBase):
    """An Avro file's header followed by the file from where `handle` is (a block's start): a file to fastavro."""

    def __init__(self, header: bytes, handle: IO[bytes]) -> None:
        self.head, self.handle, self.position = header, handle, 0

    def readable(self) -> bool:
        return True

    def tell(self) -> int:  # fastavro asks where each block starts
        return self.position

    def readinto(self, buffer: Any) -> int:
        if self.head:
            count = min(len(buffer), len(self.head))
            buffer[:count] = self.head[:count]
            self.head = self.head[count:]
        else:
            data = self.handle.read(len(buffer))
            count = len(data)
            buffer[:count] = data
        self.position += count
        return count
