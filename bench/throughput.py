"""Produce and consume throughput: the embedded broker against its peers, in one run.

For each target (embedded trio broker, Tansu, Apache Kafka when it can start
here) and each value size, confluent-kafka writes N records with acks=all to a
3-partition topic, then a read_committed consumer reads them all back. Every
figure is printed, with the embedded broker's ratio to each peer: machines
are noisy, so only same-run ratios mean something.

``--nodes 3`` runs each target as a 3-node cluster with the topics replicated 3 times (acks=all
then waits for the ISR); start-up time and resident memory per node (after start, and after
the workload) are printed too.

``--security plaintext,sasl_ssl`` measures each target once per security protocol, as
``kconform run --security`` sets it up (a SCRAM-SHA-512 user, TLS with a CA made for the run):
the cost of TLS and SASL is each target's secured figure over its plaintext one, in the same run,
and those costs are compared between targets (issue 22). A target that cannot serve a protocol
says why and is left out of that protocol's figures.

    python bench/throughput.py [--targets embedded,tansu,apache-kafka] [--nodes N] [--small N] [--large N]
                               [--security plaintext[,sasl_plaintext,sasl_ssl]]
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conformance import security  # noqa: E402
from conformance.targets import TARGETS  # noqa: E402
from conformance.targets.base import NotApplicable, TopicSpec, Topology  # noqa: E402

PARTITIONS = 3


def produce(bootstrap: str, topic: str, n: int, size: int) -> tuple[float, int]:
    p = Producer({
        **security.current().librdkafka_config(), "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
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
        **security.current().librdkafka_config(), "bootstrap.servers": bootstrap, "group.id": f"bench-{time.time_ns()}",
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


def memory(target) -> str:
    """What each of the target's processes holds in memory now (an embedded cluster's
    controller is node 1000)."""
    return ", ".join(f"node {n} {b / 2**20:.0f} MiB" for n, b in sorted(target.rss_bytes().items()))


def started_line(name: str, target, seconds: float) -> str:
    """How long the target took to start (its topics created) and its memory then."""
    return f"  {name} {target.version}: started in {seconds:.1f}s; resident memory {memory(target)}"


def after_line(name: str, target) -> str:
    return f"  {name} {target.version}: resident memory after the workload {memory(target)}"


def bench_target(name: str, cases: list[tuple[int, int]], workdir: Path, nodes: int = 1) -> dict:
    """The figures of target ``name`` under the security protocol in use (``security.use``)."""
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
    # a JVM target runs with C2 here: its C1-only start-up mode (what a conformance row uses) costs
    # throughput, TLS most of all
    options = {"fast_startup": False} if "fast_startup" in inspect.signature(cls).parameters else {}
    with cls(**options) as target:
        t0 = time.perf_counter()
        try:
            target.start(Topology(nodes=nodes, topics=topics), {}, workdir)
        except NotApplicable as e:
            print(f"  {name}: cannot serve {security.current().protocol} ({e})", flush=True)
            return {}
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
        print(after_line(name, target), flush=True)
    return results


def ratios(a: dict, b: dict) -> dict[int, tuple[float, float]]:
    """Per value size: (produce, consume) msg/s of ``a`` over ``b``, where both were measured."""
    return {size: (a[size]["produce_msgs"] / b[size]["produce_msgs"], a[size]["consume_msgs"] / b[size]["consume_msgs"])
            for size in a if size in b}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", default="embedded,tansu,apache-kafka")
    ap.add_argument("--nodes", type=int, default=1, help="nodes per target (topics replicated min(nodes, 3) times)")
    ap.add_argument("--small", type=int, default=300_000, help="records of 100 bytes")
    ap.add_argument("--large", type=int, default=10_000, help="records of 10 KiB")
    ap.add_argument("--security", default="plaintext",
                    help=f"comma-separated, each one of {', '.join(security.PROTOCOLS)}: every target is "
                         "measured under each")
    args = ap.parse_args()
    cases = [(args.small, 100), (args.large, 10240)]
    names = [t.strip() for t in args.targets.split(",") if t.strip()]
    protocols = [p.strip().lower() for p in args.security.split(",") if p.strip()]
    for p in protocols:
        if p not in security.PROTOCOLS:
            ap.error(f"--security {p!r}: one of {', '.join(security.PROTOCOLS)}")
    # results[protocol][target]
    results: dict[str, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory(prefix="kconform-bench-") as tmp:
        for proto in protocols:
            if len(protocols) > 1:
                print(f"\n{proto}:", flush=True)
            with security.use(security.Security.generate(proto)):
                for name in names:
                    results.setdefault(proto, {})[name] = bench_target(
                        name, cases, Path(tmp) / f"{name}-{proto}", args.nodes)
    for proto in protocols:
        base = results[proto].get("embedded") or {}
        if not base or not any(res for peer, res in results[proto].items() if peer != "embedded"):
            continue
        print(f"\nratios{f' over {proto}' if len(protocols) > 1 else ''} "
              "(embedded / peer; >= 0.5 is the target against apache-kafka):")
        for peer, res in results[proto].items():
            if peer == "embedded" or not res or not base:
                continue
            for size, (prod, cons) in ratios(base, res).items():
                print(f"  vs {peer:<13} {size:>6} B: produce {prod:.2f}  consume {cons:.2f}")
    plain = protocols[0]
    for proto in protocols[1:]:
        print(f"\ncost of {proto} (its throughput / {plain}'s, same target; 1.00 = no cost):")
        cost = {}
        for name in names:
            a, b = results[proto].get(name) or {}, results[plain].get(name) or {}
            cost[name] = ratios(a, b)
            for size, (prod, cons) in cost[name].items():
                print(f"  {name:<13} {size:>6} B: produce {prod:.2f}  consume {cons:.2f}")
        for peer in names:
            if peer == "embedded" or not cost.get(peer) or not cost.get("embedded"):
                continue
            for size in cost["embedded"]:
                if size in cost[peer]:
                    (ep, ec), (pp, pc) = cost["embedded"][size], cost[peer][size]
                    print(f"  embedded's cost / {peer}'s {size:>6} B: produce {ep / pp:.2f}  consume {ec / pc:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
