"""Check that a dataset opens in pyarrow with exactly the columns, types and nullability of schemas/*.json.

usage: python3 pyarrow_check.py DATASET_DIR SCHEMAS_DIR
Prints one line per table and exits non-zero on the first mismatch.
"""

import json
import sys
from pathlib import Path

import pyarrow.parquet as pq


def main() -> int:
    dataset, schemas = Path(sys.argv[1]), Path(sys.argv[2])
    manifest = json.loads((dataset / "manifest.json").read_text())
    for name in ("requests", "samples", "cache_events"):
        spec = json.loads((schemas / f"{name}.json").read_text())
        table = pq.read_table(dataset / f"{name}.parquet")
        got = [(f.name, str(f.type), f.nullable) for f in table.schema]
        want = [(c["name"], c["type"], c["nullable"]) for c in spec["columns"]]
        if got != want:
            for g, w in zip(got, want):
                if g != w:
                    print(f"{name}: pyarrow reads {g}, schemas/ says {w}")
            print(f"{name}: {len(got)} columns read, {len(want)} documented")
            return 1
        meta = table.schema.metadata or {}
        if meta.get(b"infertrace.schema_version") != str(manifest["schema_version"]).encode():
            print(f"{name}: missing or wrong infertrace.schema_version metadata: {meta}")
            return 1
        if table.num_rows != manifest["rows"][name]:
            print(f"{name}: {table.num_rows} rows, manifest says {manifest['rows'][name]}")
            return 1
        print(f"{name}: {table.num_rows} rows, {len(got)} columns as documented")
    # Only the first row: Python datetimes hold microseconds, and some arrivals carry nanoseconds.
    first = pq.read_table(dataset / "requests.parquet").slice(0, 1).to_pylist()[0]
    # The first input in sorted order is the Azure 2023 code trace: its first data line, read by pyarrow.
    if (first["input_tokens"], first["output_tokens"], first["arrival_time"].isoformat()) != (
        4808,
        10,
        "2023-11-16T18:17:03.979960+00:00",
    ):
        print(f"unexpected first request: {first}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
