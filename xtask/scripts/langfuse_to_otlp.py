#!/usr/bin/env python3
"""Rewrites a Langfuse trace export ({"trace", "observations"}) as OTLP/JSON, one ExportTraceServiceRequest per
span, in order of span end (as a collector's batch exporter sees spans end: children before their parent).

Only the envelope changes: ids, names, times and every attribute come from the observation and its `metadata`
(`attributes`, `resourceAttributes`, `scope`). Langfuse stores attribute values as text; token counts (keys with
`token`) go back to OTLP's `intValue` and durations and costs to `doubleValue`. Usage:
    python3 langfuse_to_otlp.py export.json > out.otlp.jsonl
"""
import datetime
import json
import sys


def nanos(iso):
    t = datetime.datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return str(int(round(t.timestamp() * 1000)) * 1_000_000)


def value(key, text):
    if not isinstance(text, str):
        text = json.dumps(text)
    if "token" in key and text.isdigit():
        return {"intValue": text}
    if ("duration" in key or "cost" in key):
        try:
            return {"doubleValue": float(text)}
        except ValueError:
            pass
    return {"stringValue": text}


def main(path):
    doc = json.load(open(path))
    trace_id = doc["trace"]["id"]
    spans = []
    for o in doc["observations"]:
        meta = o.get("metadata") or "{}"
        meta = json.loads(meta) if isinstance(meta, str) else meta
        attrs = meta.get("attributes") or {}
        span = {
            "traceId": trace_id,
            "spanId": o["id"],
            "parentSpanId": o.get("parentObservationId") or "",
            "name": o["name"],
            "startTimeUnixNano": nanos(o["startTime"]),
            "endTimeUnixNano": nanos(o.get("endTime") or o["startTime"]),
            "attributes": [{"key": k, "value": value(k, v)} for k, v in attrs.items()],
            "status": {"code": 2} if o.get("level") == "ERROR" else {},
        }
        resource = meta.get("resourceAttributes") or {}
        scope = meta.get("scope") or {}
        spans.append((span["endTimeUnixNano"], span["startTimeUnixNano"], resource, scope.get("name", ""), span))
    spans.sort(key=lambda s: (int(s[0]), int(s[1])))
    for _, _, resource, scope, span in spans:
        export = {"resourceSpans": [{
            "resource": {"attributes": [{"key": k, "value": {"stringValue": str(v)}} for k, v in resource.items()]},
            "scopeSpans": [{"scope": {"name": scope}, "spans": [span]}],
        }]}
        print(json.dumps(export, separators=(",", ":"), ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv[1])
