"""Started targets, kept between case runs when that is safe, and shared between them where a
broker is built for it.

Why reuse at all: a case names its topics, transactional.ids and groups uniquely
(namespace.py), so two case runs on one broker cannot see each other's records, producer state
or offsets; and a start saved is seconds saved on every row (docs/measurements.md). When it is
NOT safe -- the previous run did anything to a node (a fault), left a
node down, asked for other broker configs, or the target says it is not reusable (a peer under
test starts fresh, so one case's bug cannot decide the next case's verdict) -- the instance is
stopped and a new one started. A reused instance is health-checked first: a target that died
after the last case is restarted, and that case alone gets the `crash` verdict.

Two holders:
- TargetSlot: one worker's own instance of a target, serving one case run at a time. Cases with
  faults run here (a fault dirties the instance), and so does every target that is not
  `shareable` (the embedded broker: one process, one event loop per instance).
- SharedTargets: one instance per (target, reuse key) for the whole run, serving any number of
  fault-free case runs AT ONCE -- Apache Kafka, a JVM built for many clients. Each case run
  stands behind its own rewriting proxy (proxying.py), so its rules and transcript are its own.
  At most `max_idle` idle instances per target stay alive; an idle one makes room for a new key.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from conformance.targets import Target, TargetStartError, Topology, make_target, target_class

from ..dsl.model import Case
from .proxying import ADVERTISE, ProxyFront


def reuse_key(case: Case, broker_configs: dict[str, str], advertise: bool) -> tuple:
    """What must be equal for a started instance to serve a case run: the topology, the broker
    configs, and whether the nodes advertise a proxy's ports."""
    return (case.topology.nodes, case.topology.controller, tuple(sorted(broker_configs.items())), advertise)


#: Starts of one instance before its failure to start is the row's outcome: a JVM cluster on a
#: loaded machine sometimes misses its own registration timeout, and a port taken between
#: free_ports() and the bind fails a start too -- neither is about the case.
START_ATTEMPTS = 2


def start_target(name: str, options: dict, case: Case, broker_configs: dict[str, str], workdir: Path,
                 advertise: bool) -> tuple[Target, ProxyFront | None, str]:
    """start_once, tried again (in a new directory) when the target did not come up."""
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            return start_once(name, options, case, broker_configs,
                              workdir if attempt == 1 else workdir.with_name(f"{workdir.name}-retry{attempt}"), advertise)
        except TargetStartError:
            if attempt == START_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


def start_once(name: str, options: dict, case: Case, broker_configs: dict[str, str], workdir: Path,
               advertise: bool) -> tuple[Target, ProxyFront | None, str]:
    """A started target, and the advertising proxy in front of it when asked: node i advertises
    proxy port i, so clients and the brokers' own connections to each other cross it. The proxy
    runs before the target starts (brokers replicate from each other while the cluster is
    starting) and follows the addresses the target fills in."""
    target = make_target(name, **options)
    proxy = ProxyFront(case.topology.nodes) if advertise else None
    try:
        topology = Topology(nodes=case.topology.nodes, controller=case.topology.controller)
        if proxy is not None:
            proxy.follow(target)
        bootstrap = target.start(topology, dict(broker_configs), workdir,
                                 node_configs=proxy.node_configs() if proxy is not None else None)
        if proxy is not None:
            bootstrap = proxy.attach(target)
    except BaseException:
        if proxy is not None:
            proxy.stop()
        target.stop()
        raise
    return target, proxy, bootstrap


class TargetSlot:
    """The started instance of one target, reused or replaced per case run (module doc)."""

    def __init__(self, name: str, options: dict, workroot: Path, proxy_mode: str) -> None:
        self.name = name
        self.cls = target_class(name)
        self.options = options
        self.workroot = workroot
        self.proxy_mode = proxy_mode
        self.target: Target | None = None
        self.proxy: ProxyFront | None = None
        self.bootstrap: str | None = None
        self.key: tuple | None = None
        self.dirty = False
        self.starts = 0
        self.start_seconds: list[float] = []

    def holds(self, key: tuple) -> bool:
        """Whether the slot holds a started, clean instance for this key right now."""
        return self.target is not None and self.key == key and not self.dirty and not self.target.down

    def release(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None
        if self.target is not None:
            try:
                self.target.stop()
            finally:
                self.target = None
        self.key = None

    def acquire(self, case: Case, broker_configs: dict[str, str], proxy: str | None, fresh: bool) -> tuple[Target, str]:
        key = reuse_key(case, broker_configs, proxy == ADVERTISE)
        if not fresh and self.cls.reusable and self.holds(key) and self.target.health() is None:
            return self.target, self.bootstrap
        self.release()
        self.starts += 1
        t0 = time.monotonic()
        self.target, self.proxy, self.bootstrap = start_target(
            self.name, self.options, case, broker_configs, self.workroot / f"{self.name}-{self.starts:03d}",
            proxy == ADVERTISE)
        self.start_seconds.append(time.monotonic() - t0)
        self.key, self.dirty = key, False
        return self.target, self.bootstrap

    def after_row(self, fresh: bool) -> None:
        """Keep the instance for the next case run only when that is safe (module doc)."""
        if not self.cls.reusable or fresh or self.dirty:
            self.release()


@dataclass
class _Shared:
    target: Target
    bootstrap: str
    users: int = 0
    dead: bool = False
    last_used: float = field(default_factory=time.monotonic)


class SharedTargets:
    """One instance per (target name, reuse key), shared by concurrent case runs (module doc)."""

    def __init__(self, options: dict[str, dict], workroot: Path, max_idle: int = 2) -> None:
        self.options = options
        self.workroot = workroot
        self.max_idle = max_idle
        self._lock = threading.Lock()
        self._starting: dict[tuple, threading.Event] = {}
        self._instances: dict[tuple, _Shared] = {}
        self.starts: dict[str, int] = {}
        self.start_seconds: dict[str, list[float]] = {}

    def acquire(self, name: str, case: Case, broker_configs: dict[str, str]) -> tuple[Target, str]:
        """A started instance for this case run (started here if none serves the key); the
        caller must release(name, target) when the run is over."""
        ident = (name, reuse_key(case, broker_configs, False))
        while True:
            with self._lock:
                inst = self._instances.get(ident)
                if inst is not None and not inst.dead:
                    inst.users += 1
                    inst.last_used = time.monotonic()
                    return inst.target, inst.bootstrap
                starting = self._starting.get(ident)
                if starting is None:
                    self._starting[ident] = threading.Event()
                    break
            starting.wait()  # another worker is starting this very instance: use it then
        try:
            self._make_room(name)
            with self._lock:
                n = self.starts[name] = self.starts.get(name, 0) + 1
            t0 = time.monotonic()
            target, _, bootstrap = start_target(name, self.options.get(name, {}), case, broker_configs,
                                                self.workroot / f"shared-{name}-{n:03d}", advertise=False)
            with self._lock:
                self.start_seconds.setdefault(name, []).append(time.monotonic() - t0)
                self._instances[ident] = _Shared(target, bootstrap, users=1)
            return target, bootstrap
        finally:
            with self._lock:
                self._starting.pop(ident).set()

    def release(self, name: str, target: Target, healthy: bool) -> None:
        """A case run is done with `target`; an unhealthy one is stopped when its last user goes."""
        stop = None
        with self._lock:
            for ident, inst in list(self._instances.items()):
                if inst.target is target:
                    inst.users -= 1
                    inst.dead = inst.dead or not healthy
                    inst.last_used = time.monotonic()
                    if inst.dead and inst.users == 0:
                        stop = self._instances.pop(ident)
                    break
        if stop is not None:
            stop.target.stop()

    def _make_room(self, name: str) -> None:
        """Stop the least recently used idle instances of `name` beyond max_idle - 1."""
        with self._lock:
            idle = sorted(((i, s) for i, s in self._instances.items() if i[0] == name and s.users == 0),
                          key=lambda item: item[1].last_used)
            victims = [self._instances.pop(i) for i, _ in idle[:max(0, len(idle) - self.max_idle + 1)]]
        for v in victims:
            v.target.stop()

    def stop_all(self) -> None:
        with self._lock:
            victims = list(self._instances.values())
            self._instances.clear()
        for v in victims:
            v.target.stop()
