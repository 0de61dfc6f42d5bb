"""What bench/leader_epoch_lag.py and bench/controlled_shutdown.py share: a target started with
three nodes and one topic of one partition on three replicas, who leads it (Metadata), rounds that each take a node down
(``one_round(target, n)`` returns the round's figure in seconds, or None), the node restarted
and the cluster left to settle between rounds, and a median and an extreme of the figures.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

from conformance.raw import send_request
from conformance.targets import TARGETS, TopicSpec, Topology

SETTLE_S = 3.0


def partition_leader(address, topic: str) -> tuple[int, int] | None:
    """(leader id, leader epoch) of the topic's partition 0 as the broker at ``address`` names it
    in Metadata; None without an answer."""
    out = send_request(address, "Metadata", 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False},
                       timeout_s=1.0)
    if not out.ok:
        return None
    for t in out.data["response"]["topics"]:
        for p in t["partitions"]:
            return p["leader_id"], p["leader_epoch"]
    return None


def restart_and_settle(target, node: int) -> None:
    target.restart(node)
    target.wait_node_ready(node, timeout=120)
    time.sleep(SETTLE_S)


def main(doc: str, topic: str, one_round: Callable[[object, int], float | None], what: str, extreme: str,
         default_rounds: int) -> int:
    """Parse ``TARGET [--rounds N]``, run the rounds, print ``what``'s median and its ``extreme``
    (``largest`` or ``smallest``) in ms."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target", choices=sorted(TARGETS))
    ap.add_argument("--rounds", type=int, default=default_rounds)
    args = ap.parse_args()
    target = TARGETS[args.target]()
    target.start(Topology(nodes=3, topics=[TopicSpec(topic, 1, 3)]), {}, Path(tempfile.mkdtemp(prefix=f"{topic}-")))
    figures = []
    try:
        for n in range(args.rounds):
            figure = one_round(target, n)
            if figure is not None:
                figures.append(figure)
    finally:
        target.stop()
    if figures:
        pick = max if extreme == "largest" else min
        print(f"{args.target}: {what}: median {statistics.median(figures) * 1000:.0f} ms, {extreme} "
              f"{pick(figures) * 1000:.0f} ms ({len(figures)} rounds)")
    return 0
