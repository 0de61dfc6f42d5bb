"""What starting the embedded target costs: start (until every node announced its port), stop --
one node and three nodes (a controller and three brokers), by exec (`python -m broker_impl`) and
by fork from the zygote (conformance/zygote.py), in the same run, alternating, so the ratio is
not the machine's mood. A library run starts a few hundred broker processes (a case that kills
a node, another topology or other broker configs gets brokers of its own).

CPU is the whole machine's (/proc/stat, every process: the brokers, the zygote, this one), so
run it on an otherwise idle machine; the figures are medians of N rounds.

    PYTHONPATH=. python bench/broker_start.py --rounds 8
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conformance.targets.embedded import EmbeddedTarget  # noqa: E402
from conformance.targets.topology import Topology  # noqa: E402


def busy_seconds() -> float:
    """Non-idle CPU time of the whole machine so far, in seconds."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    idle = fields[3] + fields[4]   # idle + iowait
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


def one(nodes: int, fork: bool, root: Path) -> tuple[float, float]:
    os.environ["KCONFORM_ZYGOTE"] = "1" if fork else "0"
    target = EmbeddedTarget()
    c0, t0 = busy_seconds(), time.monotonic()
    target.start(Topology(nodes=nodes), {}, Path(tempfile.mkdtemp(dir=root)))
    started = time.monotonic() - t0
    target.stop()
    return busy_seconds() - c0, started


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=8)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="broker-start-") as tmp:
        root = Path(tmp)
        one(1, True, root)   # the zygote's own imports, once a run, are not a start's
        for nodes in (1, 3):
            got: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
            for _ in range(args.rounds):
                for fork in (False, True):
                    got[fork].append(one(nodes, fork, root))
            cpu = {f: statistics.median(x[0] for x in got[f]) for f in got}
            wall = {f: statistics.median(x[1] for x in got[f]) for f in got}
            for fork in (False, True):
                print(f"{nodes} node(s), {'zygote' if fork else 'exec  '}: machine CPU {cpu[fork]:.3f} s a start+stop, "
                      f"start {wall[fork]:.3f} s (median of {args.rounds})")
            print(f"{nodes} node(s): zygote/exec CPU x{cpu[True] / cpu[False]:.2f}, start x{wall[True] / wall[False]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
