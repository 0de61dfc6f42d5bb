"""The one interface every conformance target offers, and the wire questions they share.

Why one interface: the runner must never ask *which* broker it drives. A case says "kill the
TransactionCoordinator of txn-1"; the runner asks the target who that is (over the wire, the way
a client would find out) and asks the target to kill that node. A target that cannot do what a
case needs raises NotApplicable with the reason, so the case is reported as not applicable
instead of being silently approximated.

Life cycle: construct (cheap, no side effects) -> start(topology, broker_configs, workdir) ->
node control and questions -> stop(). Targets are context managers; stop() is idempotent and
ends every process the target started, by PID.

NotApplicable and TargetUnavailable are the verdict exceptions of conformance/results.py,
imported here because every target raises them.
"""
from __future__ import annotations

import abc
import atexit
import logging
import time
from pathlib import Path
from typing import Callable, ClassVar, Collection, TypeVar

from broker_impl.codec import Errors, error_name

from ..results import NotApplicable, TargetUnavailable  # the verdict exceptions a target raises
from . import wire
from .. import security
from .admin import create_topics
from .topology import TopicSpec, Topology

log = logging.getLogger(__name__)

T = TypeVar("T")

#: FindCoordinator errors that mean "ask again shortly" while a cluster converges:
#: COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR.
RETRIABLE_COORDINATOR_ERRORS = frozenset({14, 15, 16})

#: API key -> capability, for the discovered capabilities.
API_CAPABILITIES = {65: "describe_transactions", 66: "list_transactions", 61: "describe_producers",
                    68: "consumer_group_protocol"}
TRANSACTION_API_KEYS = (22, 24, 25, 26, 28)  # InitProducerId .. TxnOffsetCommit


#: Targets started and not yet stopped: stopped at interpreter exit, so that an exception or
#: Ctrl-C in the harness does not leave brokers running (a SIGKILLed harness still would).
#: A strong reference: a target dropped without stop() must still be stoppable here.
_started_targets: "set[Target]" = set()


@atexit.register
def _stop_started_targets() -> None:
    for target in list(_started_targets):
        try:
            target.stop()
        except Exception:  # best effort at exit; the next target must still be stopped
            log.exception("stopping target %s at exit failed", target.name)


class NoLiveNode(RuntimeError):
    """Every node of the target is down (killed, paused or stopped): nobody can be asked."""


class TargetStartError(Exception):
    """The target was started but did not become ready; the message carries the log tail."""


def wait_until(
    what: str, probe: Callable[[], T | None], timeout: float, interval: float = 0.2
) -> T:
    """Call probe() until it returns something other than None, within `timeout` seconds.

    probe may raise wire.WireError (a node not yet listening): that counts as "not yet".
    The last such error is part of the TimeoutError message.
    """
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            result = probe()
            if result is not None:
                return result
        except wire.WireError as exc:
            last_error = exc
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(interval)


class Target(abc.ABC):
    """A Kafka-compatible cluster the conformance runner drives. See the module docstring."""

    name: ClassVar[str]
    #: What this target can do whatever runs; API capabilities are added after start.
    static_capabilities: ClassVar[frozenset[str]] = frozenset()
    #: Seconds to wait for readiness (brokers registered, topic leaders elected, coordinators).
    ready_timeout: float = 60.0
    #: Ask FindCoordinator for a throw-away group and transactional.id at start, so that
    #: __consumer_offsets and __transaction_state exist and are loaded before the case runs:
    #: otherwise the first transaction of every case pays for creating them, and the time a
    #: case measures depends on whether it was the first.
    prewarm_coordinators: bool = False

    # ----------------------------------------------------------------- facts the runner reads
    #: The oracle: when it is part of a run, every other target's rows are diffed against its.
    reference: ClassVar[bool] = False
    #: A started instance may serve the next case run (same topology and broker configs, nothing
    #: done to its nodes): every case names its topics, ids and groups uniquely, so runs cannot
    #: see each other's state, and a start is saved (seconds a row: docs/measurements.md).
    reusable: ClassVar[bool] = True
    #: One started instance may serve several case runs AT ONCE (parallel workers): a broker that
    #: is built for many clients (a JVM with its own thread pools). Targets whose one process
    #: would be the bottleneck -- or whose single event loop would make a timing case late --
    #: get an instance per worker instead.
    shareable: ClassVar[bool] = False
    #: Each node is a heavy process to start (a JVM: seconds of CPU per node, docs/measurements.md):
    #: the runner lets only a few multi-node instances of such a target start and run at once
    #: (runner.WorkQueue), so that concurrent cluster starts do not miss their own timeouts.
    heavy_nodes: ClassVar[bool] = False
    #: Takes `advertised.listeners` as a broker config: each node can name the proxy's port for
    #: itself, so brokers reach each other through the proxy too (broker-to-broker fault rules).
    advertises_listeners: ClassVar[bool] = False
    #: On a run over SASL (conformance/security.py) its brokers authenticate the requests they
    #: send each other (Kafka's inter-broker SASL settings), so they may dial the proxy's
    #: advertised ports; the embedded broker cannot (docs/security.md): its proxy rewrites.
    authenticates_own_requests: ClassVar[bool] = False
    #: On a run over SASL its cluster's brokers dial each other on a PLAINTEXT listener of their
    #: own (inter.broker.listener.name), not on the run's secured one.
    plaintext_inter_broker_listener: ClassVar[bool] = False
    #: Starts with the run's SASL listener and user (`kconform run --security`,
    #: conformance/security.py); a target without: not applicable on such a run.
    secures_listeners: ClassVar[bool] = False
    #: A cluster someone else runs, reached with a user's own client settings (`kconform run
    #: --command-config FILE`): the only kind of target such a run applies to.
    takes_client_config: ClassVar[bool] = False
    #: Its name may carry `@VERSION` (its constructor takes version=): several releases side by
    #: side in one run (targets.make_target).
    versioned: ClassVar[bool] = False
    #: Takes broker configs at all (Kafka's names); False where the target has no way to apply
    #: them (an external cluster, Tansu): see `unappliable_configs`.
    applies_broker_configs: ClassVar[bool] = True
    #: Measured divergences that every case meets with one client (client name -> what the
    #: target does and what Kafka does): no single case can document them, so the runner
    #: records them on each row of that client as its known difference (cases/README.md).
    client_differences: ClassVar[dict[str, str]] = {}

    def topic_configs_reason(self, topics) -> str | None:
        """Why this started target cannot honour the topic configs of `topics` (TopicSpecs) as the
        case means them; None when it can (most targets: CreateTopics applies them)."""
        return None

    def unappliable_configs(self, configs: dict[str, str]) -> dict[str, str]:
        """The broker configs of `configs` this started target could not apply (it ignores them):
        all of them where it takes none, else the ones it said at start it does not know
        (`unapplied_configs`, filled by the target while it starts)."""
        if not self.applies_broker_configs:
            return dict(configs)
        return {k: v for k, v in configs.items() if k in self.unapplied_configs}

    def __init__(self) -> None:
        #: node id -> (host, port) clients connect to.
        self.addresses: dict[int, tuple[str, int]] = {}
        #: nodes not to ask (killed, paused, stopped).
        self.down: set[int] = set()
        self.bootstrap: str | None = None
        self.topology: Topology | None = None
        self.broker_configs: dict[str, str] = {}
        self.node_configs: dict[int, dict[str, str]] = {}
        self.workdir: Path | None = None
        #: Broker configs given at start that the target said it does not apply.
        self.unapplied_configs: dict[str, str] = {}
        #: API key -> (min, max) version, as ApiVersions said at start.
        self.api_ranges: dict[int, tuple[int, int]] = {}
        self._discovered: frozenset[str] = frozenset()
        self._finalized_features: dict[str, int] = {}
        #: Seconds spent in each start phase (launch, brokers, topics, coordinators, total).
        self.timings: dict[str, float] = {}

    # ----------------------------------------------------------------- identity
    @classmethod
    @abc.abstractmethod
    def availability(cls) -> tuple[bool, str]:
        """(can it start on this machine, why not -- or what it will run when it can)."""

    @property
    @abc.abstractmethod
    def version(self) -> str:
        """Version of the broker software, e.g. "4.1.0"."""

    @property
    def capabilities(self) -> frozenset[str]:
        return self.static_capabilities | self._discovered

    @property
    def finalized_features(self) -> dict[str, int]:
        """Finalized feature levels (transaction.version, ...) from ApiVersions v3+, after start."""
        return dict(self._finalized_features)

    def require_api(self, api_name: str, api_key: int, version: int) -> None:
        """NotApplicable unless the target said (ApiVersions) it serves this API at this version:
        a case written for EndTxn v5 says nothing about a broker that only speaks v0-4."""
        rng = self.api_ranges.get(api_key)
        if rng is None:
            raise NotApplicable(f"target {self.name!r} does not serve {api_name} (API key {api_key} is not in "
                                f"its ApiVersions); the case sends it")
        if not rng[0] <= version <= rng[1]:
            raise NotApplicable(f"target {self.name!r} serves {api_name} v{rng[0]}-{rng[1]}; the case sends "
                                f"v{version}")

    def require(self, capability: str, action: str) -> None:
        if capability not in self.capabilities:
            raise NotApplicable(f"target {self.name!r} cannot {action}: it lacks capability {capability!r}")

    # ----------------------------------------------------------------- life cycle
    def start(
        self,
        topology: Topology,
        broker_configs: dict[str, str],
        workdir: Path,
        node_configs: dict[int, dict[str, str]] | None = None,
    ) -> str:
        """Start the cluster, create the topology's topics, return the bootstrap address.

        node_configs: broker configs for one node only, by node id (1..nodes), over
        broker_configs -- e.g. each node's `advertised.listeners` naming its own proxy port.

        Returns only when every node sees every node, and every partition of every topic
        has a leader on every node's metadata. On any failure the processes already started
        are stopped before the error propagates.
        """
        ok, reason = self._available()
        if not ok:
            raise TargetUnavailable(f"target {self.name!r} is not available: {reason}")
        if topology.nodes < 1:
            raise ValueError("a topology needs at least one node")
        sec = security.current()
        if sec.given and not self.takes_client_config:
            raise NotApplicable(f"target {self.name!r} starts its own listeners: the run's security settings are a "
                                "user's own (--command-config), for a cluster someone else runs (--target external)")
        if sec.secured and not sec.given and not self.secures_listeners:
            raise NotApplicable(f"target {self.name!r} does not set up a {sec.protocol} listener "
                                "(kconform run --security)")
        if sec.sasl and not sec.given and (topology.nodes > 1 or topology.controller == "dedicated") \
                and not self.authenticates_own_requests and not self.plaintext_inter_broker_listener:
            raise NotApplicable(f"target {self.name!r} serves {security.current().protocol} on one node only: "
                                "its nodes' connections to each other do not authenticate (docs/security.md)")
        if topology.nodes > 1 and not self._may_have_nodes(topology.nodes):
            raise NotApplicable(
                f"target {self.name!r} runs a single node; the case needs {topology.nodes}"
            )
        if topology.controller == "dedicated" and "dedicated_controller" not in self.static_capabilities:
            raise NotApplicable(f"target {self.name!r} cannot run its metadata quorum on a dedicated node")
        if self.bootstrap is not None:
            raise RuntimeError(f"target {self.name!r} is already started")
        self.topology = topology
        self.node_configs = {int(k): dict(v) for k, v in (node_configs or {}).items()}
        unknown = sorted(set(self.node_configs) - set(range(1, topology.nodes + 1)))
        if unknown:
            raise ValueError(f"node_configs names node(s) {unknown}; the topology has nodes 1..{topology.nodes}")
        if not self.per_node_configs:
            # One-node targets take node 1's configs like any other broker config.
            broker_configs = {**broker_configs, **self.node_configs.get(1, {})}
        self.broker_configs = dict(broker_configs)
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        t0 = mark = time.monotonic()

        def phase(name: str) -> None:
            nonlocal mark
            now = time.monotonic()
            self.timings[name] = round(now - mark, 3)
            mark = now

        _started_targets.add(self)
        try:
            self._launch(topology, dict(broker_configs), self.workdir)
            phase("launch")
            self.bootstrap = ",".join(f"{h}:{p}" for h, p in self.addresses.values())
            try:
                self.wait_brokers(topology.nodes)
            except TimeoutError as exc:
                # Started, but the nodes did not register in time: a start failure (the runner
                # tries a start once more), with what the nodes logged, not a bare timeout.
                raise TargetStartError(f"{exc}\n{self.last_words(15)}") from None
            phase("brokers")
            self._discover_capabilities()
            self.create_topics(topology.topics)
            phase("topics")
            if self.prewarm_coordinators:
                self.group_coordinator("kconform-prewarm")
                if "transactions" in self.capabilities:
                    self.transaction_coordinator("kconform-prewarm")
                phase("coordinators")
        except BaseException:
            self.stop()
            raise
        self.timings["total"] = round(time.monotonic() - t0, 3)
        return self.bootstrap

    #: True where _launch reads self.node_configs itself (a process per node); otherwise start()
    #: merges node 1's configs into broker_configs (single-node targets).
    per_node_configs: ClassVar[bool] = False

    def _available(self) -> tuple[bool, str]:
        """availability() for this instance (constructor arguments may make a difference)."""
        return self.availability()

    def _may_have_nodes(self, nodes: int) -> bool:
        return "multi_node" in self.static_capabilities

    @abc.abstractmethod
    def _launch(self, topology: Topology, broker_configs: dict[str, str], workdir: Path) -> None:
        """Start the processes (if any) and fill self.addresses; return once ports accept."""

    def stop(self) -> None:
        """End every process this target started, by PID. Idempotent."""
        try:
            self._stop()
        finally:
            _started_targets.discard(self)

    @abc.abstractmethod
    def _stop(self) -> None:
        """End this target's processes (stop() also forgets the target for the exit hook)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # ----------------------------------------------------------------- nodes
    def node_ids(self) -> list[int]:
        return sorted(self.addresses)

    def live_addresses(self) -> list[tuple[int, tuple[str, int]]]:
        return [(n, a) for n, a in sorted(self.addresses.items()) if n not in self.down]

    def kill(self, node_id: int) -> None:
        raise NotApplicable(f"target {self.name!r} cannot kill a node")

    def pause(self, node_id: int) -> None:
        raise NotApplicable(f"target {self.name!r} cannot pause a node")

    def resume(self, node_id: int) -> None:
        raise NotApplicable(f"target {self.name!r} cannot resume a node")

    def restart(self, node_id: int) -> None:
        raise NotApplicable(f"target {self.name!r} cannot restart a node")

    def stop_node(self, node_id: int) -> None:
        raise NotApplicable(f"target {self.name!r} cannot stop a single node")

    def await_fault_point(self, point: str, timeout: float) -> int:
        """Block until the armed protocol point `point` fired on some node and that node has
        crashed or stopped there (capability `fault_points`); returns the node id, marks it down.
        TimeoutError when it does not fire within `timeout` seconds."""
        raise NotApplicable(f"target {self.name!r} has no fault points in its code")

    def release_hold(self, node_id: int) -> None:
        """Let the points `hold` stopped on this node go on (capability `fault_points`)."""
        raise NotApplicable(f"target {self.name!r} has no fault points in its code")

    def log_files(self) -> list[Path]:
        return []

    #: Seconds a node gets to answer the health probe: a live broker answers ApiVersions in
    #: milliseconds; one that needs longer is wedged for a case's purposes.
    health_timeout: float = 5.0

    def exited(self) -> str | None:
        """What ended, when a node the case has not taken down has no process any more
        ("node 0's process 31802 exited with code 2"); None while all run -- or where the
        target cannot tell without asking over the network. Cheap (no I/O): the runner asks it
        twice a second while a case runs, so that no step waits out its deadline on a target
        that is gone."""
        return None

    def health(self) -> str | None:
        """None while every node the case has not taken down still serves; otherwise what is
        wrong ("node 1's process exited with code 2", "node 2 does not answer ApiVersions").
        Cheap enough to ask after every failed step: the runner uses it to tell a target that
        died (a finding: verdict `crash`) from a case that failed, and never reuses a dead one."""
        for node_id, address in self.live_addresses():
            try:
                wire.api_versions(address, timeout=self.health_timeout)
            except wire.AuthenticationFailed:
                continue   # it answered (a case changed the run's password: change_run_password)
            except wire.WireError as exc:
                return f"node {node_id} does not answer ApiVersions within {self.health_timeout:.0f} s ({exc})"
        return None

    def last_words(self, lines: int = 20) -> str:
        """The end of the node logs, for a `crash` verdict's reason (empty where none is kept)."""
        return ""

    def rss_bytes(self) -> dict[int, int]:
        """Resident memory per running node (empty where the target runs no local process)."""
        return {}

    # ----------------------------------------------------------------- wire questions
    def _ask_live_nodes(self, what: str, question: Callable[[tuple[str, int]], T]) -> T:
        """Ask the first live node that answers; raise wire.WireError if none does."""
        live = self.live_addresses()
        if not live:
            raise NoLiveNode(f"cannot ask {what}: every node of target {self.name!r} is down")
        errors = []
        for node_id, address in live:
            try:
                return question(address)
            except wire.WireError as exc:
                errors.append(f"node {node_id}: {exc}")
        raise wire.WireError(f"no live node answered {what}: " + "; ".join(errors))

    def _coordinator(
        self, key: str, key_type: int, timeout: float | None, exclude: Collection[int]
    ) -> int:
        kind = "TransactionCoordinator" if key_type == wire.TRANSACTION else "GroupCoordinator"
        last = {}

        def probe() -> int | None:
            c = self._ask_live_nodes(
                f"FindCoordinator({key!r})", lambda a: wire.find_coordinator(a, key, key_type)
            )
            last["answer"] = c
            if c.error_code == 0:
                return None if c.node_id in exclude else c.node_id
            if c.error_code in RETRIABLE_COORDINATOR_ERRORS:
                return None
            raise RuntimeError(
                f"FindCoordinator({key!r}) failed: {error_name(c.error_code)} {c.error_message or ''}"
            )

        try:
            return wait_until(f"the {kind} of {key!r}", probe, timeout or self.ready_timeout)
        except TimeoutError as exc:
            c = last.get("answer")
            said = f"; last answer: node {c.node_id}, {error_name(c.error_code)}" if c else ""
            raise TimeoutError(f"{exc}{said}") from None

    def transaction_coordinator(
        self, transactional_id: str, *, timeout: float | None = None, exclude: Collection[int] = ()
    ) -> int:
        """Node id of the TransactionCoordinator, asked with FindCoordinator(key_type=1).

        Waits while the cluster says COORDINATOR_NOT_AVAILABLE / LOAD_IN_PROGRESS (the first
        ask creates __transaction_state). `exclude`: keep asking until the answer is none of
        these nodes -- "wait until the coordinator has moved away from the node I killed".
        """
        return self._coordinator(transactional_id, wire.TRANSACTION, timeout, exclude)

    def group_coordinator(
        self, group_id: str, *, timeout: float | None = None, exclude: Collection[int] = ()
    ) -> int:
        """Node id of the GroupCoordinator, asked with FindCoordinator(key_type=0)."""
        return self._coordinator(group_id, wire.GROUP, timeout, exclude)

    def partition_leader(self, topic: str, partition: int) -> int:
        """Leader node id of a partition as the cluster's Metadata says now; -1 when none."""
        return self.partition_replicas(topic, partition)[0]

    def partition_replicas(self, topic: str, partition: int) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
        """(leader, replicas, isr) of a partition as a live node's Metadata says now."""
        md = self._ask_live_nodes(f"Metadata({topic!r})", lambda a: wire.metadata(a, [topic]))
        t = md.topics.get(topic)
        if t is None or t.error_code:
            raise KeyError(f"unknown topic {topic!r}")
        p = next((p for p in t.partitions if p.partition == partition), None)
        if p is None:
            raise KeyError(f"topic {topic!r} has no partition {partition}")
        return p.leader, p.replicas, p.isr

    #: ListOffsets errors that mean "ask again": NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE,
    #: UNKNOWN_TOPIC_OR_PARTITION (metadata not yet everywhere), and the epoch/fencing answers
    #: of a leader change under way -- among them OFFSET_NOT_AVAILABLE (78), which a new leader
    #: answers until its high watermark has reached the start of its leader epoch (seen on Kafka
    #: 4.3.1 right after cluster/acks_all_survives_leader_kill's restart).
    RETRIABLE_OFFSET_ERRORS = frozenset({
        Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.LEADER_NOT_AVAILABLE, Errors.NOT_LEADER_OR_FOLLOWER,
        Errors.FENCED_LEADER_EPOCH, Errors.UNKNOWN_LEADER_EPOCH, Errors.OFFSET_NOT_AVAILABLE,
    })

    def end_offsets(self, partitions: list[tuple[str, int]], read_committed: bool,
                    timeout: float = 10.0) -> dict[tuple[str, int], int]:
        """Where each partition ends, as its leader says (ListOffsets latest): the high watermark,
        or with read_committed the last stable offset. A broker fact, asked over the wire like
        every other question here; RuntimeError names a partition that answers an error."""
        return self._list_offsets(partitions, read_committed, wire.LATEST, timeout)

    def start_offsets(self, partitions: list[tuple[str, int]], timeout: float = 10.0) -> dict[tuple[str, int], int]:
        """Where each partition starts, as its leader says (ListOffsets earliest): the log start
        offset, above 0 once DeleteRecords or retention removed the first records."""
        return self._list_offsets(partitions, False, wire.EARLIEST, timeout)

    def _list_offsets(self, partitions: list[tuple[str, int]], read_committed: bool, timestamp: int,
                      timeout: float) -> dict[tuple[str, int], int]:
        left = list(partitions)
        out: dict[tuple[str, int], int] = {}

        def probe() -> bool | None:
            by_leader: dict[int, list[tuple[str, int]]] = {}
            for topic, partition in left:
                by_leader.setdefault(self.partition_leader(topic, partition), []).append((topic, partition))
            for leader, tps in by_leader.items():
                if leader < 0 or leader not in self.addresses or leader in self.down:
                    continue
                for tp, (offset, error) in wire.list_offsets(self.addresses[leader], tps, read_committed,
                                                             timestamp=timestamp).items():
                    if error == 0:
                        out[tp] = offset
                        left.remove(tp)
                    elif error not in self.RETRIABLE_OFFSET_ERRORS:
                        raise RuntimeError(f"ListOffsets {tp[0]}-{tp[1]}: {error_name(error)}")
            return True if not left else None

        wait_until(f"{'end' if timestamp == wire.LATEST else 'start'} offsets of {left}", probe, timeout, interval=0.05)
        return out

    def _live_bootstrap(self) -> str:
        live = self.live_addresses()
        if not live:
            raise NoLiveNode(f"every node of target {self.name!r} is down")
        return ",".join(f"{h}:{p}" for _, (h, p) in live)

    # ----------------------------------------------------------------- readiness
    def wait_brokers(self, count: int, timeout: float | None = None) -> None:
        """Every live node's Metadata lists at least `count` brokers (KRaft: unfenced ones)."""

        def probe() -> bool | None:
            for _, address in self.live_addresses():
                if len(wire.metadata(address, []).brokers) < count:
                    return None
            return True

        wait_until(f"{count} registered broker(s)", probe, timeout or self.ready_timeout)

    def wait_node_ready(self, node_id: int, timeout: float | None = None) -> None:
        """A (re)started node answers Metadata and lists itself among the live brokers."""
        address = self.addresses[node_id]
        wait_until(
            f"node {node_id} to rejoin",
            lambda: True if node_id in wire.metadata(address, []).brokers else None,
            timeout or self.ready_timeout,
        )

    def create_topics(self, topics: list[TopicSpec], timeout: float | None = None) -> None:
        """CreateTopics, then wait until every partition has a leader on every live node."""
        if not topics:
            return
        nodes = self.topology.nodes if self.topology else 1
        create_topics(self._live_bootstrap(), topics, nodes, timeout or self.ready_timeout)
        self.wait_topics_ready(topics, timeout)

    def wait_topics_ready(self, topics: list[TopicSpec], timeout: float | None = None) -> None:
        names = [t.name for t in topics]
        expected = {t.name: t.partitions for t in topics}

        def probe() -> bool | None:
            for _, address in self.live_addresses():
                md = wire.metadata(address, names)
                for name in names:
                    t = md.topics.get(name)
                    if t is None or t.error_code or len(t.partitions) < expected[name]:
                        return None
                    if any(p.leader < 0 or p.error_code for p in t.partitions):
                        return None
            return True

        wait_until(f"leaders for topics {names}", probe, timeout or self.ready_timeout)

    def _discover_capabilities(self) -> None:
        versions = self._ask_live_nodes("ApiVersions", wire.api_versions)
        found = {cap for key, cap in API_CAPABILITIES.items() if key in versions.api_versions}
        if all(k in versions.api_versions for k in TRANSACTION_API_KEYS):
            found.add("transactions")
        self._discovered = frozenset(found)
        self._finalized_features = dict(versions.finalized_features)
        self.api_ranges = dict(versions.api_versions)
