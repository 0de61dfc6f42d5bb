"""The case's actors as live client-driver processes.

Why a layer of its own: an actor is a *name* in the case (p1, zombie, copier) while processes
come and go -- a crashed application is a SIGKILLed driver, its restart a new process with the
same config (the same transactional.id), a zombie an old process that keeps running. This module
owns that mapping, starts processes lazily on first use, applies the runner's default configs,
and ends every process it started, by PID.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.clients import ClientProcess, Outcome
from conformance.clients.registry import CLIENTS

from .. import group_protocol
from ..dsl.model import ActorDef
from .namespace import Namespace

#: Config keys that belong to a consumer; a copier's `config` is split with this list.
CONSUMER_KEYS = frozenset({
    "group.id", "group.instance.id", "isolation.level", "auto.offset.reset", "enable.auto.commit",
    "auto.commit.interval.ms", "session.timeout.ms", "heartbeat.interval.ms", "max.poll.records",
    "max.poll.interval.ms", "fetch.min.bytes", "fetch.max.wait.ms", "partition.assignment.strategy",
    "group.protocol", "group.remote.assignor",
})
CREATE_DEADLINE_MS = 20_000


@dataclass
class LiveActor:
    definition: ActorDef
    client: str
    proc: ClientProcess | None = None
    generation: int = 0
    #: init_transactions done by the current process (transform does it on a fresh process).
    inited: bool = False
    errors: list[str] = field(default_factory=list)


class Actors:
    def __init__(self, defs: dict[str, ActorDef], run_client: str, bootstrap: str, ns: Namespace,
                 logdir: Path, partitions: dict[str, int]) -> None:
        self.bootstrap = bootstrap
        self.partitions = partitions
        self.ns = ns
        self.logdir = logdir
        self.live: dict[str, LiveActor] = {
            name: LiveActor(d, d.client or run_client) for name, d in defs.items()
        }
        self._all: list[ClientProcess] = []

    # ----------------------------------------------------------------- configs
    def producer_config(self, d: ActorDef) -> dict[str, str]:
        cfg = {k: v for k, v in d.config.items() if d.role != "copier" or k not in CONSUMER_KEYS}
        return {"bootstrap.servers": self.bootstrap, **self.ns.config(cfg)}

    def consumer_config(self, d: ActorDef) -> dict[str, str]:
        cfg = {k: v for k, v in d.config.items() if d.role != "copier" or k in CONSUMER_KEYS}
        defaults = {
            "group.id": f"kconform-{d.name}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": "false",
        }
        if d.role == "copier":
            defaults["isolation.level"] = "read_committed"
        merged = {**defaults, **group_protocol.consumer_defaults(), **cfg}
        if group_protocol.current() == group_protocol.CONSUMER:
            # a case that sets them has no row under it (group_protocol.case_reason); a workload's
            # drawn assignor leaves the choice to the broker's group.consumer.assignors
            for key in group_protocol.CLASSIC_ONLY_CONFIGS:
                merged.pop(key, None)
        return {"bootstrap.servers": self.bootstrap, **self.ns.config(merged)}

    # ----------------------------------------------------------------- processes
    def process(self, name: str) -> tuple[ClientProcess | None, Outcome | None]:
        """The actor's current process, started and set up on first use.

        Returns (process, None) or (None, the failed setup outcome) -- a setup failure (e.g. the
        broker refused create_consumer) is the outcome of the step that needed the actor.
        """
        live = self.live[name]
        if live.proc is not None and live.proc.alive:
            return live.proc, None
        live.generation += 1
        live.inited = False
        proc = ClientProcess(live.client, label=f"{name}#{live.generation}",
                             stderr_path=self.logdir / f"{name}.{live.generation}.{live.client}.log")
        self._all.append(proc)
        proc.start()
        live.proc = proc
        setup = self._setup(proc, live.definition)
        if setup is not None and not setup.ok:
            # The clients could not be created (a config the client refuses, a broker that
            # refused): the process is of no use. The next step naming the actor tries again
            # and reports the same cause, never an unrelated "no consumer".
            proc.kill()
            live.proc = None
            return None, setup
        return proc, None

    def _setup(self, proc: ClientProcess, d: ActorDef) -> Outcome | None:
        out = None
        if d.role in ("producer", "copier"):
            out = proc.call("create_producer", CREATE_DEADLINE_MS, config=self.producer_config(d))
            if not out.ok:
                return out
        if d.role in ("consumer", "copier"):
            out = proc.call("create_consumer", CREATE_DEADLINE_MS, config=self.consumer_config(d))
            if not out.ok:
                return out
            if d.inputs:
                topics = [self.ns.name(t) for t in d.inputs]
                if d.assign:
                    # no offset: resume from the group's committed offset (else auto.offset.reset)
                    parts = [{"topic": self.ns.name(t), "partition": p}
                             for t in d.inputs for p in range(self.partitions[t])]
                    out = proc.call("assign", CREATE_DEADLINE_MS, partitions=parts)
                else:
                    out = proc.call("subscribe", CREATE_DEADLINE_MS, topics=topics)
        if d.role == "admin":
            out = proc.call("create_admin", CREATE_DEADLINE_MS, config={"bootstrap.servers": self.bootstrap})
        return out

    def crash(self, name: str) -> None:
        """SIGKILL the actor's process (an application crash); the next use starts a new one."""
        live = self.live[name]
        if live.proc is not None:
            live.proc.kill()

    def restart(self, name: str) -> None:
        """Close the actor's process cleanly; the next use starts a new one with the same config."""
        live = self.live[name]
        old = live.proc
        live.proc = None
        if old is not None and old.alive:
            old.close(timeout_ms=5_000)

    def client_versions(self) -> dict[str, Any]:
        return {name: {"client": live.client, **({"hello": live.proc.hello} if live.proc else {})}
                for name, live in self.live.items()}

    def close_all(self) -> None:
        """End every driver this run started, by SIGKILL: the case is over and observed, and a
        clean close would change broker state behind the observation (an open transaction is
        aborted by librdkafka's close) and costs seconds per driver."""
        for proc in self._all:
            proc.kill()


def client_version(client: str) -> str:
    try:
        return CLIENTS[client].version() or "unknown"
    except Exception:  # noqa: BLE001 - the version is a label, never a reason to fail
        return "unknown"
