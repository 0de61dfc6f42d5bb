"""How long does a new partition leader answer UNKNOWN_LEADER_EPOCH to a client that learnt its
epoch from another broker? (docs/cluster.md, "Why a propagation delay")

    PYTHONPATH=. python bench/leader_epoch_lag.py apache-kafka [--rounds 4]
    PYTHONPATH=. python bench/leader_epoch_lag.py embedded [--rounds 6]

Starts the target with three nodes and a topic of one partition on three replicas; each round
kills the partition's leader (kill -9), then polls every live broker's Metadata (about every
3 ms) and, once one of them names a newer leader epoch, the new leader's OffsetForLeaderEpoch at
that epoch until it answers without an error. Prints per round when each broker first named the
new epoch, the codes the new leader answered meanwhile, and the window from the first broker
naming it to the leader's first clean answer; then the median and the largest window. The node
is restarted and the cluster left to settle between rounds. Not part of `make test`.
"""
from __future__ import annotations

import time

from conformance.raw import send_request
from node_rounds import main, partition_leader, restart_and_settle

TOPIC = "lag"
POLL_S = 0.003
ROUND_LIMIT_S = 30.0


def offset_for_epoch(address, epoch: int):
    out = send_request(address, "OffsetForLeaderEpoch", 4, {"replica_id": -1, "topics": [{"topic": TOPIC, "partitions": [
        {"partition": 0, "current_leader_epoch": epoch, "leader_epoch": epoch}]}]}, timeout_s=1.0)
    if not out.ok:
        return "no answer"
    return out.data["response"]["topics"][0]["partitions"][0]["error_code"]


def one_round(target, n: int) -> float | None:
    addresses = dict(target.live_addresses())
    leader, epoch = partition_leader(next(iter(addresses.values())), TOPIC)
    target.kill(leader)
    t0 = time.monotonic()
    first: dict[int, float] = {}
    new = clean = None
    codes: dict = {}
    while time.monotonic() - t0 < ROUND_LIMIT_S:
        for node, address in addresses.items():
            if node == leader or node in first:
                continue
            seen = partition_leader(address, TOPIC)
            if seen is not None and seen[1] > epoch:
                first[node], new = round(time.monotonic() - t0, 4), seen
        if new is not None:
            code = offset_for_epoch(addresses[new[0]], new[1])
            codes[code] = codes.get(code, 0) + 1
            if code in (0, "NONE") and clean is None:
                clean = time.monotonic() - t0
            if clean is not None and len(first) == len(addresses) - 1:
                break
        time.sleep(POLL_S)
    window = clean - min(first.values()) if clean is not None and first else None
    print(f"round {n}: killed node {leader} (epoch {epoch}); new leader/epoch {new}; first named by {first}; "
          f"the leader's answers {codes}; window {window * 1000 if window is not None else float('nan'):.0f} ms",
          flush=True)
    restart_and_settle(target, leader)
    return window


if __name__ == "__main__":
    raise SystemExit(main(__doc__, TOPIC, one_round, "window from the first broker naming the new epoch to the "
                          "leader's first clean answer", "largest", default_rounds=4))
