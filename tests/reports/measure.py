"""Measures report and analytics cost on this machine (not a test: prints figures).

    python -m tests.reports.measure [--runs 100] [--work DIR]

1. ``reports.cli.report`` for one run of 35 cases x 3 targets x 3 clients
   (315 rows, with transcripts and logs as attachments);
2. ``reports.analytics.analyze`` over ``--runs`` runs of that size
   (results.jsonl only), including the Spark start-up.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from tests.reports.rowgen import CASES, CLIENTS, TARGETS, run_id_for, write_run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--work", default=None)
    ap.add_argument("--skip-report", action="store_true")
    ap.add_argument("--skip-analytics", action="store_true")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="kconform-measure-"))
    print(f"work dir {work}; {len(CASES)} cases x {len(TARGETS)} targets x {len(CLIENTS)} clients")

    if not args.skip_report:
        from reports.allure_report import ensure_allure
        from reports.cli import report

        ensure_allure()
        rid, t = run_id_for(0)
        run = write_run(work / "one", rid, t)
        for i in range(3):
            t0 = time.monotonic()
            served, single = report(run, work / f"report{i}")
            print(f"report: {time.monotonic() - t0:.1f} s (single file {single.stat().st_size / 1e6:.1f} MB)")

    if not args.skip_analytics:
        from reports.analytics import analyze

        root = work / "runs"
        rnd = random.Random(1)
        t0 = time.monotonic()
        for i in range(args.runs):
            rid, t = run_id_for(i)
            flips = {(rnd.choice(CASES)[0], rnd.choice(TARGETS)[0], rnd.choice(CLIENTS)[0]): "fail"
                     for _ in range(2)}
            write_run(root, rid, t, artifacts=False, seed=i, verdict_overrides=flips)
        size = sum(p.stat().st_size for p in root.rglob("results.jsonl"))
        print(f"wrote {args.runs} runs ({size / 1e6:.1f} MB of results.jsonl) in {time.monotonic() - t0:.1f} s")
        for i in range(2):
            t0 = time.monotonic()
            summary = analyze(root, work / f"analytics{i}", master="local[2]")
            print(f"analyze {args.runs} runs: {time.monotonic() - t0:.1f} s")
        print(summary)


if __name__ == "__main__":
    main()
