"""Target `external`: a cluster someone else runs, known only by its bootstrap address.

Why: to run the suite against any Kafka-compatible service (a managed cluster, a broker in a
container) without the harness owning its processes. Nothing can be killed, paused or
restarted, so those operations raise NotApplicable and cases that need them are reported as
not applicable. Broker configs cannot be applied either: they are recorded in
`applies_broker_configs = False` for the runner to judge. Wire questions (coordinators, leaders, API
capabilities) work as for every other target.
"""
from __future__ import annotations

import os
from pathlib import Path

from . import wire
from .base import NotApplicable, Target, Topology, wait_until

BOOTSTRAP_ENV = "KCONFORM_BOOTSTRAP"
VERSION_ENV = "KCONFORM_EXTERNAL_VERSION"


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for item in bootstrap.split(","):
        item = item.strip()
        if not item:
            continue
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"bad bootstrap address {item!r}: expected host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("empty bootstrap address")
    return out


class ExternalTarget(Target):
    name = "external"
    static_capabilities = frozenset()
    applies_broker_configs = False
    #: Someone else's cluster: serves any number of clients, like any Kafka.
    shareable = True
    #: Reached with the user's own client settings (`kconform run --command-config FILE`).
    takes_client_config = True
    ready_timeout = 60.0

    def __init__(self, bootstrap: str | None = None, version: str | None = None) -> None:
        super().__init__()
        self.given_bootstrap = bootstrap or os.environ.get(BOOTSTRAP_ENV)
        self._version = version or os.environ.get(VERSION_ENV) or "unknown"

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        bootstrap = os.environ.get(BOOTSTRAP_ENV)
        if not bootstrap:
            return False, f"set {BOOTSTRAP_ENV}=host:port[,host:port...] to name the cluster"
        return True, f"bootstrap {bootstrap}"

    def _available(self) -> tuple[bool, str]:
        if not self.given_bootstrap:
            return False, f"no bootstrap address: set {BOOTSTRAP_ENV} or pass bootstrap="
        return True, f"bootstrap {self.given_bootstrap}"

    def _may_have_nodes(self, nodes: int) -> bool:
        return True  # only the cluster's Metadata can tell; checked in _launch

    @property
    def version(self) -> str:
        return self._version

    def _launch(self, topology: Topology, broker_configs: dict[str, str], workdir: Path) -> None:
        seeds = parse_bootstrap(self.given_bootstrap)

        def ask_any():
            errors = []
            for address in seeds:
                try:
                    return wire.metadata(address, [])
                except wire.WireError as exc:
                    errors.append(str(exc))
            raise wire.WireError("; ".join(errors))

        md = wait_until(f"Metadata from {self.given_bootstrap}", ask_any, self.ready_timeout)
        if len(md.brokers) < topology.nodes:
            raise NotApplicable(
                f"the external cluster has {len(md.brokers)} live broker(s); the case needs {topology.nodes}"
            )
        self.addresses.update(md.brokers)  # in place: a proxy follows this very dict

    def _stop(self) -> None:
        """Nothing to end: the harness started no process. Topics it created are left in place."""
        self.down.clear()
