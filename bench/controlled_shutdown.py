"""When does a cleanly stopped broker close, against when the others learn it leads nothing?
(docs/cluster.md, "Controlled shutdown")

    PYTHONPATH=. python bench/controlled_shutdown.py apache-kafka [--rounds 3]
    PYTHONPATH=. python bench/controlled_shutdown.py embedded [--rounds 3]

Starts the target with three nodes and a topic of one partition on three replicas; each round
sends SIGTERM to the partition's leader, then polls (about every 5 ms) every live broker's
Metadata for the partition's leader, and the stopping broker's port. Prints per round when each
live broker first named another leader, when the stopping broker stopped answering, and the
margin between the two: positive, every other broker knew before the stopping one went away (a
request routed to it by a broker that had not learnt the move -- a transaction verification, a
replica fetch -- meets a closed connection only when it is negative). Kafka's controller lets a
broker go only once every active broker reported, in a heartbeat, a metadata offset at least
the one that moved its leaderships (BrokerHeartbeatManager's lowest active offset). The node is
restarted and the cluster left to settle between rounds. Not part of `make test`.
"""
from __future__ import annotations

import socket
import threading
import time

from node_rounds import main, partition_leader, restart_and_settle

TOPIC = "stop"
POLL_S = 0.005
ROUND_LIMIT_S = 60.0


def leader_of(address) -> int | None:
    named = partition_leader(address, TOPIC)
    return None if named is None else named[0]


def accepts(address) -> bool:
    try:
        with socket.create_connection(address, timeout=0.5):
            return True
    except OSError:
        return False


def one_round(target, n: int) -> float | None:
    addresses = dict(target.live_addresses())
    leader = leader_of(next(iter(addresses.values())))
    stopper = threading.Thread(target=target.stop_node, args=(leader,), daemon=True)
    t0 = time.monotonic()
    stopper.start()
    learnt: dict[int, float] = {}
    closed = None
    while time.monotonic() - t0 < ROUND_LIMIT_S and (closed is None or len(learnt) < len(addresses) - 1):
        now = time.monotonic() - t0
        for node, address in addresses.items():
            if node == leader:
                if closed is None and not accepts(address):
                    closed = now
            elif node not in learnt and leader_of(address) not in (None, leader):
                learnt[node] = now
        time.sleep(POLL_S)
    stopper.join(timeout=30)
    margin = closed - max(learnt.values()) if closed is not None and learnt else None
    print(f"round {n}: SIGTERM to leader {leader}; the others named another leader at "
          f"{ {k: round(v * 1000) for k, v in sorted(learnt.items())} } ms; it closed at "
          f"{closed * 1000 if closed is not None else float('nan'):.0f} ms; margin "
          f"{margin * 1000 if margin is not None else float('nan'):.0f} ms", flush=True)
    restart_and_settle(target, leader)
    return margin


if __name__ == "__main__":
    raise SystemExit(main(__doc__, TOPIC, one_round, "margin from the last live broker naming another leader to "
                          "the stopping broker's close", "smallest", default_rounds=3))
