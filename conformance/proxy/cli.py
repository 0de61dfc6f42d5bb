"""``python -m conformance.proxy``: the proxy on its own, in front of running brokers.

    python -m conformance.proxy --upstream 1=127.0.0.1:9092 \
        --rule '{"api": "Produce", "direction": "response", "action": "drop"}' --transcript t.jsonl

Prints one line per node, ``proxy NODE HOST:PORT -> UPSTREAM``, flushed, then runs until
SIGINT/SIGTERM. Useful to watch a client's conversation, or to try a rule by hand before
writing it into a case. ``--rules FILE`` reads a YAML or JSON list of rules.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path

from .rules import RuleError
from .server import ProxyServer, parse_address


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = parser or argparse.ArgumentParser(prog="python -m conformance.proxy",
                                          description="Kafka-aware fault-injecting proxy")
    p.add_argument("--upstream", action="append", required=True, metavar="NODE=HOST:PORT",
                   help="a broker node and its real address (repeatable)")
    p.add_argument("--port", action="append", default=[], metavar="NODE=PORT",
                   help="listen on this port for the node (default: ephemeral)")
    p.add_argument("--rule", action="append", default=[], metavar="JSON", help="a rule as JSON (repeatable)")
    p.add_argument("--rules", type=Path, help="a YAML or JSON file holding a list of rules")
    p.add_argument("--transcript", type=Path, help="append transcript lines (JSONL) to this file")
    return p


def _rules(args) -> list[dict]:
    rules = [json.loads(r) for r in args.rule]
    if args.rules:
        import yaml

        loaded = yaml.safe_load(args.rules.read_text()) or []
        if not isinstance(loaded, list):
            raise RuleError(f"{args.rules}: expected a list of rules")
        rules += loaded
    return rules


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        upstreams = {}
        for spec in args.upstream:
            node, _, addr = spec.partition("=")
            upstreams[int(node)] = parse_address(addr)
        ports = {int(k): int(v) for k, _, v in (s.partition("=") for s in args.port)}
        rules = _rules(args)
    except (ValueError, RuleError) as exc:
        print(f"proxy: {exc}", file=sys.stderr)
        return 2
    proxy = ProxyServer(transcript_path=args.transcript)
    try:
        for node_id, addr in upstreams.items():
            proxy.add_node(node_id, addr, port=ports.get(node_id, 0))
        for r in rules:
            proxy.add_rule(r)
    except (ValueError, RuleError, OSError) as exc:
        proxy.stop()
        print(f"proxy: {exc}", file=sys.stderr)
        return 2
    proxy.start_in_thread()
    for node in proxy.nodes.values():
        print(f"proxy {node.node_id} {node.address} -> {node.upstream[0]}:{node.upstream[1]}", flush=True)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    while not done.wait(0.5):
        pass
    proxy.stop()
    return 0


__all__ = ["main", "build_parser"]
