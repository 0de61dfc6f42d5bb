"""`kconform run`: the conformance run from the command line.

    kconform run [--target NAME ...] [--client NAME ...] [--case GLOB ...] --results DIR

Defaults: the embedded target; every client installed here; every case under cases/. Exit
status 0 when every row passed or was not applicable, 1 when a check failed, a target crashed or a run errored,
2 when the cases or options are invalid.
"""
from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from ..clients.registry import CLIENTS
from ..dsl import CaseError, load_cases
from ..targets import target_class
from .report import print_summary, progress_callbacks
from .runner import RunOptions, default_clients, default_jobs, run


def add_run_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("run", help="run the conformance cases on targets with clients",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", action="append", dest="targets", metavar="NAME",
                   help="target to run on (repeatable; default: embedded); apache-kafka@VERSION picks a Kafka "
                        "release. `kconform targets` lists them")
    p.add_argument("--client", action="append", dest="clients", metavar="NAME",
                   help="client to drive (repeatable; default: every installed client)")
    p.add_argument("--case", action="append", dest="cases", metavar="GLOB",
                   help="case id glob such as 'txn/*' or a case file (repeatable; default: all)")
    p.add_argument("--tag", action="append", dest="tags", metavar="TAG",
                   help="only cases with this tag (repeatable: any of them)")
    p.add_argument("--results", required=True, type=Path, metavar="DIR",
                   help="directory for results.jsonl, transcripts, logs (emptied first)")
    p.add_argument("--cases-dir", type=Path, default=None, help="root of the case library (default: cases/)")
    p.add_argument("--reference", default=None,
                   help="target the others are diffed against (default: apache-kafka when in the run)")
    p.add_argument("--fresh", action="store_true",
                   help="start every target afresh for every case run (default: reuse Apache Kafka when safe)")
    p.add_argument("--proxy", choices=("auto", "needed", "off"), default="auto",
                   help="auto: the proxy fronts every target it can (transcripts for every case); needed: "
                        "only cases with proxy faults; off: never (those cases become not applicable)")
    p.add_argument("--kafka-version", default=None, help="Apache Kafka version for the apache-kafka target")
    p.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                   help=f"rows run at once, each with its own brokers (default {default_jobs()} here: two per "
                        "core; 1: one row after the other)")
    p.add_argument("--no-progress", action="store_true", help="plain output instead of a progress bar")
    p.set_defaults(func=cmd_run)
    return p


#: Cases with this tag (the longer generative workloads, cases/workloads) run only when named by
#: --case or --tag: the library run without either leaves them out.
LONG_TAG = "long"


def interrupt(signum, frame) -> None:
    """SIGTERM handled as Ctrl-C: the run stops its targets and drivers (runner.run)."""
    raise KeyboardInterrupt(f"signal {signum}")


def invalid_targets_or_clients(targets: list[str], clients: list[str]) -> str | None:
    """Why these targets (NAME or NAME@VERSION) and clients cannot run here; None when they can."""
    for t in targets:
        try:
            target_class(t)
        except KeyError as exc:
            return exc.args[0]
    unknown = [c for c in clients if c not in CLIENTS]
    if unknown:
        return f"unknown client(s) {unknown}; known: {sorted(CLIENTS)}"
    for c in clients:
        ok, why = CLIENTS[c].availability()
        if not ok:
            return f"client {c} is not available: {why}"
    return None


def cmd_run(args) -> int:
    targets = args.targets or ["embedded"]
    clients = args.clients or default_clients()
    invalid = invalid_targets_or_clients(targets, clients)
    if invalid:
        print(invalid, file=sys.stderr)
        return 2
    try:
        cases = load_cases(args.cases or (), args.cases_dir)
    except CaseError as exc:
        print(f"invalid case: {exc}", file=sys.stderr)
        return 2
    if args.tags:
        cases = [c for c in cases if set(c.tags) & set(args.tags)]
    elif not args.cases:
        cases = [c for c in cases if LONG_TAG not in c.tags]   # the library run (docs/workload.md)
    if not cases:
        print("no case matches", file=sys.stderr)
        return 2
    options = {}
    if args.kafka_version:
        options["apache-kafka"] = {"version": args.kafka_version}
    if args.jobs is not None and args.jobs < 1:
        print("--jobs: at least 1", file=sys.stderr)
        return 2
    jobs = args.jobs or default_jobs()
    opts = RunOptions(targets=targets, clients=clients, cases=cases, results_dir=args.results,
                      reference=args.reference, fresh=args.fresh, proxy=args.proxy, target_options=options,
                      jobs=jobs)
    total = len(targets) * len(cases) * len(clients)
    signal.signal(signal.SIGTERM, interrupt)   # stopped like Ctrl-C: the run's targets are stopped
    with progress_callbacks(total, min(jobs, total), plain=args.no_progress) as (on_row, on_start):
        rows = run(opts, on_row=on_row, on_start=on_start)
    print_summary(rows, args.results)
    bad = [r for r in rows if r.verdict.bad]
    return 1 if bad else 0
