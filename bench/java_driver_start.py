"""What a Java driver session costs with and without its class-data archive
(conformance/clients/java_cds.py): start the driver, a transaction, a read_committed group read,
close -- what a row's actor or observer does -- the two ways in turns, against the embedded broker.

    PYTHONPATH=. python bench/java_driver_start.py --sessions 5

Prints the median CPU (user + system of the JVM, read when it is reaped) and wall time a session.
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

from conformance.clients import java_build  # noqa: E402
from conformance.clients.process import ClientProcess  # noqa: E402
from conformance.targets import TARGETS, TopicSpec, Topology  # noqa: E402


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def session(command: list[str], bootstrap: str, n: int) -> tuple[float, float]:
    """(CPU s, wall s) of one driver session."""
    c0, t0 = _children_cpu(), time.monotonic()
    driver = ClientProcess("java", command=command, label=f"bench-{n}").start()
    try:
        topic = "bench-java-start"
        for op, args in [
            ("create_producer", {"config": {"bootstrap.servers": bootstrap, "transactional.id": f"bench-{n}"}}),
            ("init_transactions", {}), ("begin_transaction", {}), ("send", {"topic": topic, "value": "v"}),
            ("commit_transaction", {}),
            ("create_consumer", {"config": {"bootstrap.servers": bootstrap, "group.id": f"bench-{n}",
                                            "isolation.level": "read_committed", "auto.offset.reset": "earliest"}}),
            ("subscribe", {"topics": [topic]}), ("poll", {"timeout_ms": 3000}),
        ]:
            out = driver.call(op, 20_000, **args)
            if not out.ok:
                raise SystemExit(f"{op} failed: {out.error}")
    finally:
        driver.close()
    return _children_cpu() - c0, time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=5)
    args = ap.parse_args()
    with_archive = java_build.java_command()
    if not any(a.startswith("-XX:SharedArchiveFile=") for a in with_archive):
        raise SystemExit("no class-data archive for the Java driver here (see its unavailable.txt in the cache)")
    without = [*with_archive[:1], *[a for a in with_archive[1:] if not a.startswith(("-XX:SharedArchiveFile", "-Xshare"))]]
    without[without.index("-cp") + 1] = java_build.classpath()
    target = TARGETS["embedded"]()
    target.start(Topology(nodes=1, topics=[TopicSpec("bench-java-start", 1)]), {},
                 Path(tempfile.mkdtemp(prefix="java-start-")))
    try:
        host, port = target.live_addresses()[0][1]
        bootstrap = f"{host}:{port}"
        session(without, bootstrap, 0)   # warm-up: the broker's first group and transaction
        figures: dict[str, list[tuple[float, float]]] = {"without archive": [], "with archive": []}
        for n in range(args.sessions):
            figures["without archive"].append(session(without, bootstrap, 2 * n + 1))
            figures["with archive"].append(session(with_archive, bootstrap, 2 * n + 2))
    finally:
        target.stop()
    for way, fs in figures.items():
        print(f"java driver session {way}: CPU {statistics.median(f[0] for f in fs):.2f} s, "
              f"wall {statistics.median(f[1] for f in fs):.2f} s (median of {len(fs)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
