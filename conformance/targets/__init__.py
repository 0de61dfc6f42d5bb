"""Conformance targets: Kafka-compatible clusters behind one interface (see base.Target).

    from conformance.targets import make_target, Topology, TopicSpec
    with make_target("apache-kafka") as target:
        bootstrap = target.start(Topology(nodes=3, topics=[TopicSpec("t", 3)]), {}, workdir)
        target.kill(target.transaction_coordinator("txn-1"))

The registry maps a target's name to its class; `target_rows()` is what `kconform targets`
prints. Importing this package starts nothing and needs neither Java nor Tansu.
"""
from __future__ import annotations

from .apache_kafka import ApacheKafkaTarget
from .base import (
    NoLiveNode,
    NotApplicable,
    Target,
    TargetStartError,
    TargetUnavailable,
    TopicSpec,
    Topology,
)
from .embedded import EmbeddedTarget
from .external import ExternalTarget
from .tansu import TansuTarget

TARGETS: dict[str, type[Target]] = {
    "embedded": EmbeddedTarget,
    "apache-kafka": ApacheKafkaTarget,
    "tansu": TansuTarget,
    "external": ExternalTarget,
}


def make_target(name: str, **options) -> Target:
    """A new, not yet started target; options go to its constructor (e.g. version="4.1.0")."""
    try:
        cls = TARGETS[name]
    except KeyError:
        raise KeyError(f"unknown target {name!r}; known: {', '.join(TARGETS)}") from None
    return cls(**options)


def target_rows() -> list[tuple[str, bool, str]]:
    """(name, available, reason it is not -- or what it would run) for every target."""
    rows = []
    for name, cls in TARGETS.items():
        try:
            ok, detail = cls.availability()
        except Exception as exc:  # a broken environment must not hide the other targets
            ok, detail = False, f"availability check failed: {exc}"
        rows.append((name, ok, detail))
    return rows


__all__ = [
    "TARGETS",
    "make_target",
    "target_rows",
    "Target",
    "Topology",
    "TopicSpec",
    "NotApplicable",
    "NoLiveNode",
    "TargetUnavailable",
    "TargetStartError",
    "ApacheKafkaTarget",
    "TansuTarget",
    "ExternalTarget",
    "EmbeddedTarget",
]
