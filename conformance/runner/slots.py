"""A started target and the proxy in front of it, kept between case runs when that is safe.

Why reuse at all: a case names its topics, transactional.ids and groups uniquely
(namespace.py), so two case runs on one broker cannot see each other's records, producer state
or offsets; a start saved is ~4 s for Apache Kafka and ~0.4 s for the embedded broker, on
every row. When it is NOT safe -- the previous run did anything to a node (a fault), left a
node down, asked for other broker configs, or the target says it is not reusable (a peer under
test starts fresh, so one case's bug cannot decide the next case's verdict) -- the slot stops
the instance and starts a new one. A reused instance is health-checked first: a target that
died after the last case is restarted, and that case alone gets the `crash` verdict.

Each worker of a parallel run owns its slots, so an instance serves one case run at a time.
"""
from __future__ import annotations

import time
from pathlib import Path

from conformance.targets import Target, Topology, make_target, target_class

from ..dsl.model import Case
from .proxying import ProxyFront


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

    @staticmethod
    def reuse_key(case: Case, broker_configs: dict[str, str], want_proxy: bool) -> tuple:
        """What must be equal for a started instance to serve a case run."""
        return (case.topology.nodes, case.topology.controller, tuple(sorted(broker_configs.items())), want_proxy)

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

    def acquire(self, case: Case, broker_configs: dict[str, str], want_proxy: bool, fresh: bool) -> tuple[Target, str]:
        key = self.reuse_key(case, broker_configs, want_proxy)
        if not fresh and self.cls.reusable and self.holds(key) and self.target.health() is None:
            return self.target, self.bootstrap
        self.release()
        target = make_target(self.name, **self.options)
        self.starts += 1
        workdir = self.workroot / f"{self.name}-{self.starts:03d}"
        # The proxy fronts every node: node i advertises proxy port i, so clients and the
        # brokers' own connections to each other cross it. It runs before the target starts
        # (brokers replicate from each other while the cluster is starting) and follows the
        # addresses the target fills in.
        proxy = ProxyFront(case.topology.nodes) if want_proxy else None
        t0 = time.monotonic()
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
        self.start_seconds.append(time.monotonic() - t0)
        self.target, self.proxy, self.bootstrap, self.key, self.dirty = target, proxy, bootstrap, key, False
        return target, bootstrap

    def after_row(self, fresh: bool) -> None:
        """Keep the instance for the next case run only when that is safe (module doc)."""
        if not self.cls.reusable or fresh or self.dirty:
            self.release()
