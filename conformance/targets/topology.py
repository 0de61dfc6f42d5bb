"""What a target is asked to run: how many nodes, where the quorum lives, which topics.

Why a module of its own: the targets, the topic-creating admin helper and the runner all speak
of topologies; kept apart from `base.Target`, none of them has to import the others for it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..vocabulary import CONTROLLER_PLACEMENTS


@dataclass(frozen=True)
class TopicSpec:
    """A topic the case needs. replication_factor None means min(nodes, 3)."""

    name: str
    partitions: int = 1
    replication_factor: int | None = None
    configs: dict[str, str] = field(default_factory=dict)


@dataclass
class Topology:
    """Nodes, quorum placement (vocabulary.CONTROLLER_PLACEMENTS) and the topics to create."""

    nodes: int = 1
    topics: list[TopicSpec] = field(default_factory=list)
    controller: str = "combined"

    def __post_init__(self) -> None:
        if self.controller not in CONTROLLER_PLACEMENTS:
            raise ValueError(f"controller must be one of {CONTROLLER_PLACEMENTS}, not {self.controller!r}")


def cluster_broker_defaults(nodes: int) -> dict[str, str]:
    """Broker configs (Kafka's names) a target gives a cluster of ``nodes`` before the case's
    own: internal topics replicated min(nodes, 3) times with few partitions, min ISR 2 for the
    transaction log from 3 nodes on, a 3 s broker session (a dead broker is fenced, and its
    leaderships move, within seconds) and no initial rebalance delay -- so failover cases run in
    seconds on every target."""
    rf = str(min(nodes, 3))
    return {
        "num.partitions": "1",
        "default.replication.factor": rf,
        "offsets.topic.replication.factor": rf,
        "offsets.topic.num.partitions": "6",
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": "2" if nodes >= 3 else "1",
        "transaction.state.log.num.partitions": "6",
        "group.initial.rebalance.delay.ms": "0",
        "broker.session.timeout.ms": "3000",
        "broker.heartbeat.interval.ms": "500",
    }
