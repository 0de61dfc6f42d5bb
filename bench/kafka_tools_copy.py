"""Kafka's transactions_test.py cells (conformance/apps/transactions.py) on several targets, side
by side: durations, duplicates and losses, bounces that landed while the copiers worked, and the
error codes per API that crossed the wire -- the rows of an ordinary `kconform run`.

    PYTHONPATH=. python bench/kafka_tools_copy.py --target embedded --target apache-kafka --nodes 3 \
        --bounce-target brokers --failure-mode hard_bounce --messages 100000 --results /tmp/k3

Each (target) is one row of RESULTS/results.jsonl; the cell is written to RESULTS/cell.yaml, so
`kconform run --case RESULTS/cell.yaml` runs it again. The library's cells are cases/apps.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conformance.dsl.model import APPLICATION_CLIENT  # noqa: E402
from conformance.dsl import load_case  # noqa: E402
from conformance.dsl.model import BOUNCE_TARGETS, FAILURE_MODES  # noqa: E402
from conformance.runner.runner import RunOptions, run  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", action="append", default=[])
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--bounce-target", choices=BOUNCE_TARGETS, default="brokers")
    ap.add_argument("--failure-mode", choices=FAILURE_MODES, default="hard_bounce")
    ap.add_argument("--no-group-metadata", action="store_true")
    ap.add_argument("--check-order", action="store_true")
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--down-s", type=float, default=None, help="how long a killed broker stays down")
    ap.add_argument("--results", type=Path, default=Path("/tmp/kafka-tools-copy"))
    args = ap.parse_args()

    app = {"kind": "transactions_test", "bounce_target": args.bounce_target, "failure_mode": args.failure_mode,
           "use_group_metadata": not args.no_group_metadata, "check_order": args.check_order,
           "messages": args.messages}
    if args.down_s is not None:
        app["down_s"] = args.down_s
    args.results.mkdir(parents=True, exist_ok=True)
    cell = args.results / "cell.yaml"
    cell.write_text(yaml.safe_dump({"title": "transactions_test cell (bench/kafka_tools_copy.py)",
                                    "tags": ["apps"], "topology": {"nodes": args.nodes}, "application": app}))
    rows = run(RunOptions(targets=args.target or ["embedded"], clients=[APPLICATION_CLIENT],
                          cases=[load_case(cell, args.results)], results_dir=args.results, jobs=1))
    for r in rows:
        a = r.application or {}
        print(f"{r.target:14} {r.verdict.value:6} {r.duration_s:7.1f} s  seed {a.get('seed_s')} s  copy "
              f"{a.get('copy_s')} s  dup/loss {(a.get('output') or {}).get('duplicates')}/"
              f"{(a.get('output') or {}).get('losses')}  bounces landed {a.get('bounces_landed')}/"
              f"{a.get('bounces_done')}  {r.reason or ''}")
        print("    wire:", json.dumps(a.get("wire_errors")))
        print("    broker-to-broker:", json.dumps(a.get("broker_wire_errors")))
        print("    client logs:", json.dumps(a.get("client_log")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
