"""Command line of the embedded broker.

``kconform broker --listen 127.0.0.1:9092 --data-dir DIR [--set key=value ...]``
with Kafka's config names. Once it accepts connections it prints exactly one
line, ``listening HOST:PORT``, on stdout (so ``--listen 127.0.0.1:0`` tells
the caller the port); logs go to stderr; SIGTERM shuts it down cleanly.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import trio

from .config import BrokerConfig, ConfigError, parse_sets
from .server.broker import run
from .server.listeners import parse_listeners


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = parser or argparse.ArgumentParser(prog="kconform broker", description="The embedded trio Kafka broker.")
    p.add_argument("--listen", default="127.0.0.1:9092", help="HOST:PORT to bind (port 0 = any free port)")
    p.add_argument("--data-dir", required=True, type=Path, help="where logs and metadata are kept")
    p.add_argument("--node-id", type=int, default=None, help="node.id (default 1)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="a broker config, with Kafka's name (repeatable)")
    p.add_argument("--log-level", default="INFO")
    return p


def run_from_args(args: argparse.Namespace) -> int:
    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.INFO), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    host, _, port = args.listen.rpartition(":")
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"kconform broker: refusing to bind {host!r}: only loopback addresses are allowed", file=sys.stderr)
        return 2
    try:
        values = parse_sets(args.sets)
        if args.node_id is not None:
            values["node.id"] = str(args.node_id)
        config = BrokerConfig(values)
        parse_listeners(config, host, int(port))   # listeners and TLS files: refused before starting
    except ConfigError as exc:
        print(f"kconform broker: {exc}", file=sys.stderr)
        return 2

    def announce(h: str, p: int) -> None:
        print(f"listening {h}:{p}", flush=True)

    trio.run(run, config, args.data_dir, host, int(port), announce)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_from_args(build_parser().parse_args(argv))
