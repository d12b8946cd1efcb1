"""Compares what bench/baseline/normalize.py wrote with the dataset `infertrace normalize` wrote from the same input.

Usage: baseline_check.py DATASET BASELINE.parquet

Every column the baseline wrote must hold the same values as the dataset's column of that name, request by request
(matched on `request_id`), and its samples must be the same rows as the dataset's samples (as a multiset). The
baseline is an independent implementation (regexes, json, xxhash), so agreement checks both: the benchmark compares
like with like, and infertrace's values (prefix hashes, percentages, clock, turns) are what the formats say.
Prints "tables agree: " and a JSON object of what was compared (requests, samples, distinct metrics, columns the
baseline filled), or the first differences, and exits 1 on any.
"""

import json
import math
import os
import sys

import pyarrow.parquet as pq


def same(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return a == b or math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)
    return a == b


def main():
    dataset, baseline = sys.argv[1:3]
    problems = []
    theirs = pq.read_table(baseline)
    ours = pq.read_table(os.path.join(dataset, "requests.parquet"))
    columns = theirs.column_names
    missing = [c for c in columns if c not in ours.column_names]
    if missing:
        problems.append(f"columns the dataset lacks: {missing}")
        columns = [c for c in columns if c not in missing]
    ours_by_id = {row["request_id"]: row for row in ours.select(columns).to_pylist()}
    if len(ours_by_id) != ours.num_rows:
        problems.append("request ids repeat in the dataset")
    requests = theirs.num_rows
    if theirs.num_rows != ours.num_rows:
        problems.append(f"requests: baseline {theirs.num_rows}, dataset {ours.num_rows}")
    filled = set()
    for row in theirs.to_pylist():
        other = ours_by_id.get(row["request_id"])
        if other is None:
            problems.append(f"request {row['request_id']} is not in the dataset")
            continue
        for column in columns:
            if row[column] is not None:
                filled.add(column)
            if not same(row[column], other[column]):
                problems.append(f"request {row['request_id']} {column}: baseline {row[column]!r}, dataset {other[column]!r}")
    samples, metrics = 0, 0
    path = baseline.replace(".parquet", ".samples.parquet")
    if os.path.exists(path):
        key = ("time", "source", "instance", "metric", "value", "source_file", "source_line")
        rows = lambda table: sorted(tuple(r[k] for k in key) for r in pq.read_table(table).to_pylist())
        theirs_samples, ours_samples = rows(path), rows(os.path.join(dataset, "samples.parquet"))
        samples, metrics = len(theirs_samples), len({row[3] for row in theirs_samples})
        if len(theirs_samples) != len(ours_samples):
            problems.append(f"samples: baseline {len(theirs_samples)}, dataset {len(ours_samples)}")
        for a, b in zip(theirs_samples, ours_samples):
            if not all(same(x, y) for x, y in zip(a, b)):
                problems.append(f"sample: baseline {a}, dataset {b}")
                break
    if problems:
        print("\n".join(problems[:20]))
        sys.exit(1)
    counts = {"requests": requests, "samples": samples, "metrics": metrics, "columns": len(filled)}
    print("tables agree: " + json.dumps(counts))


main()
