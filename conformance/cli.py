"""``kconform``: the project's command line.

Subcommands are thin: each parses its flags and calls the module that does
the work, so every feature is usable from Python too.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
from pathlib import Path

from broker_impl.cli import build_parser as broker_parser
from broker_impl.cli import run_from_args
from broker_impl.config import ConfigError, parse_sets
from reports.cli import report, transcript

from .clients.registry import VERSIONED, availability
from .provenance import portable_path
from .dsl import load_cases
from .fuzz.cli import add_fuzz_parser
from .runner.cli import add_run_parser
from .runner.row import known_difference
from .wirediff.cli import add_diff_parser
from .workload.cli import add_workload_parser
from .targets import target_rows
from .targets.embedded import serve_cluster
from .vocabulary import CONTROLLER_PLACEMENTS


def _cmd_broker(args) -> int:
    return run_from_args(args)


def _cmd_cluster(args) -> int:
    try:
        configs = parse_sets(args.sets)
    except ConfigError as exc:
        print(f"kconform cluster: {exc}", file=sys.stderr)
        return 2
    serve_cluster(args.nodes, args.controller, configs, args.data_dir,
                  lambda bootstrap: print(f"bootstrap {bootstrap}", flush=True))
    return 0


def _cmd_targets(args) -> int:
    rows = target_rows()
    width = max(len(r[0]) for r in rows)
    for name, ok, detail in rows:
        print(f"{name:<{width}}  {'yes' if ok else 'no ':<3}  {detail}")
    return 0


def _cmd_clients(args) -> int:
    rows = availability()
    for prefix, form in VERSIONED.items():
        ok, why = form.available()
        ready = form.ready()
        rows[f"{prefix}@VERSION"] = (ok, f"{form.help}; ready here: {', '.join(ready) or 'none'}" if ok else why)
    width = max(len(name) for name in rows)
    for name, (ok, detail) in rows.items():
        print(f"{name:<{width}}  {'yes' if ok else 'no ':<3}  {detail}")
    return 0


def _cmd_report(args) -> int:
    served, single = report(args.results, args.out, analytics_dir=args.analytics, previous=args.previous,
                            build_name=args.build_name, report_url=args.report_url)
    print(f"report: {single}")
    print(f"served report directory: {served}")
    return 0


def _cmd_junit(args) -> int:
    from reports.junit import write_junit

    print(f"wrote {write_junit(args.results, args.out)}")
    return 0


def _cmd_baseline(args) -> int:
    from .baseline import BaselineError, load, write_updated
    from .results import ResultsFile

    try:
        existing = load(args.baseline or [])
    except BaselineError as exc:
        print(f"kconform baseline: {exc}", file=sys.stderr)
        return 2
    rows = [r for d in args.results for r in ResultsFile(d).read() if not args.targets or r.target in args.targets]
    for path in write_updated(rows, existing, args.out, args.link):
        print(f"wrote {path}")
    return 0


def _cmd_durations(args) -> int:
    from .runner.shard import Durations

    d = Durations.load(args.results)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(d.to_json(), encoding="utf-8")
    print(f"wrote {out}: {len(d.seconds)} rows")
    return 0


def known_difference_now(case_id: str, target: str, client: str) -> str | None:
    """What a row of this case would record as its documented difference today (`kconform
    matrix`, for rows from runs made before the runner recorded it)."""
    case = _case_library().get(case_id)
    try:
        return None if case is None else known_difference(case, target, client)
    except KeyError:  # a target this kconform no longer has
        return None


@functools.cache
def _case_library() -> dict:
    return {c.id: c for c in load_cases()}


def regression_now(case_id: str) -> dict | None:
    """The case library's `regression:` section of a case, as a dict (`kconform matrix --history`)."""
    case = _case_library().get(case_id)
    if case is None or case.regression is None:
        return None
    return dataclasses.asdict(case.regression)


def _cmd_matrix(args) -> int:
    if args.history:
        from reports.history import write_page as write_history

        out = args.out or str(Path(args.results[-1]) / "history.md")
        command = ("kconform matrix --history " + " ".join(f"--results {portable_path(d)}" for d in args.results)
                   + f" --out {portable_path(out)}")
        print(f"wrote {write_history(args.results, out, regression_now, command)}")
        return 0
    from reports.matrix_page import write_page

    out = args.out or str(Path(args.results[-1]) / "compatibility.md")
    # As typed, but no machine path: the page is committed and read elsewhere (provenance.py).
    command = "kconform matrix " + " ".join(f"--results {portable_path(d)}" for d in args.results) + \
        f" --out {portable_path(out)}"
    for path in write_page(args.results, out, command, known_difference_now):
        print(f"wrote {path}")
    return 0


def _cmd_transcript(args) -> int:
    return transcript(args.file)


def _cmd_analyze(args) -> int:
    try:  # PySpark is an optional extra: without it, this subcommand alone says what to install
        from reports.analytics import analyze
    except ImportError as exc:
        print(f"kconform analyze needs the analytics extra (pip install 'kconform[analytics]'): {exc}",
              file=sys.stderr)
        return 2
    print(analyze(args.results, args.out, master=args.master))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kconform", description="Kafka wire-protocol conformance harness.")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("broker", help="run the embedded trio Kafka broker")
    broker_parser(b)
    b.set_defaults(func=_cmd_broker)

    c = sub.add_parser("cluster", help="run an embedded cluster: N brokers and a controller (docs/cluster.md)")
    c.add_argument("--nodes", type=int, default=3, help="brokers (1-5)")
    c.add_argument("--controller", choices=CONTROLLER_PLACEMENTS, default="combined",
                   help="combined: the quorum lives on the nodes (a majority must live); dedicated: its own process")
    c.add_argument("--data-dir", required=True, type=Path, help="one sub-directory per node")
    c.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="a broker config for every node, with Kafka's name (repeatable)")
    c.set_defaults(func=_cmd_cluster)

    t = sub.add_parser("targets", help="list the targets and whether each can start here")
    t.set_defaults(func=_cmd_targets)

    c = sub.add_parser("clients", help="list the client drivers and whether each can run here (version or why not)")
    c.set_defaults(func=_cmd_clients)

    r = sub.add_parser("report", help="Allure HTML report of a run (served directory + single file)")
    r.add_argument("--results", required=True, action="append", metavar="DIR",
                   help="the run's results directory (repeatable: the shards of one run make one report)")
    r.add_argument("--out", required=True, help="where to write the report")
    r.add_argument("--analytics", default=None, help="output directory of `kconform analyze` to link in")
    r.add_argument("--previous", default=None, metavar="DIR",
                   help="the previous report (its --out, or its html/): its history gives the Trend and Retries "
                        "(default: the report already in --out)")
    r.add_argument("--build-name", default=None, help="the build's name in the Executors panel and the Trend")
    r.add_argument("--report-url", default=None, help="where this report will be served (linked from the Trend)")
    r.set_defaults(func=_cmd_report)

    j = sub.add_parser("junit", help="JUnit XML of runs (the shards of one run merge; missing shards fail)")
    j.add_argument("--results", required=True, action="append", metavar="DIR", help="a results directory (repeatable)")
    j.add_argument("--out", required=True, metavar="FILE")
    j.set_defaults(func=_cmd_junit)

    bl = sub.add_parser("baseline", help="write targets' baselines from runs (the rows known to diverge)")
    bl.add_argument("--results", required=True, action="append", metavar="DIR", help="a results directory (repeatable)")
    bl.add_argument("--baseline", action="append", metavar="PATH", default=None,
                    help="the baselines to update (files or directories; default: none, i.e. new ones)")
    bl.add_argument("--out", required=True, metavar="DIR", help="where to write <target>.yaml")
    bl.add_argument("--target", action="append", dest="targets", metavar="NAME", help="only these targets")
    bl.add_argument("--link", default="", help="the new baselines' default link (an entry without its own)")
    bl.set_defaults(func=_cmd_baseline)

    du = sub.add_parser("durations", help="measured seconds per row from runs: what --shard balances by")
    du.add_argument("--results", required=True, action="append", metavar="DIR", help="a results directory (repeatable)")
    du.add_argument("--out", required=True, metavar="FILE")
    du.set_defaults(func=_cmd_durations)

    mx = sub.add_parser("matrix", help="the compatibility page: every case x target x client, and each target's "
                                       "divergences from Apache Kafka (Markdown + HTML)")
    mx.add_argument("--results", required=True, action="append", metavar="DIR",
                    help="a run's results directory (repeatable: later runs win per case x target x client)")
    mx.add_argument("--out", default=None, metavar="FILE",
                    help="the Markdown page to write (default DIR/compatibility.md); the HTML goes beside it")
    mx.add_argument("--history", action="store_true",
                    help="the history page instead: published bugs x Kafka releases (first fixed release per "
                         "bug), clients x releases, and the cases whose verdict changed between consecutive "
                         "releases (default DIR/history.md)")
    mx.set_defaults(func=_cmd_matrix)

    tr = sub.add_parser("transcript", help="print the Kafka frames of a pcap or transcript .jsonl")
    tr.add_argument("file")
    tr.set_defaults(func=_cmd_transcript)

    an = sub.add_parser("analyze", help="Spark analytics across many runs")
    an.add_argument("--results", required=True, action="append", metavar="DIR",
                    help="root directory holding one directory per run (repeatable: e.g. the shards' results)")
    an.add_argument("--out", required=True)
    an.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    an.set_defaults(func=_cmd_analyze)

    add_run_parser(sub)
    add_diff_parser(sub)
    add_fuzz_parser(sub)
    add_workload_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
