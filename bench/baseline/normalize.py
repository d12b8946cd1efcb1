"""The Python normalizer a user would write for the same columns: regexes, json, pyarrow.

Usage: normalize.py {vllm|sglang|mooncake} INPUT OUTPUT.parquet

It is the anchor `cargo xtask bench` compares `infertrace normalize` with: one pass over the lines, Python lists,
one Parquet file of requests (zstd) and, for the logs, one of samples (OUTPUT with `.samples.parquet`). It keeps
what the benchmark's rows hold: request ids, arrival times, token counts, outcomes; running/waiting/KV usage samples.
It is deliberately plain — no multiprocessing, no streaming writer — as such scripts are.
"""

import json
import re
import sys
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.parquet as pq

YEAR = 2025


def vllm(path):
    received = re.compile(
        r"INFO (\d\d-\d\d \d\d:\d\d:\d\d) \[logger\.py:\d+\] Received request (\S+?): params: .*?max_tokens=(\d+)"
    )
    details = re.compile(r"Request (\S+?) details: .*prompt_token_ids: \[([^\]]*)\]")
    aborted = re.compile(r"Request (\S+?) aborted")
    stats = re.compile(
        r"(\d\d-\d\d \d\d:\d\d:\d\d) \[loggers\.py:\d+\] Engine (\d+): .*?Running: (\d+) reqs, Waiting: (\d+) reqs"
        r".*?GPU KV cache usage: ([\d.]+)%"
    )
    requests = {}
    samples = {"time": [], "instance": [], "metric": [], "value": []}

    def when(text):
        return datetime.strptime(f"{YEAR}-{text}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)

    with open(path, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            m = received.search(line)
            if m:
                requests[m.group(2)] = {"arrival": when(m.group(1)), "max_tokens": int(m.group(3)), "input": None,
                                        "status": "unknown"}
                continue
            m = details.search(line)
            if m:
                ids = m.group(2).strip()
                if m.group(1) in requests:
                    requests[m.group(1)]["input"] = ids.count(",") + 1 if ids else 0
                continue
            m = aborted.search(line)
            if m:
                if m.group(1) in requests:
                    requests[m.group(1)]["status"] = "aborted"
                continue
            m = stats.search(line)
            if m:
                t, engine = when(m.group(1)), m.group(2)
                for metric, value in (("requests_running", m.group(3)), ("requests_waiting", m.group(4)),
                                      ("kv_cache_usage", float(m.group(5)) / 100)):
                    samples["time"].append(t)
                    samples["instance"].append(engine)
                    samples["metric"].append(metric)
                    samples["value"].append(float(value))
    table = {
        "request_id": list(requests),
        "arrival_time": [r["arrival"] for r in requests.values()],
        "input_tokens": [r["input"] for r in requests.values()],
        "max_tokens": [r["max_tokens"] for r in requests.values()],
        "status": [r["status"] for r in requests.values()],
    }
    return table, samples


def sglang(path):
    batch = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) ([^\]]*)\] (Prefill|Decode) batch[.,] (.*)")
    stats = re.compile(
        r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) [^\]]*\] Req Time Stats\(rid=([^,]+), input len=(\d+), "
        r"output len=(\d+).*?queue_duration=([\d.]+)ms"
    )
    wanted = {"#running-req": "requests_running", "#queue-req": "requests_waiting", "token usage": "kv_cache_usage"}
    requests = {"request_id": [], "arrival_time": [], "input_tokens": [], "output_tokens": [], "queue_s": []}
    samples = {"time": [], "instance": [], "metric": [], "value": []}

    def when(text):
        fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in text else "%Y-%m-%d %H:%M:%S"
        return datetime.strptime(text, fmt).replace(tzinfo=timezone.utc)

    with open(path, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            m = batch.match(line)
            if m:
                t, ranks = when(m.group(1)), m.group(2)
                for field in m.group(4).split(", "):
                    key, _, value = field.partition(": ")
                    if key in wanted:
                        try:
                            v = float(value.strip().rstrip(","))
                        except ValueError:
                            continue
                        samples["time"].append(t)
                        samples["instance"].append(ranks)
                        samples["metric"].append(wanted[key])
                        samples["value"].append(v)
                continue
            m = stats.match(line)
            if m:
                requests["request_id"].append(m.group(2))
                requests["arrival_time"].append(when(m.group(1)))
                requests["input_tokens"].append(int(m.group(3)))
                requests["output_tokens"].append(int(m.group(4)))
                requests["queue_s"].append(float(m.group(5)) / 1000)
    return requests, samples


def mooncake(path):
    requests = {"request_id": [], "session_id": [], "arrival_time": [], "input_tokens": [], "output_tokens": [],
                "blocks": []}
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            requests["request_id"].append(row.get("request_id"))
            requests["session_id"].append(row.get("session_id"))
            requests["arrival_time"].append(row.get("timestamp"))
            requests["input_tokens"].append(row.get("input_length"))
            requests["output_tokens"].append(row.get("output_length"))
            requests["blocks"].append(len(row.get("hash_ids", [])))
    return requests, None


def main():
    fmt, source, target = sys.argv[1:4]
    requests, samples = {"vllm": vllm, "sglang": sglang, "mooncake": mooncake}[fmt](source)
    pq.write_table(pa.table(requests), target, compression="zstd")
    if samples is not None:
        pq.write_table(pa.table(samples), target.replace(".parquet", ".samples.parquet"), compression="zstd")


main()
