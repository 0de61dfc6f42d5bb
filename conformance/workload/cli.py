"""`kconform workload`: run a workload spec over seeds, targets and clients; compare; shrink.

    kconform workload [SPEC] [--seed N | --seeds N [--first-seed S]] [--target T ...]
                      [--client C ... | --mix C,C,...] [--time-limit S] [--op-limit N]
                      [--set KNOB=VALUE ...] [--shrink [--save FILE]] --results DIR

SPEC is a workload case file or a name under cases/ (default workloads/mixed). Every
(seed, target, client) is a row of the ordinary runner (results.jsonl, artifacts with the
history, the timeline and the anomalies); `comparison.md` / `comparison.json` put the same
seeds side by side per target. With --shrink, the first failing row is shrunk on its target
and client and saved as a case file that replays it. Exit status: 0 when no row failed, 1
when one did (an anomaly, a crash, an error), 2 for invalid input.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

import yaml

from ..clients.registry import CLIENTS
from ..dsl import CaseError
from ..results import ResultsFile, Row
from ..runner.cli import interrupt, invalid_targets_or_clients
from ..runner.report import print_summary, progress_callbacks
from ..runner.runner import RunOptions, default_jobs, reference_target, run
from .compare import compare_rows, render_comparison
from .seeds import seeded
from .shrink import save, shrink

DEFAULT_SPEC = "workloads/mixed"


def add_workload_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("workload", help="generative exactly-once workloads: seeds x targets x clients, "
                                               "a history checker, comparison and shrinking",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("spec", nargs="?", default=DEFAULT_SPEC,
                   help=f"workload case file or name under cases/ (default {DEFAULT_SPEC})")
    p.add_argument("--seed", type=int, action="append", dest="seed_list", metavar="N",
                   help="run this seed (repeatable)")
    p.add_argument("--seeds", type=int, default=None, metavar="N", help="run N seeds from --first-seed")
    p.add_argument("--first-seed", type=int, default=1, metavar="S")
    p.add_argument("--target", action="append", dest="targets", metavar="NAME", help="repeatable (default embedded)")
    p.add_argument("--client", action="append", dest="clients", metavar="NAME",
                   help="one row per client, every worker on it (repeatable; default confluent)")
    p.add_argument("--mix", default=None, metavar="C1,C2,...",
                   help="one row per seed whose workers are spread over these clients ('all': every installed one)")
    p.add_argument("--time-limit", type=float, default=None, metavar="S", help="override workload.time_limit_s")
    p.add_argument("--op-limit", type=int, default=None, metavar="N", help="override workload.op_limit")
    p.add_argument("--set", action="append", dest="sets", default=[], metavar="KNOB=VALUE",
                   help="override a generator knob, VALUE in YAML (--set faults=[kill,proxy])")
    p.add_argument("--results", required=True, type=Path, metavar="DIR")
    p.add_argument("--jobs", "-j", type=int, default=None, metavar="N", help=f"rows at once (default {default_jobs()})")
    p.add_argument("--shrink", action="store_true", help="shrink the first failing row and save it as a case")
    p.add_argument("--save", type=Path, default=None, metavar="FILE", help="where the shrunk case goes "
                                                                           "(default DIR/shrunk/<case>.yaml)")
    p.add_argument("--shrink-trials", type=int, default=24, metavar="N")
    p.add_argument("--compare-with", action="append", dest="compare_with", default=[], type=Path, metavar="DIR",
                   help="also put the workload rows of an earlier run's results DIR in the comparison "
                        "(repeatable): the reference measured once, the broker under test run again")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_workload)
    return p


def cmd_workload(args) -> int:
    targets = args.targets or ["embedded"]
    mix = None
    if args.mix:
        mix = [c for c in CLIENTS if CLIENTS[c].availability()[0]] if args.mix == "all" else args.mix.split(",")
    clients = args.clients or ([mix[0]] if mix else ["confluent"])
    invalid = invalid_targets_or_clients(targets, (mix or []) + clients)
    if invalid:
        print(invalid, file=sys.stderr)
        return 2
    knobs = {}
    for s in args.sets:
        key, sep, value = s.partition("=")
        if not sep:
            print(f"--set {s!r}: expected KNOB=VALUE", file=sys.stderr)
            return 2
        knobs[key.strip()] = yaml.safe_load(value)
    earlier: list[Row] = []
    for d in args.compare_with:
        if not ResultsFile(d).exists():
            print(f"--compare-with {d}: no results.jsonl there", file=sys.stderr)
            return 2
        earlier += [r for r in ResultsFile(d).read() if r.workload is not None]
    seeds = args.seed_list or list(range(args.first_seed, args.first_seed + (args.seeds or 1)))
    try:
        cases = seeded(args.spec, seeds, time_limit_s=args.time_limit, op_limit=args.op_limit, clients=mix,
                       generate=knobs)
    except CaseError as exc:
        print(f"invalid workload: {exc}", file=sys.stderr)
        return 2
    jobs = args.jobs or default_jobs()
    reference = reference_target(targets)
    opts = RunOptions(targets=targets, clients=clients, cases=cases, results_dir=args.results, reference=reference,
                      jobs=jobs)
    signal.signal(signal.SIGTERM, interrupt)
    total = len(targets) * len(cases) * len(clients)
    with progress_callbacks(total, min(jobs, total), plain=args.no_progress) as (on_row, on_start):
        rows = run(opts, on_row=on_row, on_start=on_start)
    print_summary(rows, args.results)
    compared = list(dict.fromkeys(targets + [r.target for r in earlier]))
    cmp = compare_rows(rows + earlier, reference_target(compared))
    (args.results / "comparison.json").write_text(json.dumps(cmp, indent=1, default=str))
    text = render_comparison(cmp)
    (args.results / "comparison.md").write_text(text)
    print(text)
    failed = [r for r in rows if r.verdict.bad]
    if args.shrink and failed:
        r = next((x for x in failed if (x.workload or {}).get("anomalies")), failed[0])
        case = next(c for c in cases if c.id == r.case)
        kinds = set((r.workload or {}).get("anomalies") or {})
        if not kinds:
            print(f"{r.case} [{r.target}-{r.client}] failed without an anomaly ({r.reason}): "
                  "nothing to shrink towards", file=sys.stderr)
        else:
            first = _first_seen(args.results / r.artifacts.get("anomalies", ""))
            result = shrink(case, r.target, r.client, kinds, args.results / "shrink",
                            first_seen_s=first, max_trials=args.shrink_trials,
                            log=lambda s: print(s, file=sys.stderr))
            path = args.save or args.results / "shrunk" / f"{case.id.replace('/', '__').replace('@', '-')}.yaml"
            save(result, case, r.target, r.client, path)
            print(f"shrunk case: {path}  (replay: kconform run --case {path} --target {r.target} "
                  f"--client {r.client} --results DIR)")
    return 1 if failed else 0


def _first_seen(path: Path) -> float | None:
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    times = [a["time"] for a in found if a.get("time") is not None]
    return min(times) if times else None
