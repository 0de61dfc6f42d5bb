"""What starting a client driver costs: spawn, `hello`, close -- per client, the CPU of the driver
process (read when it is reaped) and the wall time, medians over N starts. A library run starts
about a thousand drivers (every row's actors and its observer), so this is paid over and over.

    PYTHONPATH=. python bench/driver_start.py confluent kafka-python aiokafka java --starts 6

Run it on two checkouts (PYTHONPATH=OTHER) in the same hour for a before/after ratio; Python
drivers are forked from a zygote (conformance/zygote.py) unless KCONFORM_ZYGOTE=0, so running it
with and without that variable gives the zygote's ratio.
"""
from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conformance.clients.process import ClientProcess  # noqa: E402


def one_start(client: str) -> tuple[float, float]:
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = ClientProcess(client).start()
    proc.close()
    wall = time.monotonic() - t0
    forked = getattr(proc._proc, "cpu_s", None)   # a zygote's child: not ours to reap, it reports
    if forked is not None:
        return forked, wall
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime), wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("clients", nargs="+")
    ap.add_argument("--starts", type=int, default=6)
    args = ap.parse_args()
    for client in args.clients:
        one_start(client)   # builds and caches (the Java class-data archive, a Go binary) are not counted
        figures = [one_start(client) for _ in range(args.starts)]
        print(f"{client}: CPU {statistics.median(f[0] for f in figures):.3f} s, "
              f"wall {statistics.median(f[1] for f in figures):.3f} s a start (median of {args.starts})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
