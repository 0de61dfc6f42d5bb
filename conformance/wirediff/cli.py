"""`kconform diff`: wire-level comparison of one target with a reference, from the command line.

    kconform diff --target embedded [--reference apache-kafka] --results DIR
                  [--api NAME ...] [--versions all|max|ends] [--valid-only] [--jobs N]

Exit status 0 when every difference found is explained (known.py, docs/wirediff.md), 1 when
one is not (or a probe could not be built), 2 when the options are invalid.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from broker_impl.codec import API

from ..results import ResultsFile, Verdict
from ..targets import target_class
from .run import DiffOptions, DiffResult, run_diff


def add_diff_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("diff", help="compare a target's responses with a reference's, field by field",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", required=True, metavar="NAME", help="the target under test")
    p.add_argument("--reference", default="apache-kafka", metavar="NAME",
                   help="the target it is compared with (default apache-kafka)")
    p.add_argument("--results", required=True, type=Path, metavar="DIR",
                   help="directory for results.jsonl (one row per probe and target) and coverage.json")
    p.add_argument("--api", action="append", dest="apis", metavar="NAME",
                   help="only this API (Kafka's name, e.g. Produce; repeatable; default every API both advertise)")
    p.add_argument("--versions", choices=("all", "max", "ends"), default="all",
                   help="every version both advertise (default), the highest only, or the lowest and highest")
    p.add_argument("--valid-only", action="store_true",
                   help="only the request a client sends, no boundary variants")
    p.add_argument("--jobs", "-j", type=int, default=4, metavar="N", help="probes at once on each target (default 4)")
    p.set_defaults(func=cmd_diff)
    return p


def cmd_diff(args) -> int:
    for t in (args.target, args.reference):
        try:
            target_class(t)
        except KeyError as exc:
            print(exc.args[0], file=sys.stderr)
            return 2
    unknown = [a for a in args.apis or () if a not in API]
    if unknown:
        print(f"unknown API(s) {unknown}; known: {', '.join(sorted(API))}", file=sys.stderr)
        return 2
    if args.jobs < 1:
        print("--jobs: at least 1", file=sys.stderr)
        return 2
    opts = DiffOptions(target=args.target, reference=args.reference, results_dir=args.results, apis=args.apis,
                       versions=args.versions, variants=not args.valid_only, jobs=args.jobs)
    result = run_diff(opts, log=lambda s: print(s, file=sys.stderr, flush=True))
    print(summary(result, opts))
    return 1 if result.unexplained or result.errors else 0


def summary(result: DiffResult, opts: DiffOptions) -> str:
    """The coverage table and every unexplained difference (at most 5 per probe)."""
    lines = [f"{'key':>3}  {'API':<28} {opts.reference:<14} {opts.target:<14} {'compared':<10} probes  differ",
             "-" * 92]
    for c in result.coverage:
        span = (f"v{c['compared'][0]}-{c['compared'][-1]}" if len(c["compared"]) > 1 else
                f"v{c['compared'][0]}" if c["compared"] else "-")
        rng = lambda r: f"{r[0]}-{r[1]}" if r else "-"  # noqa: E731
        lines.append(f"{c['api_key']:>3}  {c['api']:<28} {rng(c['reference']):<14} {rng(c['target']):<14} "
                     f"{span:<10} {c.get('probes', 0):>6}  {c.get('differing', 0):>6}"
                     + (f"  ({c['why_not']})" if c["why_not"] else ""))
    bad = [r for r in result.rows if r.target == opts.target and r.verdict is Verdict.FAIL]
    for r in bad:
        lines.append(f"\n{r.case}:")
        unexplained = [d for d in r.diff if "explained" not in d]
        for d in unexplained[:5]:
            lines.append(f"  {d['path']}: {opts.reference} {d['reference']!r}, {opts.target} {d['actual']!r}")
        if len(unexplained) > 5:
            lines.append(f"  ... {len(unexplained) - 5} more")
    for r in result.errors[:20]:
        lines.append(f"\n{r.case}: error: {r.reason}")
    lines.append(f"\n{sum(1 for r in result.rows if r.target == opts.target)} probes, "
                 f"{result.unexplained} with unexplained differences, {result.explained} with explained ones only, "
                 f"{len(result.errors)} kconform could not run; results: {ResultsFile(opts.results_dir).path}")
    return "\n".join(lines)
