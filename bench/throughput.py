"""Produce and consume throughput: the embedded broker against its peers, in one run.

For each target (embedded trio broker, Tansu, Apache Kafka when it can start
here) and each value size, confluent-kafka writes N records with acks=all to a
3-partition topic, then a read_committed consumer reads them all back. Every
figure is printed, with the embedded broker's ratio to each peer: machines
are noisy, so only same-run ratios mean something.

``--nodes 3`` runs each target as a 3-node cluster with the topics replicated 3 times (acks=all
then waits for the ISR); start-up time and resident memory per node are printed too.

    python bench/throughput.py [--targets embedded,tansu,apache-kafka] [--nodes N] [--small N] [--large N]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conformance.targets import TARGETS  # noqa: E402
from conformance.targets.base import TopicSpec, Topology  # noqa: E402

PARTITIONS = 3


def produce(bootstrap: str, topic: str, n: int, size: int) -> tuple[float, int]:
    p = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
        "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
        "enable.idempotence": False, "compression.type": "none", "log_level": 0,
    })
    value = os.urandom(size)
    errors = [0]

    def on_delivery(err, msg):
        if err is not None:
            errors[0] += 1

    start = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value, partition=i % PARTITIONS, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.01)
        if i % 10000 == 0:
            p.poll(0)
    remaining = p.flush(300)
    elapsed = time.perf_counter() - start
    if remaining or errors[0]:
        raise RuntimeError(f"{remaining} records undelivered, {errors[0]} delivery errors")
    return elapsed, n


def consume(bootstrap: str, topic: str, n: int, timeout: float = 300.0) -> float:
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"bench-{time.time_ns()}",
        "isolation.level": "read_committed", "enable.auto.commit": False,
        # librdkafka's defaults for fetch sizes (fetch.max.bytes 50 MiB, max.partition.fetch.bytes
        # 1 MiB); queued.min.messages raised so the consumer never waits on fetch.queue.backoff.ms
        "fetch.wait.max.ms": 100, "queued.min.messages": 1_000_000, "log_level": 0,
    })
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    start = time.perf_counter()
    deadline = start + timeout
    while got < n and time.perf_counter() < deadline:
        for m in c.consume(10000, 1.0):
            if m.error() is None:
                got += 1
    elapsed = time.perf_counter() - start
    c.close()
    if got < n:
        raise RuntimeError(f"consumed {got} of {n} records")
    return elapsed


def started_line(name: str, target, seconds: float) -> str:
    """How long the target took to start and what each of its processes holds in memory."""
    rss = ", ".join(f"node {n} {b / 2**20:.0f} MiB" for n, b in sorted(target.rss_bytes().items()))
    return f"  {name} {target.version}: started in {seconds:.1f}s; resident memory {rss}"


def bench_target(name: str, cases: list[tuple[int, int]], workdir: Path, nodes: int = 1) -> dict:
    cls = TARGETS[name]
    ok, why = cls.availability()
    if not ok:
        print(f"  {name}: not available here ({why})", flush=True)
        return {}
    if nodes > 1 and "multi_node" not in cls.static_capabilities:
        print(f"  {name}: runs a single node only", flush=True)
        return {}
    results = {}
    topics = [TopicSpec(f"bench-{size}", PARTITIONS, min(nodes, 3)) for _, size in cases]
    with cls() as target:
        t0 = time.perf_counter()
        target.start(Topology(nodes=nodes, topics=topics), {}, workdir / name)
        print(started_line(name, target, time.perf_counter() - t0), flush=True)
        bootstrap = target.bootstrap
        for n, size in cases:
            topic = f"bench-{size}"
            pt, _ = produce(bootstrap, topic, n, size)
            ct = consume(bootstrap, topic, n)
            mb = n * size / 1e6
            results[size] = {"produce_msgs": n / pt, "produce_mb": mb / pt, "consume_msgs": n / ct,
                             "consume_mb": mb / ct}
            r = results[size]
            print(f"  {name:<13} {size:>6} B x {n:>7}: produce {r['produce_msgs']:>10,.0f} msg/s "
                  f"{r['produce_mb']:>7.1f} MB/s | consume {r['consume_msgs']:>10,.0f} msg/s "
                  f"{r['consume_mb']:>7.1f} MB/s", flush=True)
    return results


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", default="embedded,tansu,apache-kafka")
    ap.add_argument("--nodes", type=int, default=1, help="nodes per target (topics replicated min(nodes, 3) times)")
    ap.add_argument("--small", type=int, default=300_000, help="records of 100 bytes")
    ap.add_argument("--large", type=int, default=10_000, help="records of 10 KiB")
    args = ap.parse_args()
    cases = [(args.small, 100), (args.large, 10240)]
    names = [t.strip() for t in args.targets.split(",") if t.strip()]
    all_results = {}
    with tempfile.TemporaryDirectory(prefix="kconform-bench-") as tmp:
        for name in names:
            all_results[name] = bench_target(name, cases, Path(tmp), args.nodes)
    base = all_results.get("embedded") or {}
    print("\nratios (embedded / peer; >= 0.5 is the target against apache-kafka):")
    for peer, res in all_results.items():
        if peer == "embedded" or not res or not base:
            continue
        for size in res:
            b, p = base[size], res[size]
            print(f"  vs {peer:<13} {size:>6} B: produce {b['produce_msgs'] / p['produce_msgs']:.2f}  "
                  f"consume {b['consume_msgs'] / p['consume_msgs']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
