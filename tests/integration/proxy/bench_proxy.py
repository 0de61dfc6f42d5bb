"""Produce/consume throughput with and without the proxy in front of the embedded broker.

    python -m tests.integration.proxy.bench_proxy [--records 100000] [--size 100] [--repeat 3]

Not a test (nothing asserted): prints records/s and MB/s for each path so the proxy's
overhead can be quoted. Both paths run against the same broker process, one after the other,
on fresh topics; the proxy records a full transcript meanwhile, as it does in a case.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from conformance.proxy import ProxyServer
from tests.conftest import BrokerProcess


def produce_run(bootstrap: str, topic: str, n: int, size: int) -> float:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "log_level": 0})
    value = b"x" * size
    p.produce(topic, value=b"warm", partition=0)
    p.flush(30)
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value=value, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    left = p.flush(120)
    elapsed = time.perf_counter() - t0
    assert left == 0
    return elapsed


def round_trips(bootstrap: str, topic: str, n: int) -> float:
    """n produce requests one at a time (flush after each): per-request latency, not bandwidth."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "log_level": 0})
    p.produce(topic, value=b"warm", partition=0)
    p.flush(30)
    t0 = time.perf_counter()
    for _ in range(n):
        p.produce(topic, value=b"r", partition=0)
        assert p.flush(30) == 0
    return time.perf_counter() - t0


def consume_run(bootstrap: str, topic: str, n: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{time.time_ns()}", "log_level": 0,
                  "enable.auto.commit": False,
                  # librdkafka pauses fetching for fetch.queue.backoff.ms (1 s) once its local queue
                  # holds queued.min.messages; the faster path would be the one penalised.
                  "queued.min.messages": 10 * n, "queued.max.messages.kbytes": 1 << 20})
    c.assign([TopicPartition(topic, 0, 1)])
    got = 0
    t0 = time.perf_counter()
    deadline = time.monotonic() + 120
    while got < n and time.monotonic() < deadline:
        got += sum(1 for m in c.consume(10000, 0.5) if m.error() is None)
    elapsed = time.perf_counter() - t0
    c.close()
    assert got >= n, f"read {got} of {n}"
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--round-trips", type=int, default=2000)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kconform-proxy-bench-"))
    proxy = ProxyServer(transcript_path=work / "transcript.jsonl")
    node = proxy.add_node(1)
    proxy.start_in_thread()
    # The broker advertises the proxy; the direct path pins clients to the broker's own port by
    # bootstrapping there *and* using a second, unproxied broker.
    proxied = BrokerProcess(work / "proxied", {"advertised.listeners": node.listener}).start()
    node.set_upstream("127.0.0.1", proxied.port)
    direct = BrokerProcess(work / "direct").start()
    results: dict[str, dict[str, list[float]]] = {"direct": {"produce": [], "consume": [], "rtt": []},
                                                  "proxy": {"produce": [], "consume": [], "rtt": []}}
    try:
        for i in range(args.repeat):
            for path, bootstrap in (("direct", direct.bootstrap), ("proxy", node.address)):
                topic = f"bench-{path}-{i}"
                cpu0 = resource.getrusage(resource.RUSAGE_SELF)
                results[path]["produce"].append(produce_run(bootstrap, topic, args.records, args.size))
                results[path]["consume"].append(consume_run(bootstrap, topic, args.records))
                results[path]["rtt"].append(round_trips(bootstrap, topic + "-rtt", args.round_trips))
                cpu1 = resource.getrusage(resource.RUSAGE_SELF)
                print(f"run {i} {path}: produce {results[path]['produce'][-1]:.2f}s "
                      f"consume {results[path]['consume'][-1]:.2f}s rtt {results[path]['rtt'][-1]:.2f}s "
                      f"(this process cpu {cpu1.ru_utime - cpu0.ru_utime + cpu1.ru_stime - cpu0.ru_stime:.2f}s)",
                      flush=True)
        mb = args.records * args.size / 1e6
        for path, r in results.items():
            for what, times in r.items():
                med = statistics.median(times)
                if what == "rtt":
                    print(f"{path:6} {what:7}: median {med / args.round_trips * 1e6:.0f} us per synchronous produce")
                    continue
                print(f"{path:6} {what:7}: median {med:.2f}s  {args.records / med:,.0f} rec/s  {mb / med:.1f} MB/s")
        print(f"transcript lines: {len(proxy.transcript)}")
    finally:
        proxy.stop()
        proxied.stop()
        direct.stop()


if __name__ == "__main__":
    main()
