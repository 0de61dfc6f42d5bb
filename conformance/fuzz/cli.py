"""`kconform fuzz`: mutated requests at a target, from the command line.

    kconform fuzz --target embedded --frames 100000 --results DIR [--seeds RUN_DIR ...]
                  [--connections 32] [--timeout 1.0] [--health-every 2000] [--seed 0]

Exit status 0 when the target neither crashed nor hung, logged no internal error and served a real
client afterwards; 1 otherwise; 2 when the options are invalid.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import security
from ..targets import target_class
from .run import FuzzOptions, run_fuzz


def add_fuzz_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("fuzz", help="send mutated requests to a target until it breaks or N frames",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", required=True, metavar="NAME", help="the target to fuzz (`kconform targets`)")
    p.add_argument("--frames", type=int, default=100_000, metavar="N", help="frames to send (default 100000)")
    p.add_argument("--results", required=True, type=Path, metavar="DIR",
                   help="directory for fuzz.json, reproducers/ and results.jsonl")
    p.add_argument("--seeds", action="append", type=Path, default=[], metavar="DIR",
                   help="results of a `kconform run` (or transcript files): their client frames seed the "
                        "mutations too (repeatable)")
    p.add_argument("--no-generated", action="store_true",
                   help="no schema-generated seeds: real clients' frames only")
    p.add_argument("--connections", type=int, default=32, metavar="N", help="connections at once (default 32)")
    p.add_argument("--timeout", type=float, default=1.0, metavar="S",
                   help="seconds to wait for an answer before giving a request up (default 1.0)")
    p.add_argument("--health-every", type=int, default=2000, metavar="N",
                   help="frames between health checks (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="the run's seed: the same seed sends the same frames")
    p.add_argument("--advertised-keys-only", action="store_true",
                   help="send no frame whose API key the target does not advertise (to get past a target "
                        "that dies of any unknown key)")
    p.add_argument("--security", choices=security.PROTOCOLS, default="plaintext",
                   help="the target's listener: sasl_plaintext or sasl_ssl start it with a user made for the run; "
                        "the fuzzer's connections authenticate, one in eight fuzzes before authenticating")
    p.add_argument("--max-incidents", type=int, default=10, metavar="N",
                   help="crashes and hangs after which the run stops (default 10)")
    p.set_defaults(func=cmd_fuzz)
    return p


def cmd_fuzz(args) -> int:
    try:
        target_class(args.target)
    except KeyError as exc:
        print(exc.args[0], file=sys.stderr)
        return 2
    if args.frames < 1 or args.connections < 1 or args.health_every < 1 or args.timeout <= 0:
        print("--frames, --connections and --health-every must be at least 1, --timeout above 0", file=sys.stderr)
        return 2
    opts = FuzzOptions(target=args.target, frames=args.frames, results_dir=args.results, seeds=list(args.seeds),
                       connections=args.connections, timeout_s=args.timeout, health_every=args.health_every,
                       seed=args.seed, max_incidents=args.max_incidents, generated=not args.no_generated,
                       advertised_keys_only=args.advertised_keys_only,
                       security=security.Security.generate(args.security))
    report = run_fuzz(opts, log=lambda s: print(s, file=sys.stderr, flush=True))
    print(summary(report))
    return 0 if ok(report) else 1


def ok(report: dict) -> bool:
    return (report["crashes"] == 0 and report["hangs"] == 0 and not report["internal_errors"]
            and report["round_trip"].get("error") is None and report["counts"]["preauth_answered"] == 0
            and report.get("wrong_password_refused") is not False)


def summary(report: dict) -> str:
    c = report["counts"]
    rt = report["round_trip"]
    ie = report["internal_errors"]
    lines = [
        f"{report['target']} {report['target_version']}: {c['sent']} frames in {report['seconds']} s "
        f"({report['frames_per_second']}/s) on {report['connections']} connections",
        f"  answered {c['answered']}, closed by the target {c['closed']}, timed out {c['timed_out']}, "
        f"reset {c['reset']}, unanswered (acks=0) {c['unanswered']}, connect failures {c['connect_failures']}"
        + (f", skipped (unadvertised key) {c['skipped']}" if c["skipped"] else ""),
        *([f"  over {report['security_protocol']}: {c['preauth_sent']} frames sent before authenticating, "
           f"{c['preauth_answered']} answered (must be 0); wrong password "
           f"{'refused' if report['wrong_password_refused'] else 'LET IN'}"]
          if report.get("wrong_password_refused") is not None else []),
        f"  crashes {report['crashes']}, hangs {report['hangs']}, internal errors "
        f"{'not readable' if ie is None else ie}, log +{report['log_bytes'] / 2**20:.2f} MB, "
        f"max RSS {report['max_rss_bytes'] / 2**20:.0f} MiB, {report['topics_at_end']} topics at the end",
        f"  round trip{' (after a restart)' if rt.get('after_restart') else ''}: "
        f"{rt.get('error') or 'ok, %s of %s records read back' % (rt.get('consumed'), rt.get('produced'))}",
    ]
    for x in report["incidents"]:
        lines.append(f"  {x['kind']} after frame {x['after_frames']}: {x['reason']}; reproducer "
                     f"{x.get('reproducer') or '(not isolated; candidates in reproducers/)'}")
    for x in report["internal_error_samples"][:5]:
        lines.append(f"  internal error: {x['log'][:160]}" + (f" (frame {x['frame']}: {x['file']})" if 'frame' in x else ""))
    return "\n".join(lines)
