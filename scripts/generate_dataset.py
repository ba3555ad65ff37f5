"""Generate a users dataset as Parquet: key `user-<i>`, value fields name/age/score (~100 bytes serialised)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def generate(out: Path, records: int, files: int = 4, seed: int = 0) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    per_file = -(-records // files)
    for index in range(files):
        start, stop = index * per_file, min(records, (index + 1) * per_file)
        ids = range(start, stop)
        table = pa.table(
            {
                "key": [f"user-{i:09d}" for i in ids],
                "name": [f"name-{(i * 7919 + seed) % 1_000_003:07d}-" + "x" * 60 for i in ids],
                "age": [(i + seed) % 100 for i in ids],
                "score": [((i * 31 + seed) % 10_000) / 100.0 for i in ids],
            },
            schema=pa.schema(
                [("key", pa.string()), ("name", pa.string()), ("age", pa.int32()), ("score", pa.float64())]
            ),
        )
        pq.write_table(table, out / f"part-{index:04d}.parquet")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    generate(args.out, args.records, args.files, args.seed)
    print(f"wrote {args.records} records to {args.out}")


if __name__ == "__main__":
    main()
