"""One store-version partition in RocksDB (rocksdict, raw bytes).

Data lives in the default column family; the ingestion checkpoint and chunks awaiting their manifest live in the
`venice_meta` column family, and a hybrid version's replication metadata (each key's latest write stamp, see
`ingestion.conflict`) in `venice_rmd`, all written in the same WriteBatch as the data they cover, so a crash never
separates them. Reads of values never touch the replication metadata. Sorted pushes are built with the SST file
writer and ingested at END_OF_PUSH. A partition whose checkpoint a store of its own keeps (`checkpoint.KeptElsewhere`:
a Da Vinci transformer's) has none in `venice_meta`: its commits write the data, then set the state there.
"""

from __future__ import annotations

import logging
import shutil
from collections import deque
from pathlib import Path
from typing import cast

from rocksdict import (
    BlockBasedOptions,
    Cache,
    DataBlockIndexType,
    IngestExternalFileOptions,
    Options,
    Rdict,
    SstFileWriter,
    WriteBatch,
)

from venice_core.protocol.put_run import PutRun
from venice_core.storage.api import COMMIT_EVERY_MESSAGES, COMMIT_EVERY_SECONDS
from venice_core.storage.checkpoint import KeptElsewhere
from venice_core.storage.ingestion_checkpoint import CorruptCheckpoint, IngestionCheckpoint

log = logging.getLogger(__name__)

META_CF = "venice_meta"
RMD_CF = "venice_rmd"
CHECKPOINT_KEY = b"checkpoint"
CHUNK_PREFIX = b"chunk:"
BLOCK_CACHE_BYTES = 64 * 1024 * 1024
_block_cache: Cache | None = None


def _shared_block_cache() -> Cache:
    """One LRU block cache per process for every partition (a cache per partition would multiply memory)."""
    global _block_cache
    if _block_cache is None:
        _block_cache = Cache(BLOCK_CACHE_BYTES)
    return _block_cache


def _options() -> Options:
    """Tables for point lookups, the read path's only access: a bloom filter per file (a get skips the files that
    cannot hold its key: ingestion leaves one SST per commit), a hash index inside data blocks, index and filter
    blocks in the shared cache. The SST writer of sorted pushes uses the same options, so its files have them too."""
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    table = BlockBasedOptions()
    table.set_bloom_filter(10, False)
    table.set_data_block_index_type(DataBlockIndexType.binary_and_hash())
    table.set_block_cache(_shared_block_cache())
    table.set_cache_index_and_filter_blocks(True)
    table.set_pin_l0_filter_and_index_blocks_in_cache(True)
    options.set_block_based_table_factory(table)
    return options


class PartitionStorage:
    """A `storage.api.PartitionStore` over one RocksDB."""

    sorted_ingest = True
    commit_every_messages = COMMIT_EVERY_MESSAGES
    commit_every_seconds = COMMIT_EVERY_SECONDS

    def __init__(self, path: Path, checkpoint: KeptElsewhere | None = None) -> None:
        self.path = path
        self.kept_elsewhere = checkpoint  # None: the checkpoint is in `venice_meta`, written with the data
        path.mkdir(parents=True, exist_ok=True)
        self._db = Rdict(
            str(path / "db"),
            _options(),
            column_families={META_CF: Options(raw_mode=True), RMD_CF: Options(raw_mode=True)},
        )
        self._meta = self._db.get_column_family(META_CF)
        self._meta_handle = self._db.get_column_family_handle(META_CF)
        self._rmd = self._db.get_column_family(RMD_CF)
        self._rmd_handle = self._db.get_column_family_handle(RMD_CF)
        self._sst: SstFileWriter | None = None
        self._sst_count = 0
        self._sst_files: list[str] = []
        self._closed = False

    # reads
    def get(self, key: bytes) -> bytes | None:
        return self._db.get(key)

    def multi_get(self, keys: list[bytes]) -> list[bytes | None]:
        # rocksdict's stub types a list of keys as list[str | int | ...] (invariant) and any answer as Any | None:
        # given a list, it answers a list.
        return cast("list[bytes | None]", self._db.get(cast("list[str | int | float | bytes | bool]", keys)))

    def checkpoint(self) -> IngestionCheckpoint | None:
        raw = self._meta.get(CHECKPOINT_KEY) if self.kept_elsewhere is None else self.kept_elsewhere.get()
        if raw is None:
            return None
        try:
            return IngestionCheckpoint.decode(raw)
        except CorruptCheckpoint as exc:
            where = self.path if self.kept_elsewhere is None else self.kept_elsewhere.topic_partition
            log.warning("checkpoint of %s is corrupt (%s): the partition re-ingests from the start", where, exc)
            return None

    def get_chunk(self, chunk_key: bytes) -> bytes | None:
        return self._meta.get(CHUNK_PREFIX + chunk_key)

    def get_write_stamp(self, key: bytes) -> bytes | None:
        """The key's replication metadata (an encoded `conflict.WriteStamp`), None if only batch data wrote it."""
        return self._rmd.get(key)

    # writes
    def new_batch(self) -> WriteBatch:
        return WriteBatch(raw_mode=True)

    def put_run(self, batch: WriteBatch, run: PutRun) -> None:
        for key, stored in zip(run.keys(), run.stored(), strict=True):  # rocksdict's batches take one at a time
            batch.put(key, stored)

    def stage_chunk(self, batch: WriteBatch, chunk_key: bytes, value: bytes) -> None:
        batch.put(CHUNK_PREFIX + chunk_key, value, self._meta_handle)

    def drop_chunk(self, batch: WriteBatch, chunk_key: bytes) -> None:
        batch.delete(CHUNK_PREFIX + chunk_key, self._meta_handle)

    def put_write_stamp(self, batch: WriteBatch, key: bytes, stamp: bytes) -> None:
        batch.put(key, stamp, self._rmd_handle)

    def commit(self, batch: WriteBatch, checkpoint: IngestionCheckpoint) -> None:
        """Write the batch and the checkpoint that covers it: atomically, or (kept elsewhere) the data first."""
        if self.kept_elsewhere is None:
            batch.put(CHECKPOINT_KEY, checkpoint.encode(), self._meta_handle)
            self._db.write(batch)
            return
        self._db.write(batch)
        self.kept_elsewhere.set(checkpoint.encode())

    # sorted ingestion
    def sst_put(self, key: bytes, value: bytes) -> None:
        """Append to the current SST file; keys must arrive in increasing order."""
        if self._sst is None:
            self._sst = SstFileWriter(options=_options())
            file = str(self.path / f"ingest-{len(self._sst_files):05d}.sst")
            self._sst.open(file)
            self._sst_files.append(file)
            self._sst_count = 0
        self._sst[key] = value
        self._sst_count += 1

    def sst_put_run(self, keys: list[bytes], values: list[bytes]) -> None:
        """`sst_put` of each (a run of a sorted push), the writer's put bound once."""
        if not keys:
            return
        self.sst_put(keys[0], values[0])  # opens the file if none is
        assert self._sst is not None
        deque(map(self._sst.__setitem__, keys[1:], values[1:]), maxlen=0)  # the loop in C
        self._sst_count += len(keys) - 1

    def ingest_sst(self) -> None:
        """Ingest the SST file written so far. The caller commits the checkpoint that covers it afterwards;
        replaying the messages between the two after a crash rewrites the same keys with the same values."""
        if self._sst is not None:
            if self._sst_count:
                self._sst.finish()
                options = IngestExternalFileOptions()
                options.set_move_files(True)
                self._db.ingest_external_file([self._sst_files[-1]], options)
            self._sst = None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._sst = None
        self._meta.close()
        self._rmd.close()
        del self._meta, self._meta_handle, self._rmd, self._rmd_handle  # the column families let go of first
        self._db.close()
        del self._db

    def destroy(self) -> None:
        self.close()
        if self.kept_elsewhere is not None:
            self.kept_elsewhere.delete()
        shutil.rmtree(self.path, ignore_errors=True)
