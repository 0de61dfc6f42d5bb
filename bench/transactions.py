"""Transactional throughput and commit latency, embedded broker vs its peers, in one run.

A confluent-kafka transactional producer runs T transactions of 100 records each
(begin, 100 sends, commit) against each target; we print commits per second and the
latency of commit_transaction() (p50/p99), and the embedded broker's ratios. ``--nodes 3``:
3-node clusters, the topic replicated 3 times (so are the transaction log and its markers).

    python bench/transactions.py [--targets embedded,apache-kafka] [--nodes N] [--txns 500] [--records 100]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.throughput import started_line  # noqa: E402
from conformance.targets import TARGETS  # noqa: E402
from conformance.targets.base import TopicSpec, Topology  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def run_transactions(bootstrap: str, topic: str, txns: int, records: int) -> dict:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{time.time_ns()}",
                  "linger.ms": 0, "log_level": 0})
    p.init_transactions(30)
    value = b"x" * 100
    # warm-up transaction (coordinator lookup, partition metadata)
    p.begin_transaction()
    p.produce(topic, value)
    p.commit_transaction(30)
    latencies = []
    start = time.perf_counter()
    for _ in range(txns):
        p.begin_transaction()
        for i in range(records):
            p.produce(topic, value, partition=i % 3)
        t0 = time.perf_counter()
        p.commit_transaction(30)
        latencies.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - start
    return {"commits_per_s": txns / elapsed, "p50_ms": statistics.median(latencies) * 1000,
            "p99_ms": percentile(latencies, 0.99) * 1000}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", default="embedded,apache-kafka")
    ap.add_argument("--nodes", type=int, default=1, help="nodes per target (the topic replicated min(nodes, 3) times)")
    ap.add_argument("--txns", type=int, default=500)
    ap.add_argument("--records", type=int, default=100)
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="kconform-txbench-") as tmp:
        for name in [t.strip() for t in args.targets.split(",") if t.strip()]:
            cls = TARGETS[name]
            ok, why = cls.availability()
            if not ok:
                print(f"  {name}: not available ({why})")
                continue
            with cls() as target:
                t0 = time.perf_counter()
                topics = [TopicSpec("txbench", 3, min(args.nodes, 3))]
                bootstrap = target.start(Topology(args.nodes, topics), {}, Path(tmp) / name)
                print(started_line(name, target, time.perf_counter() - t0), flush=True)
                r = run_transactions(bootstrap, "txbench", args.txns, args.records)
                results[name] = r
                print(f"  {name:<13} {target.version:<8} {r['commits_per_s']:>7.1f} commits/s  "
                      f"commit p50 {r['p50_ms']:6.2f} ms  p99 {r['p99_ms']:6.2f} ms "
                      f"({args.txns} txns x {args.records} records)", flush=True)
    base = results.get("embedded")
    if base:
        for peer, r in results.items():
            if peer != "embedded":
                print(f"  embedded / {peer}: commits/s {base['commits_per_s'] / r['commits_per_s']:.2f}, "
                      f"p50 latency {base['p50_ms'] / r['p50_ms']:.2f} (lower is better)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
