"""The Python normalizer a user would write for the same columns: regexes, json, xxhash, pyarrow.

Usage: normalize.py {vllm|sglang|mooncake} INPUT OUTPUT.parquet

It is the anchor `cargo xtask bench` compares `infertrace normalize` with: one pass over the lines, Python lists and
dicts, one Parquet file of requests (zstd) and, for the logs, one of samples (OUTPUT with `.samples.parquet`). It
writes the columns `infertrace normalize` fills for these inputs, with the same values:

- vLLM: requests with id (internal suffix stripped), arrival, abort time and e2e, prompt tokens, `max_tokens`, the
  chained 16-token prefix hashes of the prompt token ids (xxh3-64 of each block's ids as little-endian u32, seeded
  with the previous block's hash; `crates/adapter/src/hash.rs`), status, the line that completed the row; samples of all 13 metrics of the
  `Engine` and `SpecDecoding` statistics lines, percentages as fractions.
- SGLang: samples of every metric of the `Prefill batch` / `Decode batch` lines (12 in 0.5.10) per DP/TP rank
  group; requests of the `Req Time Stats` lines (id, ranks, completion, queue time, token counts).
- Mooncake: requests with id, session, turn (counted per session), arrival (`timestamp`, or the previous turn's
  arrival plus `delay`), token counts, `hash_ids` as the prefix hashes, block size 512, source line.

It is deliberately plain — no multiprocessing, no streaming writer, unbounded dicts — as such scripts are.
"""

import json
import re
import struct
import sys
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.parquet as pq
from xxhash import xxh3_64_intdigest

YEAR = 2026
BLOCK = 16
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def samples_table():
    return {"time": [], "source": [], "instance": [], "metric": [], "value": [], "source_file": [], "source_line": []}


def add_sample(samples, time, source, instance, metric, value, path, line_no):
    samples["time"].append(time)
    samples["source"].append(source)
    samples["instance"].append(instance)
    samples["metric"].append(metric)
    samples["value"].append(value)
    samples["source_file"].append(path)
    samples["source_line"].append(line_no)


def prefix_hashes(token_ids):
    """Chained hashes of the full 16-token blocks: h[i] = xxh3_64(block i as <u32, seed h[i-1]), h[-1] = 0."""
    hashes, previous = [], 0
    pack = struct.Struct(f"<{BLOCK}I").pack
    for start in range(0, len(token_ids) - BLOCK + 1, BLOCK):
        previous = xxh3_64_intdigest(pack(*token_ids[start:start + BLOCK]), seed=previous)
        hashes.append(previous)
    return hashes


def vllm(path):
    header = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR) (\d\d-\d\d \d\d:\d\d:\d\d) \[[\w.]+:\d+\] (.*)")
    received = re.compile(r"Received request (\S+?): params: .*?max_tokens=(\d+)")
    details = re.compile(r"Request (\S+?) details: .*prompt_token_ids: \[([^\]]*)\]")
    aborted = re.compile(r"Request (\S+?) aborted\.")
    # The scheduler's line names the request with vLLM's internal suffix: it only moves the row's source line.
    later = re.compile(r"Added request (\S+?)-[0-9a-f]{8}\.")
    stats = re.compile(
        r"Engine (\d+): Avg prompt throughput: ([\d.]+) tokens/s, Avg generation throughput: ([\d.]+) tokens/s, "
        r"Running: (\d+) reqs, Waiting: (\d+) reqs, Preemptions: (\d+), GPU KV cache usage: ([\d.]+)%, "
        r"Prefix cache hit rate: ([\d.]+)%"
    )
    spec = re.compile(
        r"SpecDecoding metrics: Mean acceptance length: ([\d.]+), Accepted throughput: ([\d.]+) tokens/s, "
        r"Drafted throughput: ([\d.]+) tokens/s, Accepted: (\d+) tokens, Drafted: (\d+) tokens, .*"
        r"Avg Draft acceptance rate: ([\d.]+)%"
    )
    stats_metrics = (("prompt_throughput_tps", 1), ("generation_throughput_tps", 1), ("requests_running", 1),
                     ("requests_waiting", 1), ("preemptions", 1), ("kv_cache_usage", 100),
                     ("prefix_cache_hit_rate", 100))
    requests = {}
    samples = samples_table()
    engine = "engine-0"

    def when(text):
        return datetime.strptime(f"{YEAR}-{text}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)

    with open(path, encoding="utf-8", errors="replace") as lines:
        for line_no, line in enumerate(lines, 1):
            h = header.search(line)
            if not h:
                continue
            message = h.group(2)
            m = received.match(message)
            if m:
                requests[m.group(1)] = {"arrival_time": when(h.group(1)), "completion_time": None, "e2e_s": None,
                                        "input_tokens": None, "max_tokens": int(m.group(2)), "prefix_hashes": None,
                                        "status": "unknown", "source_line": line_no}
                continue
            m = details.match(message)
            if m:
                request = requests.get(m.group(1))
                if request is not None:
                    text = m.group(2).strip()
                    ids = [int(t) for t in text.split(",")] if text else []
                    request["input_tokens"] = len(ids)
                    request["prefix_hashes"] = prefix_hashes(ids)
                    request["source_line"] = line_no
                continue
            m = aborted.match(message)
            if m:
                request = requests.get(m.group(1))
                if request is not None:
                    end = when(h.group(1))
                    request.update(status="aborted", completion_time=end, source_line=line_no,
                                   e2e_s=(end - request["arrival_time"]).total_seconds())
                continue
            m = later.match(message)
            if m:
                request = requests.get(m.group(1))
                if request is not None:
                    request["source_line"] = line_no
                continue
            m = stats.match(message)
            if m:
                t, engine = when(h.group(1)), f"engine-{int(m.group(1))}"
                for (metric, scale), value in zip(stats_metrics, m.groups()[1:]):
                    add_sample(samples, t, "vllm-log", engine, metric, float(value) / scale, path, line_no)
                continue
            m = spec.match(message)
            if m:
                t = when(h.group(1))
                length, accepted_tps, drafted_tps, accepted, drafted, rate = m.groups()
                for metric, value in (("spec_accept_rate", float(rate) / 100), ("spec_accept_length", length),
                                      ("spec_accepted_tokens", accepted), ("spec_drafted_tokens", drafted),
                                      ("spec_accepted_tps", accepted_tps), ("spec_drafted_tps", drafted_tps)):
                    add_sample(samples, t, "vllm-log", engine, metric, float(value), path, line_no)
    table = {"request_id": list(requests), "source": ["vllm-log"] * len(requests)}
    for column in ("arrival_time", "completion_time", "e2e_s", "input_tokens", "max_tokens", "prefix_hashes"):
        table[column] = [r[column] for r in requests.values()]
    table["block_size"] = [None if r["prefix_hashes"] is None else BLOCK for r in requests.values()]
    table["status"] = [r["status"] for r in requests.values()]
    table["source_file"] = [path] * len(requests)
    table["source_line"] = [r["source_line"] for r in requests.values()]
    table["prefix_hashes"] = pa.array(table["prefix_hashes"], type=pa.list_(pa.uint64()))
    return table, samples


def sglang(path):
    envelope = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) ([^\]]*)\] (.*)")
    batch = re.compile(r"(?:Prefill|Decode) batch[.,] (.*)")
    stats = re.compile(
        r"Req Time Stats\(rid=([^,]+), input len=(\d+), output len=(\d+).*?queue_duration=([\d.]+)ms"
    )
    wanted = {"#new-seq": "batch_requests", "#new-token": "batch_tokens", "#cached-token": "prefill_cached_tokens",
              "token usage": "kv_cache_usage", "#token": "kv_cache_tokens", "#running-req": "requests_running",
              "#queue-req": "requests_waiting", "#pending-token": "pending_tokens",
              "gen throughput (token/s)": "generation_throughput_tps",
              "input throughput (token/s)": "prompt_throughput_tps", "accept len": "spec_accept_length",
              "accept rate": "spec_accept_rate"}
    requests = {"request_id": [], "source": [], "instance": [], "completion_time": [], "queue_s": [],
                "input_tokens": [], "output_tokens": [], "status": [], "source_file": [], "source_line": []}
    samples = samples_table()

    def when(text):
        fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in text else "%Y-%m-%d %H:%M:%S"
        return datetime.strptime(text, fmt).replace(tzinfo=timezone.utc)

    with open(path, encoding="utf-8", errors="replace") as lines:
        for line_no, line in enumerate(lines, 1):
            e = envelope.match(line)
            if not e:
                continue
            message = e.group(3)
            m = batch.match(message)
            if m:
                t, ranks = when(e.group(1)), e.group(2)
                for field in m.group(1).split(", "):
                    key, _, value = field.partition(": ")
                    metric = wanted.get(key)
                    if metric is not None:
                        try:
                            v = float(value.strip().rstrip(","))
                        except ValueError:
                            continue
                        add_sample(samples, t, "sglang-log", ranks, metric, v, path, line_no)
                continue
            m = stats.match(message)
            if m:
                requests["request_id"].append(m.group(1))
                requests["source"].append("sglang-log")
                requests["instance"].append(e.group(2))
                requests["completion_time"].append(when(e.group(1)))
                requests["queue_s"].append(float(m.group(4)) / 1000)
                requests["input_tokens"].append(int(m.group(2)))
                requests["output_tokens"].append(int(m.group(3)))
                requests["status"].append("unknown")
                requests["source_file"].append(path)
                requests["source_line"].append(line_no)
    return requests, samples


def mooncake(path):
    requests = {"request_id": [], "source": [], "session_id": [], "turn": [], "arrival_time": [], "input_tokens": [],
                "output_tokens": [], "prefix_hashes": [], "block_size": [], "status": [], "source_file": [],
                "source_line": []}
    sessions = {}  # session id -> (turns so far, arrival of the last turn in ms)
    with open(path, encoding="utf-8") as lines:
        for line_no, line in enumerate(lines, 1):
            row = json.loads(line)
            session = row.get("session_id")
            turns, previous = sessions.get(session, (0, None))
            if row.get("timestamp") is not None:
                arrival = float(row["timestamp"])
            elif previous is not None:
                arrival = previous + float(row.get("delay") or 0)
            else:
                arrival = None
            sessions[session] = (turns + 1, arrival)
            requests["request_id"].append(row.get("request_id"))
            requests["source"].append("mooncake")
            requests["session_id"].append(session)
            requests["turn"].append(turns)
            requests["arrival_time"].append(None if arrival is None else EPOCH + timedelta(milliseconds=arrival))
            requests["input_tokens"].append(row.get("input_length"))
            requests["output_tokens"].append(row.get("output_length"))
            requests["prefix_hashes"].append(row.get("hash_ids", []))
            requests["block_size"].append(512)
            requests["status"].append("unknown")
            requests["source_file"].append(path)
            requests["source_line"].append(line_no)
    requests["prefix_hashes"] = pa.array(requests["prefix_hashes"], type=pa.list_(pa.uint64()))
    return requests, None


def main():
    fmt, source, target = sys.argv[1:4]
    requests, samples = {"vllm": vllm, "sglang": sglang, "mooncake": mooncake}[fmt](source)
    pq.write_table(pa.table(requests), target, compression="zstd")
    if samples is not None:
        pq.write_table(pa.table(samples), target.replace(".parquet", ".samples.parquet"), compression="zstd")


main()
