"""Request latencies on the wire of a recorded run: per API, how many requests, p50/p99 from the
proxy seeing the request to it seeing the response, and for WriteTxnMarkers how many partitions
one request carried -- the figures behind "markers are slow on the embedded broker" (issue 21).

Reads the ``transcript.jsonl`` of a row (``kconform run`` / ``kconform workload`` artifacts):

    python bench/wire_latency.py /tmp/wl/artifacts/embedded/java/workloads__mixed@3/transcript.jsonl
    python bench/wire_latency.py RUN_DIR --api WriteTxnMarkers --api AddPartitionsToTxn

A directory is searched for every ``transcript.jsonl`` below it (one table per file).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.transactions import percentile  # noqa: E402
from conformance.proxy.transcript import decode_line  # noqa: E402

DEFAULT_APIS = ("WriteTxnMarkers", "AddPartitionsToTxn", "EndTxn", "Produce", "TxnOffsetCommit")


def latencies(path: Path, apis: set[str]) -> dict[str, dict]:
    """Per API: the latencies (ms) of its answered requests and, for WriteTxnMarkers, the number
    of partitions each request carried."""
    sent: dict[tuple, tuple[str, float]] = {}
    out: dict[str, dict] = {}
    with path.open() as f:
        for raw in f:
            line = json.loads(raw)
            api = line.get("api_name")
            if api not in apis:
                continue
            key = (line.get("node"), line.get("conn"), line.get("correlation_id"))
            stats = out.setdefault(api, {"ms": [], "partitions": []})
            if line.get("dir") == "c2b":
                sent[key] = (api, line["t"])
                if api == "WriteTxnMarkers":
                    frame = decode_line(line)
                    if frame is not None and frame["fields"] is not None:
                        stats["partitions"].append(sum(len(t["partition_indexes"]) for m in frame["fields"]["markers"]
                                                       for t in m["topics"]))
            elif key in sent:
                _, t0 = sent.pop(key)
                stats["ms"].append((line["t"] - t0) * 1000)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", type=Path, help="a transcript.jsonl, or a directory with some below it")
    ap.add_argument("--api", action="append", help=f"APIs to show (default {', '.join(DEFAULT_APIS)})")
    args = ap.parse_args(argv)
    files = [args.path] if args.path.is_file() else sorted(args.path.rglob("transcript.jsonl"))
    if not files:
        print(f"no transcript.jsonl under {args.path}", file=sys.stderr)
        return 2
    for path in files:
        print(path)
        print("| API | requests | p50 ms | p99 ms | partitions per request (mean) |\n|---|---|---|---|---|")
        for api, s in sorted(latencies(path, set(args.api or DEFAULT_APIS)).items()):
            ms, parts = s["ms"], s["partitions"]
            if not ms:
                continue
            per = f"{statistics.mean(parts):.2f}" if parts else "-"
            print(f"| {api} | {len(ms)} | {statistics.median(ms):.1f} | {percentile(ms, 0.99):.1f} | {per} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
