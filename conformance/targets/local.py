"""Node control shared by the targets that run broker processes on this machine.

Why a separate layer: kill / pause / resume / stop_node / restart / stop mean the same for the
real Kafka broker, Tansu and the embedded broker -- signals to a PID we started, and a restart
that repeats the exact command line (same data dir, same ports). Only how a node is launched and
how its readiness is seen differ, and those stay in each target's module.
"""
from __future__ import annotations

import time
from pathlib import Path

from .base import Target
from .process import NodeProcess


class LocalProcessTarget(Target):
    #: Seconds a node gets to shut down cleanly on SIGTERM (stop_node) before SIGKILL.
    stop_grace: float = 10.0
    #: The same for stop() of the whole target, when every node goes at once (None: stop_grace).
    cluster_stop_grace: float | None = None

    def __init__(self) -> None:
        super().__init__()
        self.procs: dict[int, NodeProcess] = {}

    def _proc(self, node_id: int) -> NodeProcess:
        try:
            return self.procs[node_id]
        except KeyError:
            raise KeyError(f"target {self.name!r} has no node {node_id}; nodes: {self.node_ids()}") from None

    def _check_exact(self, node_id: int, action: str) -> None:
        """Raise NotApplicable where signalling the node's process is not exactly that node's
        fault (several nodes share one process); by default it always is."""

    def kill(self, node_id: int) -> None:
        """SIGKILL of that node's process; it stays down until restart()."""
        self.require("kill", "kill a node")
        self._check_exact(node_id, "kill")
        self._proc(node_id).kill()
        self.down.add(node_id)

    def pause(self, node_id: int) -> None:
        """SIGSTOP: the node holds its sockets but answers nothing (a long GC pause, a VM freeze)."""
        self.require("pause", "pause a node")
        self._check_exact(node_id, "pause")
        self._proc(node_id).pause()
        self.down.add(node_id)

    def resume(self, node_id: int) -> None:
        self.require("pause", "resume a node")
        self._check_exact(node_id, "resume")
        self._proc(node_id).resume()
        self.down.discard(node_id)

    def stop_node(self, node_id: int) -> None:
        """Clean shutdown (SIGTERM) of one node; it stays down until restart()."""
        self.require("stop_node", "stop a single node")
        self._check_exact(node_id, "stop")
        self._proc(node_id).terminate(self.stop_grace)
        self.down.add(node_id)

    def restart(self, node_id: int, timeout: float | None = None) -> None:
        """Start the node again with the same command line (data dir, ports); wait until it rejoins.

        A node that is still running is stopped cleanly first.
        """
        self.require("restart", "restart a node")
        self._check_exact(node_id, "restart")
        proc = self._proc(node_id)
        if proc.running():
            proc.terminate(self.stop_grace)
        self._relaunch(node_id)
        try:
            self.wait_node_ready(node_id, timeout)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}\n--- log tail of node {node_id}:\n{proc.log_tail()}") from None
        self.down.discard(node_id)

    def _relaunch(self, node_id: int) -> None:
        """Start the node's process again; targets with a start-up handshake override this."""
        self._proc(node_id).start()

    def _stop(self) -> None:
        """SIGTERM to every running node at once, SIGKILL to those still alive after the grace."""
        for proc in self.procs.values():
            proc.send_terminate()
        grace = self.stop_grace if self.cluster_stop_grace is None else self.cluster_stop_grace
        deadline = time.monotonic() + grace
        for proc in self.procs.values():
            proc.wait_or_kill(deadline)
        self.down.update(self.procs)

    def exited(self) -> str | None:
        for node_id, proc in sorted(self.procs.items()):
            if node_id not in self.down and not proc.running():
                return f"node {node_id}'s process {proc.pid} exited with code {proc.returncode()}"
        return None

    def health(self) -> str | None:
        return self.exited() or super().health()

    def last_words(self, lines: int = 20) -> str:
        return "\n".join(f"--- node {node_id} ({proc.log_path.name}):\n{proc.log_tail(lines)}"
                         for node_id, proc in sorted(self.procs.items()) if proc.log_path.exists())

    def log_files(self) -> list[Path]:
        return [p.log_path for p in self.procs.values() if p.log_path.exists()]

    def rss_bytes(self) -> dict[int, int]:
        out = {}
        for node_id, proc in sorted(self.procs.items()):
            rss = proc.rss_bytes()
            if rss is not None:
                out[node_id] = rss
        return out
