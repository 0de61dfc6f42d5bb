"""The raw actor's requests on a connection each against kept connections (conformance/raw.py
`Connections`): N InitProducerId requests in a row (as the epoch-exhaustion regression cases send
32,766 of them), per target, one node, the two ways in turns.

    PYTHONPATH=. python bench/raw_connections.py embedded apache-kafka --requests 2000 --rounds 2

Prints, per target and way, the median over rounds of the time a request took and of the CPU
the benchmark's own process spent on it, and the kept/fresh ratio of the time (the broker's
share is the rest of the time: its CPU is not read, so every target is measured the same way).
"""
from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conformance.raw import RAW_RETRY, Connections, send_request  # noqa: E402
from conformance.targets import TARGETS, TopicSpec, Topology  # noqa: E402


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def one_way(address, requests: int, pool: Connections | None) -> tuple[float, float]:
    """(ms a request, harness CPU ms a request) for `requests` InitProducerId of one id."""
    body = {"transactional_id": f"bench-{time.monotonic_ns()}", "transaction_timeout_ms": 60000}
    first = send_request(address, "InitProducerId", 4, body, 30.0, retry=RAW_RETRY, pool=pool)
    if not first.ok or first.data["error"] != "NONE":
        raise SystemExit(f"InitProducerId failed: {first}")
    t0, c0 = time.monotonic(), _cpu()
    for _ in range(requests):
        out = send_request(address, "InitProducerId", 4, body, pool=pool)
        if not out.ok or out.data["error"] != "NONE":
            raise SystemExit(f"InitProducerId failed: {out}")
    return (time.monotonic() - t0) * 1000 / requests, (_cpu() - c0) * 1000 / requests


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("targets", nargs="+", choices=sorted(TARGETS))
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    for name in args.targets:
        target = TARGETS[name]()
        target.start(Topology(nodes=1, topics=[TopicSpec("bench", 1)]), {}, Path(tempfile.mkdtemp(prefix="raw-")))
        figures: dict[str, list[tuple[float, float]]] = {"fresh": [], "kept": []}
        try:
            address = target.live_addresses()[0][1]
            for _ in range(args.rounds):
                figures["fresh"].append(one_way(address, args.requests, None))
                pool = Connections()
                try:
                    figures["kept"].append(one_way(address, args.requests, pool))
                finally:
                    pool.close()
        finally:
            target.stop()
        med = {way: (statistics.median(f[0] for f in fs), statistics.median(f[1] for f in fs))
               for way, fs in figures.items()}
        for way, (ms, cpu) in med.items():
            print(f"{name}: {way:5s} connection: {ms:.3f} ms a request, harness CPU {cpu:.3f} ms "
                  f"({args.requests} requests, median of {args.rounds} rounds)")
        print(f"{name}: kept/fresh time {med['kept'][0] / med['fresh'][0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
