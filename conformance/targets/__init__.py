"""Conformance targets: Kafka-compatible clusters behind one interface (see base.Target).

    from conformance.targets import make_target, Topology, TopicSpec
    with make_target("apache-kafka") as target:
        bootstrap = target.start(Topology(nodes=3, topics=[TopicSpec("t", 3)]), {}, workdir)
        target.kill(target.transaction_coordinator("txn-1"))

The registry maps a target's name to its class; `target_rows()` is what `kconform targets`
prints. Importing this package starts nothing and needs neither Java nor Tansu.

A target a file defines (filetarget.py: a vendor's broker, without Python) is named on the
command line by its path and in results by the file's `name`: `resolve_target_names` loads it and
registers its class under that name.

A versioned target is named `NAME@VERSION` (`apache-kafka@3.9.1`): the class of NAME, started at
that release, and named so in results -- several releases of Kafka can run side by side in one
run. Plain `apache-kafka` is the default release.
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
from .filetarget import FileTarget, TargetFileError, define, is_target_file
from .kafka_releases import RELEASES
from .kfake import KfakeTarget
from .librdkafka_mock import LibrdkafkaMockTarget
from .tansu import TansuTarget

TARGETS: dict[str, type[Target]] = {
    "embedded": EmbeddedTarget,
    "apache-kafka": ApacheKafkaTarget,
    "tansu": TansuTarget,
    "kfake": KfakeTarget,
    "librdkafka-mock": LibrdkafkaMockTarget,
    "external": ExternalTarget,
}


#: The built-in targets (a target file may not take one of their names).
BUILT_IN = frozenset(TARGETS)


def register_file(path: str) -> str:
    """Load a target file and register its class; returns the target's name. Registering the same
    file again is harmless; another file (or a built-in) of the same name is an error."""
    cls = define(path)
    if cls.name in BUILT_IN:
        raise TargetFileError(f"{path}: name {cls.name!r} is a built-in target's; name yours otherwise "
                              f"(e.g. {cls.name}-file)")
    known = TARGETS.get(cls.name)
    if known is not None and getattr(known, "spec_path", None) not in (None, str(path)):
        raise TargetFileError(f"{path}: target {cls.name!r} is already defined by {known.spec_path}")
    TARGETS[cls.name] = cls
    return cls.name


def resolve_target_names(names: list[str]) -> list[str]:
    """--target values as target names: a target file's path becomes its registered name."""
    return [register_file(n) if is_target_file(n) else n for n in names]


def split_name(name: str) -> tuple[str, str | None]:
    """("apache-kafka", "3.9.1") for "apache-kafka@3.9.1", (name, None) for a plain name."""
    base, sep, version = name.partition("@")
    return base, (version if sep else None)


def target_class(name: str) -> type[Target]:
    """The class a target name (plain or NAME@VERSION) starts; KeyError says what is known."""
    base, version = split_name(name)
    if base not in TARGETS:
        raise KeyError(f"unknown target {name!r}; known: {', '.join(TARGETS)}")
    if version is not None and not TARGETS[base].versioned:
        raise KeyError(f"target {base!r} has no releases to choose from; NAME@VERSION works for "
                       f"{', '.join(sorted(n for n, c in TARGETS.items() if c.versioned))}")
    if version == "":
        raise KeyError(f"target name {name!r} has an empty version")
    return TARGETS[base]


def make_target(name: str, **options) -> Target:
    """A new, not yet started target; options go to its constructor (e.g. version="4.1.0").

    NAME@VERSION sets version= and names the target so, e.g. make_target("apache-kafka@3.9.1").
    """
    cls = target_class(name)
    _, version = split_name(name)
    if version is not None:
        options = {**options, "version": version}
    target = cls(**options)
    if version is not None:
        target.name = name
    return target


def target_rows() -> list[tuple[str, bool, str]]:
    """(name, available, reason it is not -- or what it would run) for every target."""
    rows = []
    for name, cls in TARGETS.items():
        try:
            ok, detail = cls.availability()
        except Exception as exc:  # a broken environment must not hide the other targets
            ok, detail = False, f"availability check failed: {exc}"
        rows.append((name, ok, detail))
        if name == "apache-kafka":
            rows += _release_rows(ok, detail)
    return rows


def _release_rows(kafka_ok: bool, kafka_detail: str) -> list[tuple[str, bool, str]]:
    """One row per release line of kafka_releases.RELEASES: whether it started here, in which
    metadata mode, and what was measured (or why it does not start)."""
    out = []
    for r in RELEASES:
        starts = r.measured == "starts"
        detail = f"{r.mode}: {r.note}"
        out.append((f"apache-kafka@{r.version}", kafka_ok and starts, detail if kafka_ok else kafka_detail))
    return out


__all__ = [
    "TARGETS",
    "FileTarget",
    "TargetFileError",
    "register_file",
    "resolve_target_names",
    "make_target",
    "split_name",
    "target_class",
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
    "KfakeTarget",
    "LibrdkafkaMockTarget",
]
