"""Reads a Hive-partitioned infertrace dataset with DuckDB and with Polars and checks it against the same inputs
normalized without partitions, read with pyarrow (an independent reader of the plain layout).

usage: partition_check.py PLAIN_DATASET PARTITIONED_DATASET KEY

For every table: the row count equals the manifest's; the rows per partition value (DuckDB and Polars, from the
directory names) equal those of the plain table grouped by the key column (the UTC date of the time column for
`date`); a column sum agrees. Prints one line per table and engine; exits 1 on the first disagreement.
"""

import datetime
import json
import sys
from collections import Counter
from pathlib import Path

import duckdb
import polars as pl
import pyarrow.compute as pc
import pyarrow.parquet as pq

plain, partitioned, key = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
manifest = json.loads((partitioned / "manifest.json").read_text())
assert manifest.get("partition_by") == key, manifest.get("partition_by")

TIME = {"requests": "arrival_time", "samples": "time", "cache_events": "time"}
SUM = {"requests": "input_tokens", "samples": "value", "cache_events": "blocks"}


def fail(message):
    print(f"FAIL {message}")
    sys.exit(1)


def keyed(value):
    """A partition value as the engines return it: `date` as datetime.date, the others as text, null as None."""
    if value is None:
        return None
    if isinstance(value, datetime.date):
        return value.isoformat()
    return str(value)


for table in ["requests", "samples", "cache_events"]:
    expected_rows = manifest["rows"][table]
    reference = pq.read_table(plain / f"{table}.parquet")
    if reference.num_rows != expected_rows:
        fail(f"{table}: plain dataset has {reference.num_rows} rows, manifest {expected_rows}")
    if key == "date":
        column = pc.cast(pc.cast(reference.column(TIME[table]), "date32"), "string")
    else:
        column = pc.cast(reference.column(key), "string")
    by_value = Counter(column.to_pylist())
    sum_column = SUM[table] if SUM[table] in reference.column_names else None
    reference_sum = pc.sum(reference.column(sum_column)).as_py() if sum_column else None

    files = sorted((partitioned / table).glob("*/*.parquet"))
    if not files:
        if expected_rows:
            fail(f"{table}: no part files for {expected_rows} rows")
        print(f"{table}: 0 rows, no partitions")
        continue
    pattern = str(partitioned / table / "**" / "*.parquet")

    rows = duckdb.sql(
        f"SELECT {key}, count(*) FROM read_parquet('{pattern}', hive_partitioning = true) GROUP BY {key}"
    ).fetchall()
    duck = Counter({keyed(value): n for value, n in rows})
    frame = pl.scan_parquet(pattern, hive_partitioning=True).group_by(key).len().collect()
    polars = Counter({keyed(value): n for value, n in frame.iter_rows()})
    for engine, counts in [("duckdb", duck), ("polars", polars)]:
        if sum(counts.values()) != expected_rows:
            fail(f"{table} ({engine}): {sum(counts.values())} rows, manifest {expected_rows}")
        if counts != by_value:
            fail(f"{table} ({engine}): rows per {key} {dict(counts)} != plain {dict(by_value)}")
    if sum_column:
        duck_sum = duckdb.sql(
            f"SELECT sum({sum_column}) FROM read_parquet('{pattern}', hive_partitioning = true)"
        ).fetchall()[0][0]
        polars_sum = pl.scan_parquet(pattern, hive_partitioning=True).select(pl.col(sum_column).sum()).collect().item()
        for engine, total in [("duckdb", duck_sum), ("polars", polars_sum)]:
            if (total or 0) != (reference_sum or 0) and abs((total or 0) - (reference_sum or 0)) > 1e-6:
                fail(f"{table} ({engine}): sum({sum_column}) {total} != plain {reference_sum}")
    values = ", ".join(f"{v}={by_value[v]}" for v in sorted(by_value, key=lambda v: (v is None, v or "")))
    print(f"{table}: {expected_rows} rows in {len(files)} partitions by {key} (duckdb, polars agree): {values}")
