"""Target `embedded`: the project's own trio broker (broker_impl), run as a subprocess.

Why a subprocess and not in-process: kill -9 and SIGSTOP must mean the same as for the real
broker (no flush, no goodbye), and a crash in the broker must not take the harness with it.

Contract with broker_impl (the broker implements it):
  argv   [python, -m, broker_impl, --listen, 127.0.0.1:0, --data-dir, DIR, --node-id, N,
          --set, key=value, ...]
  stdout exactly one line `listening 127.0.0.1:PORT`, flushed, once it accepts connections;
  stderr logs (we append them to a file in the workdir);
  SIGTERM clean shutdown; restart = the same argv with --listen 127.0.0.1:PORT (same port).
Broker configs (including fault points, which the broker reads from its configs) are passed
with --set. Single node for now.

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
from pathlib import Path

import broker_impl
from broker_impl.faults import NOTIFY, Arm, arming_configs, is_fault_config, parse_arms
from broker_impl.faults.channel import FaultListener

from .base import TargetStartError, Topology
from .local import LocalProcessTarget
from .process import NodeProcess, StdoutLines, python_env

#: Seconds a node gets, after it said it reached a point, to stop or die there.
SETTLE_S = 5.0

HOST = "127.0.0.1"
LISTENING = re.compile(r"^listening (\S+):(\d+)\s*$")
NODE_ID = 1


def _broker_main_exists() -> bool:
    try:
        return importlib.util.find_spec("broker_impl.__main__") is not None
    except ImportError:
        return False


class EmbeddedTarget(LocalProcessTarget):
    name = "embedded"
    static_capabilities = frozenset({"kill", "pause", "restart", "stop_node", "fault_points"})
    advertises_listeners = True
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

    def _argv(self, listen: str, data_dir: Path, broker_configs: dict[str, str]) -> list[str]:
        argv = [
            self.python, "-m", "broker_impl",
            "--listen", listen,
            "--data-dir", str(data_dir),
            "--node-id", str(NODE_ID),
        ]
        for key, value in broker_configs.items():
            argv += ["--set", f"{key}={value}"]
        return argv + self.extra_args

    def _launch(self, topology: Topology, broker_configs: dict[str, str], workdir: Path) -> None:
        data_dir = workdir / f"node-{NODE_ID}" / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        self._plain_configs = {k: v for k, v in broker_configs.items() if not is_fault_config(k)}
        self._arms = parse_arms(broker_configs)
        if self._arms and self.fault_listener is None:
            self.fault_listener = FaultListener()
        proc = NodeProcess(
            self._argv(f"{HOST}:0", data_dir, self._configs_for(NODE_ID)),
            workdir / f"node-{NODE_ID}" / "broker.log",
            cwd=workdir,
            env=python_env("broker_impl"),
            stdout_pipe=True,
        )
        self.procs[NODE_ID] = proc
        proc.start()
        host, port = self._await_listening(proc)
        self.addresses[NODE_ID] = (host, port)
        self._data_dirs[NODE_ID] = data_dir

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

    def _stop(self) -> None:
        super()._stop()
        if self.fault_listener is not None:
            self.fault_listener.close()
            self.fault_listener = None

    def _relaunch(self, node_id: int) -> None:
        proc = self.procs[node_id]
        # The same port (clients and the case know the node by address), the same data.
        host, port = self.addresses[node_id]
        proc.argv = self._argv(f"{host}:{port}", self._data_dirs[node_id], self._configs_for(node_id))
        proc.start()
        host, port = self._await_listening(proc)
        if (host, port) != self.addresses[node_id]:
            raise TargetStartError(f"restarted broker listens on {host}:{port}, expected {self.addresses[node_id]}")

    def _await_listening(self, proc: NodeProcess) -> tuple[str, int]:
        """Read stdout until the `listening HOST:PORT` line (StdoutLines keeps draining it after)."""
        try:
            line = StdoutLines(proc).read_until(lambda text: bool(LISTENING.match(text)), self.ready_timeout)[-1]
        except (TimeoutError, EOFError) as exc:
            raise TargetStartError(f"embedded broker did not announce its port: {exc}") from None
        m = LISTENING.match(line)
        return m.group(1), int(m.group(2))
