"""``kconform``: the project's command line.

Subcommands are thin: each parses its flags and calls the module that does
the work, so every feature is usable from Python too.
"""

from __future__ import annotations

import argparse
import sys


def _cmd_broker(args) -> int:
    from broker_impl.cli import run_from_args

    return run_from_args(args)


def _cmd_targets(args) -> int:
    from .targets import target_rows

    rows = target_rows()
    width = max(len(r[0]) for r in rows)
    for name, ok, detail in rows:
        print(f"{name:<{width}}  {'yes' if ok else 'no ':<3}  {detail}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kconform", description="Kafka wire-protocol conformance harness.")
    sub = p.add_subparsers(dest="command", required=True)

    from broker_impl.cli import build_parser as broker_parser

    b = sub.add_parser("broker", help="run the embedded trio Kafka broker")
    broker_parser(b)
    b.set_defaults(func=_cmd_broker)

    t = sub.add_parser("targets", help="list the targets and whether each can start here")
    t.set_defaults(func=_cmd_targets)

    try:
        from .runner.cli import add_run_parser
    except ImportError:
        pass
    else:
        add_run_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
