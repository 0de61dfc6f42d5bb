"""`kconform run`: the conformance run from the command line.

    kconform run [--target NAME|FILE ...] [--client NAME ...] [--case GLOB ...] --results DIR
                 [--baseline PATH ...] [--strict] [--update-baseline] [--junit FILE]
                 [--shard I/N --run-id ID [--durations PATH ...]]

Defaults: the embedded target; every client installed here; every case under cases/; the
baselines kconform ships (baselines/: kfake, Tansu, the mock, older Kafka releases). Every row
is judged against its target's baseline: pass, fail (newly fails), expected_fail (fails as the
baseline says), unexpected_pass (newly passes: the entry is stale), not_applicable, error.

Exit status: 0 when no row newly fails, newly passes or errors (expected failures are fine);
with --strict (today's CI contract, no baseline) 0 only when every row passed or was not
applicable; 1 otherwise; 2 when the cases or options are invalid. A run kconform itself could
not finish leaves run.json `status: failed` and, with --junit, a failing sentinel testcase.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback
from pathlib import Path

from .. import baseline as baselines_
from .. import group_protocol, security
from ..clients.registry import CLIENTS, VERSIONED_FORMS, versioned_spec
from ..dsl import CaseError, load_cases
from ..provenance import command_line
from ..targets import resolve_target_names, target_class
from .report import print_summary, progress_callbacks
from .runner import RunOptions, default_clients, default_jobs, mark_failed, new_run_id, run
from .shard import Durations, parse_shard


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
                   help=f"rows run at once, each with its own brokers (default here: {default_jobs(['embedded'])} "
                        f"for a plaintext run on targets without JVM nodes, three per core; else {default_jobs()}, "
                        "two per core; 1: one row after the other)")
    p.add_argument("--security", choices=security.PROTOCOLS, default="plaintext",
                   help="the security protocol of the run: sasl_plaintext starts the target with a SASL "
                        "listener (SCRAM-SHA-512, a user and password made for the run) and every client "
                        "authenticates; sasl_ssl the same over TLS (a CA and a certificate for 127.0.0.1 made "
                        "for the run; clients verify it; docs/security.md)")
    p.add_argument("--command-config", type=Path, default=None, metavar="FILE",
                   help="with --target external: the client properties file of the cluster (the one Kafka's "
                        "CLI tools take: security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.*); "
                        "every client and kconform's own connections use it (docs/security.md)")
    p.add_argument("--group-protocol", choices=group_protocol.PROTOCOLS, default=group_protocol.CLASSIC,
                   help="the group.protocol of every consumer the cases create: consumer runs the library "
                        "under KIP-848 consumer groups (rows it cannot run are not applicable with the reason; "
                        "docs/groups.md)")
    p.add_argument("--no-progress", action="store_true", help="plain output instead of a progress bar")
    ci = p.add_argument_group("CI: baselines, JUnit, shards (docs/ci.md)")
    ci.add_argument("--baseline", action="append", dest="baselines", metavar="PATH", type=Path,
                    help="a target's baseline file, or a directory of them (repeatable; default: the ones kconform "
                         "ships, baselines/)")
    ci.add_argument("--no-baseline", action="store_true", help="judge every row without a baseline")
    ci.add_argument("--strict", action="store_true",
                    help="exit 1 on any fail, crash or error, expected or not (the exit before baselines)")
    ci.add_argument("--update-baseline", action="store_true",
                    help="write each target's baseline updated with this run's rows, in place (a target without "
                         "one: into the first --baseline directory, default baselines/)")
    ci.add_argument("--write-baseline", type=Path, metavar="DIR",
                    help="write the updated baselines into DIR/<target>.yaml instead")
    ci.add_argument("--junit", type=Path, metavar="FILE",
                    help="JUnit XML of the run (a failing sentinel until the run finishes)")
    ci.add_argument("--shard", metavar="I/N", help="run the I-th of N parts of the plan (balanced by durations)")
    ci.add_argument("--durations", action="append", type=Path, metavar="PATH",
                    help="what balances the shards: a durations file or earlier results directories (repeatable; "
                         "default: cases/durations.json)")
    ci.add_argument("--run-id", metavar="ID",
                    help="the run's id (default: new; shards of one run share it: default $KCONFORM_RUN_ID, or "
                         "GitHub Actions' run id and attempt)")
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
    for c in clients:
        try:
            versioned_spec(c)
        except ValueError as exc:   # a known client at something that is no release
            return str(exc)
    unknown = [c for c in clients if c not in CLIENTS]
    if unknown:
        return f"unknown client(s) {unknown}; known: {sorted(CLIENTS)} and {', '.join(VERSIONED_FORMS)}"
    for c in clients:
        ok, why = CLIENTS[c].availability()
        if not ok:
            return f"client {c} is not available: {why}"
    return None


def shared_run_id(args) -> str | None:
    """The run id shards of one run share: --run-id, $KCONFORM_RUN_ID, or GitHub Actions' run."""
    if args.run_id:
        return args.run_id
    if os.environ.get("KCONFORM_RUN_ID"):
        return os.environ["KCONFORM_RUN_ID"]
    if os.environ.get("GITHUB_RUN_ID"):
        return f"gh-{os.environ['GITHUB_RUN_ID']}-{os.environ.get('GITHUB_RUN_ATTEMPT', '1')}"
    return None


def cmd_run(args) -> int:
    """The run; whatever stops kconform itself on the way leaves run.json `failed` and the
    --junit sentinel failing (a broken harness never looks like a clean baseline)."""
    if args.junit:
        from reports.junit import write_sentinel

        write_sentinel(args.junit, "kconform run did not finish: it was started and has not (yet) written its "
                                   "results", command_line(sys.argv))
    try:
        rc = _cmd_run(args)
        if rc == 2 and args.junit:
            from reports.junit import write_sentinel

            write_sentinel(args.junit, "kconform run refused its options or cases (exit 2): nothing ran",
                           command_line(sys.argv))
        return rc
    except BaseException as exc:
        what = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"{type(exc).__name__}: {exc}"
        if (args.results / "run.json").exists() or args.results.exists():
            mark_failed(args.results, what)
        if args.junit:
            from reports.junit import write_sentinel

            write_sentinel(args.junit, f"kconform run failed: {what}", traceback.format_exc())
        raise


def _cmd_run(args) -> int:
    try:
        targets = resolve_target_names(args.targets or ["embedded"])
    except (KeyError, ValueError) as exc:
        print(exc.args[0] if exc.args else exc, file=sys.stderr)
        return 2
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
    try:
        baselines = {} if args.no_baseline else baselines_.load(args.baselines or [baselines_.BASELINES_ROOT])
    except baselines_.BaselineError as exc:
        print(f"invalid baseline: {exc}", file=sys.stderr)
        return 2
    shard = durations = None
    run_id = args.run_id or ""
    if args.shard:
        try:
            shard = parse_shard(args.shard)
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 2
        run_id = shared_run_id(args) or ""
        if not run_id:
            print("--shard: the shards of one run must share its id: pass --run-id ID (or set KCONFORM_RUN_ID)",
                  file=sys.stderr)
            return 2
        try:
            durations = Durations.load(args.durations) if args.durations else None
        except (OSError, ValueError) as exc:
            print(f"--durations: {exc}", file=sys.stderr)
            return 2
    if args.command_config is not None:
        if args.security != "plaintext":
            print("--command-config and --security: the file says the cluster's security protocol; give one",
                  file=sys.stderr)
            return 2
        others = [t for t in targets if t != "external"]
        if others:
            print(f"--command-config: the settings of a cluster someone else runs (--target external only), "
                  f"not of {', '.join(others)}", file=sys.stderr)
            return 2
        try:
            run_security = security.Security.from_properties(args.command_config)
            if args.proxy != "off":
                run_security = run_security.behind_proxy()
        except ValueError as exc:
            print(f"--command-config: {exc}", file=sys.stderr)
            return 2
    else:
        run_security = security.Security.generate(args.security)
    jobs = args.jobs or default_jobs(targets, run_security)
    opts = RunOptions(targets=targets, clients=clients, cases=cases, results_dir=args.results,
                      reference=args.reference, fresh=args.fresh, proxy=args.proxy, target_options=options,
                      jobs=jobs, baselines=baselines, shard=shard, durations=durations,
                      run_id=run_id or new_run_id(), command=command_line(sys.argv),
                      security=run_security, group_protocol=args.group_protocol)
    total = len(targets) * len(cases) * len(clients)
    signal.signal(signal.SIGTERM, interrupt)   # stopped like Ctrl-C: the run's targets are stopped
    with progress_callbacks(total, min(jobs, total), plain=args.no_progress) as (on_row, on_start):
        rows = run(opts, on_row=on_row, on_start=on_start)
    print_summary(rows, args.results, baselines)
    for line in baselines_.version_warnings(rows, baselines):
        print(f"note: {line}", file=sys.stderr)
    if args.update_baseline or args.write_baseline:
        for path in write_baselines(rows, baselines, args):
            print(f"baseline written: {path}", file=sys.stderr)
    if args.junit:
        from reports.junit import write_junit

        print(f"junit: {write_junit([args.results], args.junit)}", file=sys.stderr)
    bad = [r for r in rows if r.verdict.bad] if args.strict else [r for r in rows if r.status.bad]
    return 1 if bad else 0


def write_baselines(rows, baselines: dict, args) -> list[Path]:
    """--write-baseline DIR: every target's updated baseline there; --update-baseline: each in
    the file it came from, a new one in the first baseline directory of the run."""
    if args.write_baseline:
        return baselines_.write_updated(rows, baselines, args.write_baseline)
    dirs = [p for p in (args.baselines or [baselines_.BASELINES_ROOT]) if p.is_dir() or not p.suffix]
    default_dir = dirs[0] if dirs else baselines_.BASELINES_ROOT
    out = []
    for target in dict.fromkeys(r.target for r in rows):
        b = baselines_.update(baselines.get(target), target, rows)
        out.append(b.write(b.path or default_dir / baselines_.file_name(target)))
    return out
