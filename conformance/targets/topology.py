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
