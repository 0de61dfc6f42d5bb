"""Target `embedded`: the project's own trio broker (broker_impl), run as a subprocess.

Why a subprocess and not in-process: kill -9 and SIGSTOP must mean the same as for the real
broker (no flush, no goodbye), and a crash in the broker must not take the harness with it. The
process is forked from a zygote that imported the broker once (conformance/zygote.py): the same
process `python -m broker_impl` would be, without its 0.4 s of imports on every start.

Contract with broker_impl (the broker implements it):
  argv   [python, -m, broker_impl, --listen, 127.0.0.1:0, --data-dir, DIR, --node-id, N,
          --set, key=value, ...]
  stdout exactly one line `listening 127.0.0.1:PORT`, flushed, once it accepts connections;
  stderr logs (we append them to a file in the workdir);
  SIGTERM clean shutdown; restart = the same argv with --listen 127.0.0.1:PORT (same port).
Broker configs (including fault points, which the broker reads from its configs) are passed
with --set.

Clusters (topology.nodes > 1, or controller: dedicated): first the controller process
(``--set process.roles=controller``, node id CONTROLLER_NODE_ID as on the apache-kafka target,
never the object of a fault; in the combined topology it decides only while a majority of the
nodes live, as a quorum on the nodes would -- ``kconform.controller.quorum.nodes``), then one
broker process per node, each naming the controller in ``controller.quorum.voters``; a broker
announces its port once the controller unfenced it. Every node has its own port, picked before
start (so a proxy can follow ``addresses`` while the brokers start) and its own
``advertised.listeners`` (``node_configs``: the proxy port in front of it, so brokers reach each
other -- replica fetches, WriteTxnMarkers -- through the proxy too). Defaults fit the node count
as on the apache-kafka target (internal topics replicated min(nodes, 3) times with 6 partitions,
transaction log min ISR 2 on 3+ nodes, a 3 s broker session, no initial rebalance delay); the
case's broker configs override them. The controller holds each new metadata image back from
each broker for up to METADATA_PROPAGATION_MS (drawn per broker): Kafka 4.3.1's brokers learn a
leader change tens of milliseconds apart, and its new leader answers UNKNOWN_LEADER_EPOCH for
20-60 ms after a broker first names it (measured: kill -9 of a 3-node cluster's leader, 4 rounds);
without such a lag the embedded cluster never gives a client that answer. One node alone is its
own controller, with the same defaults for one node as the apache-kafka target's.

Fault points: when the configs arm any (`kconform.fault*`, written by
broker_impl.faults.arming_configs), the target opens a FaultListener and names it in
`kconform.fault.notify`, so the broker tells every hit before it acts. `await_fault_point`
waits on those notices; a restart repeats the command line with only the points that have not
fired re-armed, their `skip` lowered by the hits the node's earlier lives let pass -- so an
`occurrence` counts from the start of the case and a point fires once per case.
"""
from __future__ import annotations

import importlib.util
import re
import signal
import sys
import threading
from pathlib import Path

import broker_impl
from broker_impl.faults import NOTIFY, Arm, arming_configs, is_fault_config, parse_arms
from broker_impl.faults.channel import FaultListener

from .. import security
from .base import TargetStartError, Topology
from .topology import cluster_broker_defaults
from .local import LocalProcessTarget
from .process import NodeProcess, StdoutLines, free_ports, python_env

#: Seconds a node gets, after it said it reached a point, to stop or die there.
SETTLE_S = 5.0

HOST = "127.0.0.1"
LISTENING = re.compile(r"^listening (\S+):(\d+)\s*$")
#: Node id of the controller process of a cluster (outside 1..N, as on the apache-kafka target).
CONTROLLER_NODE_ID = 1000
#: The controller's config for how long it may hold a metadata image back from one broker
#: (broker_impl/server/controller_server.py), and the value clusters run with (module doc).
PROPAGATION = "kconform.metadata.propagation.max.ms"
METADATA_PROPAGATION_MS = 100


def _broker_main_exists() -> bool:
    try:
        return importlib.util.find_spec("broker_impl.__main__") is not None
    except ImportError:
        return False


class EmbeddedTarget(LocalProcessTarget):
    name = "embedded"
    static_capabilities = frozenset({"kill", "pause", "restart", "stop_node", "fault_points", "multi_node",
                                     "dedicated_controller", "wire_markers", "txn_verification"})
    advertises_listeners = True
    plaintext_inter_broker_listener = True
    secures_listeners = True
    per_node_configs = True
    ready_timeout = 30.0
    stop_grace = 10.0

    def __init__(self, python: str | None = None, extra_args: list[str] | None = None) -> None:
        super().__init__()
        self.python = python or sys.executable
        self.extra_args = list(extra_args or [])
        #: The notices of the armed fault points (None when the configs arm none).
        self.fault_listener: FaultListener | None = None
        self._arms: dict[str, Arm] = {}
        self._plain_configs: dict[str, str] = {}
        self._data_dirs: dict[int, Path] = {}
        self._ports: dict[int, int] = {}
        #: per broker: the controller it registers with, its advertised listener
        self._node_sets: dict[int, dict[str, str]] = {}
        #: the controller process's configs (it never gets fault points)
        self._fixed_sets: dict[int, dict[str, str]] = {}

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        if not _broker_main_exists():
            return False, "broker_impl has no __main__ module yet (`python -m broker_impl` cannot run)"
        return True, f"broker_impl {cls._broker_version()} on {sys.executable}"

    @staticmethod
    def _broker_version() -> str:
        return getattr(broker_impl, "__version__", None) or "dev"

    @property
    def version(self) -> str:
        return self._broker_version()

    def _argv(self, listen: str, data_dir: Path, node_id: int, broker_configs: dict[str, str]) -> list[str]:
        argv = [
            self.python, "-m", "broker_impl",
            "--listen", listen,
            "--data-dir", str(data_dir),
            "--node-id", str(node_id),
        ]
        if "process.roles" not in broker_configs:   # a broker: the run's security (a controller
            # is reached by the brokers only, over PLAINTEXT)
            cluster = "controller.quorum.voters" in broker_configs
            broker_configs = {**security.current().embedded_broker_configs(listen, cluster), **broker_configs}
        for key, value in broker_configs.items():
            argv += ["--set", f"{key}={value}"]
        return argv + self.extra_args

    def _launch(self, topology: Topology, broker_configs: dict[str, str], workdir: Path) -> None:
        n = topology.nodes
        cluster = n > 1 or topology.controller == "dedicated"
        # As on the apache-kafka target: the internal topics exist before a case kills a node (with
        # a node down their replication factor could not be met, and no group could be found).
        self.prewarm_coordinators = cluster
        # The apache-kafka target's defaults for this node count, one node included (no initial
        # rebalance delay, 6 partitions per internal topic): both targets of a comparison start
        # from the same configs, and a group's first join is not held 3 s on one of them only.
        configs = {**cluster_broker_defaults(n), **broker_configs}
        self._plain_configs = {k: v for k, v in configs.items() if not is_fault_config(k)}
        self._arms = parse_arms(configs)
        if self._arms and self.fault_listener is None:
            self.fault_listener = FaultListener()
        ports = free_ports(n + (1 if cluster else 0))
        self._node_sets = {}
        if cluster:
            quorum = "" if topology.controller == "dedicated" else ",".join(str(i) for i in range(1, n + 1))
            controller_sets = {PROPAGATION: str(METADATA_PROPAGATION_MS),
                               **{k: v for k, v in self._plain_configs.items() if k != "advertised.listeners"},
                               "process.roles": "controller", "kconform.controller.quorum.nodes": quorum}
            self._start_node(CONTROLLER_NODE_ID, ports[n], controller_sets, workdir)
            voters = f"{CONTROLLER_NODE_ID}@{HOST}:{ports[n]}"
            for i in range(1, n + 1):
                self._node_sets[i] = {"controller.quorum.voters": voters}
        for i in range(1, n + 1):
            self._node_sets[i] = {**self._node_sets.get(i, {}), **self.node_configs.get(i, {})}
            self.addresses[i] = (HOST, ports[i - 1])   # before start: a proxy in front follows them
        for i in range(1, n + 1):
            self._start_node(i, ports[i - 1], None, workdir, announce=False)
        for i in range(1, n + 1):
            self._await_started(i)

    def _start_node(self, node_id: int, port: int, sets: dict[str, str] | None, workdir: Path,
                    announce: bool = True) -> None:
        """Start one process (a broker when ``sets`` is None: its configs now) on ``port``."""
        data_dir = workdir / f"node-{node_id}" / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        self._data_dirs[node_id] = data_dir
        self._ports[node_id] = port
        if sets is not None:
            self._fixed_sets[node_id] = sets
        proc = NodeProcess(
            self._argv(f"{HOST}:{port}", data_dir, node_id, self._sets_for(node_id)),
            workdir / f"node-{node_id}" / "broker.log",
            cwd=workdir,
            env=python_env("broker_impl"),
            stdout_pipe=True,
            fork_server=True,   # a start forks a process that imported the broker already
        )
        self.procs[node_id] = proc
        proc.start()
        if announce:
            self._await_started(node_id)

    def _await_started(self, node_id: int) -> None:
        host, port = self._await_listening(self.procs[node_id])
        if port != self._ports[node_id]:
            raise TargetStartError(f"node {node_id} listens on {host}:{port}, expected port {self._ports[node_id]}")

    def _sets_for(self, node_id: int) -> dict[str, str]:
        """Everything a process is started with now: a controller its fixed configs, a broker the
        case's (with its fault points re-armed as they stand) and its own."""
        if node_id in self._fixed_sets:
            return dict(self._fixed_sets[node_id])
        return {**self._configs_for(node_id), **self._node_sets.get(node_id, {})}

    def _configs_for(self, node_id: int) -> dict[str, str]:
        """The node's broker configs now: the case's, with the fault points that have not fired
        on this node re-armed (their skip lowered by the hits its earlier lives let pass)."""
        if not self._arms:
            return dict(self._plain_configs)
        hits = self.fault_listener.hits(node_id)
        arms = {}
        for point, arm in self._arms.items():
            passed, fired = hits.get(point, (0, False))
            if not fired:
                arms[point] = Arm(arm.action, max(0, arm.skip - passed), arm.hold_ms)
        armed = arming_configs(arms)
        if armed:
            armed[NOTIFY] = self.fault_listener.address
        return {**self._plain_configs, **armed}

    def await_fault_point(self, point: str, timeout: float) -> int:
        """Wait until an armed point fired (its notice came), then until its node has really
        stopped (pause) or died (crash) there; mark the node down. Returns the node id."""
        if self.fault_listener is None:
            raise RuntimeError(f"no fault point is armed on target {self.name!r}")
        notice = self.fault_listener.wait_reached(point, timeout)
        if notice is None:
            raise TimeoutError(f"fault point {point!r} was not reached within {timeout * 1000:.0f} ms")
        proc = self._proc(notice.node)
        if notice.action == "pause":
            if not proc.wait_stopped(SETTLE_S):
                raise TimeoutError(f"fault point {point!r} was reached but node {notice.node}'s process "
                                   f"{proc.pid} did not stop (running {proc.running()})")
        elif notice.action == "crash":
            proc.wait_exited(SETTLE_S)
        if notice.action != "hold":
            self.down.add(notice.node)
        return notice.node

    def release_hold(self, node_id: int) -> None:
        """SIGUSR1: the broker's held fault points go on (broker_impl.faults, `hold`)."""
        self._proc(node_id).signal(signal.SIGUSR1)

    def _relaunch(self, node_id: int) -> None:
        proc = self.procs[node_id]
        # The same port (clients and the case know the node by address), the same data.
        proc.argv = self._argv(f"{HOST}:{self._ports[node_id]}", self._data_dirs[node_id], node_id,
                               self._sets_for(node_id))
        proc.start()
        self._await_started(node_id)

    def _stop(self) -> None:
        """The brokers first (each hands its leaderships to the controller on the way out), then
        the controller."""
        controller = self.procs.pop(CONTROLLER_NODE_ID, None)
        try:
            super()._stop()
        finally:
            if controller is not None:
                self.procs[CONTROLLER_NODE_ID] = controller
                controller.terminate(self.stop_grace)
                self.down.add(CONTROLLER_NODE_ID)
            if self.fault_listener is not None:
                self.fault_listener.close()
                self.fault_listener = None

    def _await_listening(self, proc: NodeProcess) -> tuple[str, int]:
        """Read stdout until the `listening HOST:PORT` line (StdoutLines keeps draining it after)."""
        try:
            line = StdoutLines(proc).read_until(lambda text: bool(LISTENING.match(text)), self.ready_timeout)[-1]
        except (TimeoutError, EOFError) as exc:
            raise TargetStartError(f"embedded broker did not announce its port: {exc}") from None
        m = LISTENING.match(line)
        return m.group(1), int(m.group(2))


def serve_cluster(nodes: int, controller: str, configs: dict[str, str], workdir: Path, announce) -> None:
    """``kconform cluster``: an embedded cluster of ``nodes`` until SIGINT/SIGTERM;
    ``announce(bootstrap)`` once every node is up."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    target = EmbeddedTarget()
    try:
        announce(target.start(Topology(nodes=nodes, controller=controller), configs, workdir))
        while not stop.wait(0.5):
            dead = target.health()
            if dead:
                raise TargetStartError(f"the cluster lost a node: {dead}")
    finally:
        target.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
