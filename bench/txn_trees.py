"""Transactions/s of the embedded broker of several source trees, in one run: before/after figures.

Each tree's broker (``python -m broker_impl`` with PYTHONPATH=TREE, one node, a 3-partition topic)
gets the loop of bench/transactions.py -- a confluent-kafka transactional producer, T
transactions of 100 records, commit latency -- and the broker's CPU seconds from /proc, divided by
the transactions: on a shared machine, where commits/s moves with everyone's load, CPU per
transaction is the steadier figure. The trees take turns, ROUNDS times, and the last lines give
each tree's median and its ratio to the first tree.

    git worktree add /tmp/base 2e60ac4
    python bench/txn_trees.py /tmp/base . [--txns 300] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.transactions import run_transactions  # noqa: E402


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_tree(tree: Path, txns: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="kconform-txtrees-") as data:
        argv = [sys.executable, "-m", "broker_impl", "--listen", "127.0.0.1:0", "--data-dir", data, "--node-id", "1"]
        with open(Path(data) / "broker.log", "w") as err:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True, cwd=data,
                                    env=dict(os.environ, PYTHONPATH=str(tree)))
        try:
            m = re.match(r"listening (\S+):(\d+)", proc.stdout.readline())
            if m is None:
                raise RuntimeError(f"{tree}: the broker did not start (see its log)")
            bootstrap = f"127.0.0.1:{m.group(2)}"
            admin = AdminClient({"bootstrap.servers": bootstrap})
            for f in admin.create_topics([NewTopic("txbench", 3, 1)]).values():
                f.result()
            run_transactions(bootstrap, "txbench", 1, 1)   # creates __transaction_state: not counted
            c0 = cpu_seconds(proc.pid)
            r = run_transactions(bootstrap, "txbench", txns, 100)
            r["broker_cpu_ms_per_txn"] = (cpu_seconds(proc.pid) - c0) * 1000 / txns
        finally:
            proc.terminate()
            proc.wait(60)
    return r


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", nargs="+", type=Path, help="source trees (the first is the reference)")
    ap.add_argument("--txns", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    trees = [t.resolve() for t in args.trees]
    runs: dict[Path, list[dict]] = {t: [] for t in trees}
    for i in range(args.rounds):
        for tree in trees:
            r = bench_tree(tree, args.txns)
            runs[tree].append(r)
            print(f"  round {i + 1} {tree}: {r['commits_per_s']:7.1f} commits/s  commit p50 {r['p50_ms']:6.2f} ms  "
                  f"broker CPU {r['broker_cpu_ms_per_txn']:5.2f} ms/txn", flush=True)
    ref = trees[0]

    def med(tree: Path, key: str) -> float:
        return statistics.median(r[key] for r in runs[tree])

    for tree in trees:
        print(f"  median {tree}: {med(tree, 'commits_per_s'):7.1f} commits/s "
              f"(x{med(tree, 'commits_per_s') / med(ref, 'commits_per_s'):.2f}), broker CPU "
              f"{med(tree, 'broker_cpu_ms_per_txn'):5.2f} ms/txn "
              f"(x{med(tree, 'broker_cpu_ms_per_txn') / med(ref, 'broker_cpu_ms_per_txn'):.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
