"""Runner side of the driver protocol: one client driver in one OS process.

Why a process per client: the runner has to crash an application mid-call (``kill()`` sends SIGKILL to
the driver's PID) and to run zombies (a second ``ClientProcess`` with the same ``transactional.id``).
Every ``call`` returns an ``Outcome`` -- also when the driver hangs (it is killed after
``deadline_ms + grace_ms`` and the outcome is ``DRIVER_TIMEOUT``) or dies (``DRIVER_DIED``), so the
runner never blocks on a client and never has to catch exceptions from one.
"""

from __future__ import annotations

import collections
import os
import queue
import signal
import subprocess
import threading
import time
import weakref
from pathlib import Path
from typing import IO, Any, Sequence

from conformance import security, zygote
from conformance.clients.protocol import Outcome, decode_reply, encode_request
from conformance.clients.registry import CLIENTS

REPO_ROOT = Path(__file__).resolve().parents[2]

DEFAULT_DEADLINE_MS = 30_000
# Extra time the runner gives a driver beyond the op's own deadline before killing it: the driver
# answers DEADLINE_EXCEEDED by itself at deadline + ~0.5 s; a JVM in a GC pause on a 2-core machine
# needs more than that.
DEFAULT_GRACE_MS = 5_000
DEFAULT_START_TIMEOUT_MS = 60_000


class DriverStartError(RuntimeError):
    """The driver process did not come up (bad command, import error, JVM failure)."""


class ClientProcess:
    """A running client driver. Thread-safe: ``call`` is serialised; ``kill`` may come from any thread
    while a call is in progress, and that call then returns DRIVER_DIED at once."""

    # Every driver this interpreter started and has not seen end: ``kill_all`` is how an interrupted
    # run ends them (they run in their own session, so a Ctrl-C or SIGTERM never reaches them).
    _started: "weakref.WeakSet[ClientProcess]" = weakref.WeakSet()
    _started_lock = threading.Lock()
    # Set by ``kill_all``: a worker thread still inside ``start`` (its Popen done, not yet in
    # ``_started``) or one that starts a driver afterwards kills that driver at once -- without it
    # an interrupted run left a driver behind when a row's start raced the interrupt.
    _closed = False

    @classmethod
    def kill_all(cls) -> int:
        """SIGKILL every driver still running in this interpreter, and every one started from now
        on (the interpreter is ending); returns how many were killed."""
        with cls._started_lock:
            cls._closed = True
            procs = list(cls._started)
        killed = 0
        for proc in procs:
            if proc.alive:
                proc.kill()
                killed += 1
        return killed

    def __init__(self, client: str, command: Sequence[str] | None = None, *, label: str | None = None,
                 grace_ms: int = DEFAULT_GRACE_MS, env: dict[str, str] | None = None,
                 stderr_path: str | os.PathLike[str] | None = None, stderr_tail_lines: int = 400) -> None:
        """``client`` is a key of ``registry.CLIENTS``; ``command`` overrides the registry's command.
        Nothing runs until ``start()``."""
        self.client = client
        self.label = label or client
        self.grace_ms = grace_ms
        self._command = list(command) if command is not None else None
        self._env = env
        self._stderr_path = Path(stderr_path) if stderr_path else None
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=stderr_tail_lines)
        self._replies: queue.Queue[bytes | None] = queue.Queue()
        self._call_lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._next_id = 0
        self._killed = False
        self.hello: dict[str, Any] = {}
        self.startup_ms: float | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self, timeout_ms: int = DEFAULT_START_TIMEOUT_MS) -> "ClientProcess":
        """Spawn the driver and wait for its ``hello``. Raises DriverStartError if it does not answer."""
        if self._proc is not None:
            raise RuntimeError("already started")
        command = self._command
        first: list[str] = []
        if command is None:
            spec = CLIENTS[self.client]
            command = spec.command()
            first = spec.pythonpath()   # a Python library at a chosen release (python_build)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (*first, str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        env["PYTHONUNBUFFERED"] = "1"
        env.pop(security.ENV, None)
        env.update(security.current().to_env())   # the run's security: every driver (protocol.py)
        env.update(self._env or {})
        t0 = time.monotonic()
        pipes = dict(stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self._proc = None
        if zygote.enabled() and zygote.module_of(command):
            # a Python driver: forked from a zygote that imported it and its library once
            try:
                self._proc = zygote.spawn(command, env=env, cwd=os.getcwd(), **pipes)
            except OSError as exc:
                self._stderr_tail.append(f"(zygote: {exc}; started by exec)")
        if self._proc is None:
            self._proc = subprocess.Popen(
                command, env=env, **pipes,
                start_new_session=True,  # a Ctrl-C at the runner must not kill the drivers behind its back
            )
        with ClientProcess._started_lock:
            ClientProcess._started.add(self)
            closed = ClientProcess._closed
        if closed:
            self.kill()
            raise DriverStartError(f"{self.label}: the run is being interrupted; driver not started")
        threading.Thread(target=self._read_stdout, args=(self._proc.stdout,), daemon=True,
                         name=f"{self.label}-stdout").start()
        threading.Thread(target=self._read_stderr, args=(self._proc.stderr,), daemon=True,
                         name=f"{self.label}-stderr").start()
        outcome = self.call("hello", deadline_ms=timeout_ms)
        if not outcome.ok:
            self.kill()
            raise DriverStartError(
                f"{self.label} ({' '.join(command)}) did not start: {outcome.error.name}: "
                f"{outcome.error.message}\n--- stderr ---\n{self.stderr_text()}")
        self.startup_ms = (time.monotonic() - t0) * 1000
        self.hello = outcome.data
        return self

    @property
    def ops(self) -> frozenset[str]:
        """The ops the driver said in ``hello`` it implements (ops.yaml's names)."""
        return frozenset(self.hello.get("ops") or ())

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return self._proc.poll() if self._proc else None

    def kill(self) -> None:
        """SIGKILL the driver by PID, like a crashing application. Safe to call at any time."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        self._killed = True
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()

    def close(self, timeout_ms: int = 10_000) -> None:
        """Close the clients (``close`` op), end the driver by closing its stdin, kill it if it lingers."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            self.call("close", deadline_ms=timeout_ms)
        try:
            if proc.stdin and not proc.stdin.closed:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=timeout_ms / 1000)
        except subprocess.TimeoutExpired:
            self.kill()

    def __enter__(self) -> "ClientProcess":
        if self._proc is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- calls -------------------------------------------------------------------------------------
    def call(self, op: str, deadline_ms: int = DEFAULT_DEADLINE_MS, **args: Any) -> Outcome:
        """Send one request and return its outcome; never raises for driver failures."""
        with self._call_lock:
            t0 = time.monotonic()

            def elapsed() -> float:
                return (time.monotonic() - t0) * 1000

            proc = self._proc
            if proc is None:
                raise RuntimeError("call() before start()")
            if proc.poll() is not None:
                return self._died(op, elapsed())
            self._next_id += 1
            req_id = self._next_id
            line = encode_request(req_id, op, deadline_ms, args)
            try:
                assert proc.stdin is not None
                proc.stdin.write(line)
                proc.stdin.flush()
            except (BrokenPipeError, OSError):
                return self._died(op, elapsed())
            wait_until = t0 + (deadline_ms + self.grace_ms) / 1000
            while True:
                try:
                    reply = self._replies.get(timeout=max(0.0, wait_until - time.monotonic()))
                except queue.Empty:
                    self.kill()
                    return Outcome.failure(
                        op, "DRIVER_TIMEOUT",
                        f"{self.label} gave no answer to {op} within {deadline_ms} ms + {self.grace_ms} ms "
                        f"grace; killed (pid {proc.pid})", elapsed_ms=elapsed())
                if reply is None:
                    self._replies.put(None)  # keep the EOF mark for later calls
                    return self._died(op, elapsed())
                rid, outcome = decode_reply(reply, op, elapsed())
                if rid is not None and rid != req_id:
                    continue  # a late answer to an earlier request cannot be this op's outcome
                return outcome

    def _died(self, op: str, elapsed_ms: float) -> Outcome:
        proc = self._proc
        rc = None
        if proc is not None:
            try:
                rc = proc.wait(timeout=5)
            except subprocess.TimeoutExpired:  # stdout closed but the process lingers
                self.kill()
                rc = proc.wait()
        how = "killed by the runner (SIGKILL)" if self._killed else f"exited with status {rc}"
        return Outcome.failure(op, "DRIVER_DIED", f"{self.label} {how} before answering {op}",
                               elapsed_ms=elapsed_ms, returncode=rc, killed=self._killed,
                               stderr_tail=self.stderr_text(40))

    # -- pipes -------------------------------------------------------------------------------------
    def _read_stdout(self, pipe: IO[bytes]) -> None:
        for line in iter(pipe.readline, b""):
            if line.strip():
                self._replies.put(line)
        self._replies.put(None)

    def _read_stderr(self, pipe: IO[bytes]) -> None:
        sink = open(self._stderr_path, "ab") if self._stderr_path else None
        try:
            for line in iter(pipe.readline, b""):
                self._stderr_tail.append(line.decode("utf-8", "replace").rstrip("\n"))
                if sink:
                    sink.write(line)
                    sink.flush()
        finally:
            if sink:
                sink.close()

    def stderr_text(self, last: int | None = None) -> str:
        """The driver's last stderr lines (library logs, tracebacks)."""
        lines = list(self._stderr_tail)
        return "\n".join(lines[-last:] if last else lines)
