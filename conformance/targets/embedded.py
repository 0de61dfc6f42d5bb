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
"""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

from .base import TargetStartError, Topology
from .local import LocalProcessTarget
from .process import NodeProcess, StdoutLines, python_env

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
    ready_timeout = 30.0
    stop_grace = 10.0

    def __init__(self, python: str | None = None, extra_args: list[str] | None = None) -> None:
        super().__init__()
        self.python = python or sys.executable
        self.extra_args = list(extra_args or [])

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        if not _broker_main_exists():
            return False, "broker_impl has no __main__ module yet (`python -m broker_impl` cannot run)"
        return True, f"broker_impl {cls._broker_version()} on {sys.executable}"

    @staticmethod
    def _broker_version() -> str:
        try:
            import broker_impl

            return getattr(broker_impl, "__version__", None) or "dev"
        except ImportError:
            return "unknown"

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
        proc = NodeProcess(
            self._argv(f"{HOST}:0", data_dir, broker_configs),
            workdir / f"node-{NODE_ID}" / "broker.log",
            cwd=workdir,
            env=python_env("broker_impl"),
            stdout_pipe=True,
        )
        self.procs[NODE_ID] = proc
        proc.start()
        host, port = self._await_listening(proc)
        self.addresses[NODE_ID] = (host, port)
        # A restart must come back on the same port: clients and the case know it by address.
        proc.argv[proc.argv.index("--listen") + 1] = f"{host}:{port}"

    def _relaunch(self, node_id: int) -> None:
        proc = self.procs[node_id]
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
