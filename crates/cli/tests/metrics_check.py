"""Recompute the figures of `infertrace metrics --json` from a dataset's Parquet files and compare.

Usage: metrics_check.py DATASET_DIR METRICS_JSON SLO

Written independently of the Rust engine, from the definitions in crates/engine/src/lib.rs: status counts, latency
distributions (quantiles by linear interpolation between closest ranks), throughput and goodput, cache hit rates,
unbounded prefix reuse, the reasoning multiplier, per-instance engine samples (mean over samples and over time) and
the fleet part of the cost. When the JSON is broken down by source, each source's figures too (but its cost, a share
of the whole fleet). Rows whose inputs' clock domains (the manifest's `inputs[].clock_domain`) are `relative` next to
rows on the wall clock have no common time line: the figures that need one (span, rates, TTFT under load, the fleet's
hours) are then null, overall and in any source whose own rows are on both clocks. Prints "figures agree" or the first disagreements, and exits non-zero on any.
"""

import json
import math
import sys

import pyarrow as pa
import pyarrow.parquet as pq

DURATIONS = {
    "ttft": "ttft_s",
    "tpot": "tpot_s",
    "e2e": "e2e_s",
    "queue": "queue_s",
    "prefill": "prefill_s",
    "decode": "decode_s",
    "kv_transfer": "kv_transfer_s",
}
INSTANTS = [
    "arrival_time",
    "scheduled_time",
    "first_token_time",
    "prefill_end_time",
    "decode_start_time",
    "last_token_time",
    "completion_time",
]
TIERS = ["gpu", "cpu", "disk", "remote"]
# examples/cost/h100-fleet.toml, which the test passes.
FLEET = {"count": 8, "price_per_hour": 2.99, "watts": 700.0, "pue": 1.3, "capacity_gb": 4096, "gb_month": 0.08}
PRICES = {"input": 0.88, "cached": 0.22, "output": 0.88}


def rows(path):
    table = pq.read_table(path)
    columns = {}
    for name in table.column_names:
        column = table.column(name)
        if pa.types.is_timestamp(column.type):
            column = column.cast(pa.int64())
        elif pa.types.is_dictionary(column.type):
            column = column.cast(pa.string())
        columns[name] = column.to_pylist()
    return [dict(zip(columns, values)) for values in zip(*columns.values())]


def quantile(ordered, p):
    h = (len(ordered) - 1) * p
    lower = math.floor(h)
    upper = min(lower + 1, len(ordered) - 1)
    return ordered[lower] + (h - lower) * (ordered[upper] - ordered[lower])


def distribution(values):
    values = sorted(v for v in values if v is not None and math.isfinite(v))
    if not values:
        return {"count": 0, "mean": None, "p50": None, "p90": None, "p95": None, "p99": None, "max": None}
    return {
        "count": len(values),
        "mean": sum(values) / len(values),
        "p50": quantile(values, 0.5),
        "p90": quantile(values, 0.9),
        "p95": quantile(values, 0.95),
        "p99": quantile(values, 0.99),
        "max": values[-1],
    }


def parse_slo(text):
    bounds = {}
    units = {"ms": 1e-3, "s": 1.0, "m": 60.0}
    for entry in text.split(","):
        name, value = entry.split("=")
        for unit in ("ms", "s", "m"):
            if value.endswith(unit):
                bounds[DURATIONS[name]] = float(value[: -len(unit)]) * units[unit]
                break
    return bounds


def ratio(a, b):
    return a / b if b else None


def expected(requests, samples, slo, one_clock=True):
    out = {}
    statuses = ["ok", "error", "aborted", "timeout", "unknown"]
    counts = {s: sum(1 for r in requests if r["status"] == s) for s in statuses}
    out["requests"] = len(requests)
    out["status"] = counts
    out["success_rate"] = ratio(counts["ok"], len(requests) - counts["unknown"])
    out["latency"] = {name: distribution(r[column] for r in requests) for name, column in DURATIONS.items()}

    instants = [r[c] for r in requests for c in INSTANTS if r[c] is not None]
    span = (max(instants) - min(instants)) / 1e9 if len(instants) > 1 and max(instants) > min(instants) else None
    if not one_clock:
        span = None
    inputs = sum(r["input_tokens"] or 0 for r in requests)
    outputs = sum(r["output_tokens"] or 0 for r in requests)
    per_s = lambda n: n / span if span else None  # noqa: E731
    out["throughput"] = {
        "span_s": span,
        "requests_per_s": per_s(len(requests)),
        "input_tokens": inputs,
        "output_tokens": outputs,
        "input_tokens_per_s": per_s(inputs),
        "output_tokens_per_s": per_s(outputs),
    }
    good = [
        r
        for r in requests
        if r["status"] == "ok"
        and all(r[c] is not None and math.isfinite(r[c]) and r[c] <= bound for c, bound in slo.items())
    ]
    out["goodput"] = {"requests": len(good), "fraction": ratio(len(good), len(requests)), "requests_per_s": per_s(len(good))}

    def hit(column):
        both = [r for r in requests if r["input_tokens"] is not None and r[column] is not None]
        total, cached = sum(r["input_tokens"] for r in both), sum(r[column] for r in both)
        return {"requests": len(both), "input_tokens": total, "cached_tokens": cached, "hit_rate": ratio(cached, total)}

    cache = hit("cached_tokens")
    cache["tiers"] = {t: hit(f"cached_tokens_{t}") for t in TIERS}
    ordered = sorted(requests, key=lambda r: (r["arrival_time"] is None, r["arrival_time"] or 0))
    # An unbounded cache: a request hits its blocks seen before; its hit tokens are capped by its input tokens, and
    # the rate divides by the input tokens (blocks x block_size where null).
    seen, reuse = set(), {"requests": 0, "blocks": 0, "hit_blocks": 0, "tokens": 0, "hit_tokens": 0}
    for r in ordered:
        if r["prefix_hashes"] is None or r["block_size"] is None:
            continue
        reuse["requests"] += 1
        hits = 0
        for h in r["prefix_hashes"]:
            reuse["blocks"] += 1
            if h in seen:
                hits += 1
            seen.add(h)
        reuse["hit_blocks"] += hits
        size = len(r["prefix_hashes"]) * r["block_size"]
        reuse["tokens"] += size if r["input_tokens"] is None else r["input_tokens"]
        reuse["hit_tokens"] += hits * r["block_size"] if r["input_tokens"] is None else min(hits * r["block_size"], r["input_tokens"])
    reuse["hit_rate"] = ratio(reuse["hit_tokens"], reuse["tokens"])
    cache["reuse"] = reuse
    out["cache"] = cache

    both = [r for r in requests if r["reasoning_tokens"] is not None and r["output_tokens"] is not None]
    reasoning = sum(r["reasoning_tokens"] for r in both)
    answer = sum(max(r["output_tokens"] - r["reasoning_tokens"], 0) for r in both)
    out["reasoning"] = {
        "requests": len(both),
        "reasoning_tokens": reasoning,
        "answer_tokens": answer,
        "multiplier": ratio(reasoning, answer),
    }

    engine = {}
    for s in samples:
        if s["metric"] in ("kv_cache_usage", "requests_waiting") and s["value"] is not None and math.isfinite(s["value"]):
            instance = s["instance"] if s["instance"] is not None else "(none)"
            engine.setdefault(instance, {}).setdefault(s["metric"], []).append((s["time"], s["value"]))
    out["engine"] = {}
    for instance, metrics in engine.items():
        out["engine"][instance] = {}
        for metric, points in metrics.items():
            points.sort(key=lambda p: p[0])
            values = sorted(v for _, v in points)
            width = points[-1][0] - points[0][0]
            weighted = sum(points[i][1] * (points[i + 1][0] - points[i][0]) for i in range(len(points) - 1))
            out["engine"][instance][metric] = {
                "count": len(values),
                "mean": sum(values) / len(values),
                "time_weighted_mean": weighted / width if width > 0 else None,
                "p95": quantile(values, 0.95),
                "max": values[-1],
            }

    split = [r for r in requests if all(r[c] is not None for c in ("queue_s", "prefill_s", "decode_s", "e2e_s"))]
    e2e = sum(r["e2e_s"] for r in split)
    share = lambda c: sum(r[c] for r in split) / e2e if split and e2e > 0 else None  # noqa: E731
    out["time_split"] = {"requests": len(split), "queue": share("queue_s"), "prefill": share("prefill_s"), "decode": share("decode_s")}

    # TTFT under load: others in flight (arrival <= t < end) at each arrival, quadratic on purpose.
    def end(r):
        if r["completion_time"] is not None:
            return r["completion_time"]
        if r["arrival_time"] is not None and r["e2e_s"] is not None and math.isfinite(r["e2e_s"]):
            return r["arrival_time"] + round(r["e2e_s"] * 1e9)
        return None

    spans = [(r["arrival_time"], end(r)) for r in requests if r["arrival_time"] is not None and end(r) is not None]
    spans = [(a, c) for a, c in spans if c >= a]
    buckets = {}
    for r in requests:
        t, ttft = r["arrival_time"], r["ttft_s"]
        if t is None or ttft is None or not math.isfinite(ttft):
            continue
        load = sum(1 for a, c in spans if a <= t < c) - (1 if end(r) is not None and end(r) > t else 0)
        low = 0 if load == 0 else 2 ** (load.bit_length() - 1)
        buckets.setdefault(low, []).append(ttft)
    out["ttft_under_load"] = [
        {"in_flight_min": low, "in_flight_max": max(low * 2 - 1, 0), "ttft": distribution(v)}
        for low, v in sorted(buckets.items())
    ] if one_clock else []

    hours = span / 3600 if span else None
    total = None
    cost = {"hours": hours, "share": 1.0 if requests else None, "raw_tokens": inputs + outputs}
    if hours:
        cost["accelerator_dollars"] = FLEET["count"] * FLEET["price_per_hour"] * hours
        cost["energy_kwh"] = FLEET["count"] * FLEET["watts"] * FLEET["pue"] * hours / 1000
        cost["storage_dollars"] = FLEET["capacity_gb"] * FLEET["gb_month"] * hours / 730
        total = cost["accelerator_dollars"] + cost["storage_dollars"]
        cost["total_dollars"] = total
    known = any(r["status"] != "unknown" for r in requests)
    successful = good if known else requests
    tokens = lambda rs: sum((r["input_tokens"] or 0) + (r["output_tokens"] or 0) for r in rs)  # noqa: E731
    cost["successful_answers"] = len(successful)
    cost["effective_tokens"] = tokens(successful)
    cost["effective_answer_tokens"] = sum(
        max((r["output_tokens"] or 0) - (r["reasoning_tokens"] or 0), 0) for r in successful if r["output_tokens"] is not None
    )
    cost["per_successful_answer"] = total / len(successful) if total is not None and successful else None
    cost["effective_tokens_per_dollar"] = cost["effective_tokens"] / total if total else None
    cost["effective_fraction"] = ratio(cost["effective_tokens"], inputs + outputs)

    def api(r):
        i = r["input_tokens"] or 0
        c = min(r["cached_tokens"] or 0, i)
        return ((i - c) * PRICES["input"] + c * PRICES["cached"] + (r["output_tokens"] or 0) * PRICES["output"]) / 1e6

    cost["api_equivalent_dollars"] = sum(api(r) for r in requests)
    out["cost"] = cost
    return out


def compare(path, want, got, problems):
    if isinstance(want, dict):
        for key, value in want.items():
            if not isinstance(got, dict) or key not in got:
                problems.append(f"{path}.{key}: missing")
            else:
                compare(f"{path}.{key}", value, got[key], problems)
    elif want is None or got is None:
        if want is not got:
            problems.append(f"{path}: expected {want}, got {got}")
    elif isinstance(want, float) or isinstance(got, float):
        if not math.isclose(want, got, rel_tol=1e-9, abs_tol=1e-12):
            problems.append(f"{path}: expected {want!r}, got {got!r}")
    elif want != got:
        problems.append(f"{path}: expected {want!r}, got {got!r}")


def main():
    dataset, metrics_path, slo = sys.argv[1:4]
    slo = parse_slo(slo)
    got = json.load(open(metrics_path))
    requests = rows(f"{dataset}/requests.parquet")
    samples = rows(f"{dataset}/samples.parquet")
    manifest = json.load(open(f"{dataset}/manifest.json"))
    relative = {i["path"]: i["clock_domain"] == "relative" for i in manifest["inputs"]}
    clocks = lambda rs: {relative[r["source_file"]] for r in rs if r["source_file"] in relative}  # noqa: E731
    problems = []
    compare("overall", expected(requests, samples, slo, len(clocks(requests)) <= 1), got["overall"], problems)
    if got["by"] == "source":
        sources = sorted({r["source"] for r in requests})
        if sorted(got["groups"]) != sources:
            problems.append(f"groups: expected {sources}, got {sorted(got['groups'])}")
        for source in sources:
            mine = [r for r in requests if r["source"] == source]
            want = expected(mine, [s for s in samples if s["source"] == source], slo, len(clocks(mine)) <= 1)
            del want["cost"]
            compare(f"groups.{source}", want, got["groups"].get(source, {}), problems)
    if problems:
        print("\n".join(problems[:40]))
        sys.exit(1)
    print("figures agree")


main()
