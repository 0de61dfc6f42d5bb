"""One broker process that a target started: start, signal, wait, restart -- always by its PID.

Why: node control (kill -9, SIGSTOP/SIGCONT, restart with the same data) is the same for every
target that runs local processes; only the command line differs. Each process runs in its own
session so that a Ctrl-C in the terminal reaches the harness, not the brokers, and the harness
decides what happens to them. Nothing here looks a process up by name: we only ever signal the
PID that Popen gave us.
"""
from __future__ import annotations

import importlib.util
import os
import queue
import random
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable

from .. import zygote


def python_env(package: str) -> dict[str, str]:
    """Our environment for a `python -m` child, with the directory holding `package` first on
    PYTHONPATH: the harness may import it from a source tree that is not installed, and the
    child must then find the very same code, whatever its working directory."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    spec = importlib.util.find_spec(package)
    if spec is not None and spec.origin:
        root = str(Path(spec.origin).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


#: Where free_ports() picks from: below the kernel's ephemeral range, from here up.
PORT_FLOOR = 10_000
_handed_out: set[int] = set()
_ports_lock = threading.Lock()


def _listen_range() -> tuple[int, int] | None:
    """Ports that no outgoing connection on this machine is given: those below the kernel's
    ephemeral range (Linux), when at least 4096 of them are above PORT_FLOOR; else None."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as fh:
            low = int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return (PORT_FLOOR, low - 1) if low - PORT_FLOOR >= 4096 else None


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """Ports free right now (held open together so they are distinct), for a target's nodes.

    Why not simply the kernel's pick (bind port 0): that is an ephemeral port, the same range every
    client's outgoing connection takes its local port from -- and a node killed and restarted on
    its port then found it taken by some driver's connection in between ("Address already in use",
    measured: one row in 330 of the library on embedded). So the ports come from below that range,
    at random, and never one this process handed out before (a killed node's port stays its own);
    where there is no such range, the kernel's pick. A port can still be taken between this call
    and the broker's bind by a process outside the harness; the start then fails loudly.
    """
    span = _listen_range()
    chosen: list[int] = []
    socks = []
    try:
        with _ports_lock:
            if span is not None:
                if len(_handed_out) > (span[1] - span[0]) // 2:
                    _handed_out.clear()   # a very long session: start over rather than run dry
                for _ in range(50 * count):
                    if len(chosen) == count:
                        break
                    port = random.randint(*span)
                    if port in _handed_out or port in chosen:
                        continue
                    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    try:
                        s.bind((host, port))
                    except OSError:
                        s.close()
                        continue
                    socks.append(s)
                    chosen.append(port)
            while len(chosen) < count:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.bind((host, 0))
                socks.append(s)
                chosen.append(s.getsockname()[1])
            _handed_out.update(chosen)
        return chosen
    finally:
        for s in socks:
            s.close()


def process_state(pid: int | None) -> str | None:
    """The state letter of /proc/PID/stat (R running, S sleeping, T stopped, Z zombie, ...);
    None when the process is gone or this is not Linux."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    # "PID (comm) S ...": comm may hold spaces and parentheses, the state follows the last ')'.
    rest = stat[stat.rfind(b")") + 1:].split()
    return rest[0].decode() if rest else None


def port_accepts(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class NodeProcess:
    """A broker process: its argv is fixed at construction so a restart repeats it exactly.

    stdout and stderr are appended to `log_path` unless the caller asks for stdout as a pipe
    (the embedded broker announces its port on stdout). stdin is empty unless the caller asks
    for a pipe (the librdkafka mock host takes its commands there).
    """

    def __init__(
        self,
        argv: list[str],
        log_path: Path,
        *,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        stdout_pipe: bool = False,
        stdin_pipe: bool = False,
        fork_server: bool = False,
    ) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        self.cwd = cwd
        self.env = env
        self.stdout_pipe = stdout_pipe
        self.stdin_pipe = stdin_pipe
        #: start as a child of a zygote that imported the module already (argv: PYTHON -m MODULE)
        self.fork_server = fork_server
        #: subprocess.Popen, or zygote.Forked (the same answers)
        self.popen: subprocess.Popen | zygote.Forked | None = None
        self.paused = False
        self._log_file = None

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    def start(self) -> None:
        if self.running():
            raise RuntimeError(f"process {self.pid} is still running")
        self._close_log()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = open(self.log_path, "ab")
        self._log_file.write(f"\n=== start {time.strftime('%H:%M:%S')}: {' '.join(self.argv)}\n".encode())
        self._log_file.flush()
        stdio = dict(stdin=subprocess.PIPE if self.stdin_pipe else subprocess.DEVNULL,
                     stdout=subprocess.PIPE if self.stdout_pipe else self._log_file,
                     stderr=self._log_file)
        self.popen = None
        if self.fork_server and zygote.enabled() and zygote.module_of(self.argv):
            try:
                self.popen = zygote.spawn(self.argv, env=self.env, cwd=self.cwd, **stdio)
            except OSError as exc:   # no zygote to be had: a plain start, and the log says why
                self._log_file.write(f"(zygote: {exc}; started by exec)\n".encode())
                self._log_file.flush()
        if self.popen is None:
            self.popen = subprocess.Popen(self.argv, cwd=self.cwd, env=self.env, start_new_session=True, **stdio)
        self.paused = False

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def returncode(self) -> int | None:
        return self.popen.poll() if self.popen else None

    def signal(self, sig: int) -> None:
        """Send the process a signal (RuntimeError when it is not running)."""
        self._signal(sig)

    def _signal(self, sig: int) -> None:
        if not self.running():
            raise RuntimeError(f"process {self.pid} is not running")
        os.kill(self.popen.pid, sig)

    def kill(self) -> None:
        """SIGKILL and reap: the process gets no chance to flush or say goodbye."""
        if self.running():
            os.kill(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=30)
        self.paused = False

    def pause(self) -> None:
        """SIGSTOP, and return once the kernel shows the process stopped (a signal is delivered
        asynchronously: a loaded machine let a request be answered after pause() returned)."""
        self._signal(signal.SIGSTOP)
        self.paused = True
        deadline = time.monotonic() + 5
        while self.running() and process_state(self.pid) not in ("T", "t") and time.monotonic() < deadline:
            time.sleep(0.005)

    def wait_stopped(self, timeout: float) -> bool:
        """After the process stopped ITSELF (SIGSTOP at a fault point): wait until the kernel
        shows it stopped, then treat it as paused (a resume continues it, a terminate sends
        SIGCONT with its SIGTERM). False if it is still running after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while self.running():
            if process_state(self.pid) in ("T", "t"):
                self.paused = True
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return False

    def wait_exited(self, timeout: float) -> bool:
        """After the process ended itself (a crash at a fault point): reap it within `timeout`."""
        if self.popen is None:
            return True
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def resume(self) -> None:
        self._signal(signal.SIGCONT)
        self.paused = False

    def terminate(self, grace: float = 10.0) -> None:
        """SIGTERM (clean shutdown), SIGKILL if it has not exited after `grace` seconds.

        A stopped process would not act on SIGTERM, so it is continued first.
        """
        if not self.running():
            self._close_log()
            return
        os.kill(self.popen.pid, signal.SIGTERM)
        if self.paused:
            os.kill(self.popen.pid, signal.SIGCONT)
            self.paused = False
        try:
            self.popen.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.kill()
        self._close_log()

    def send_terminate(self) -> None:
        """SIGTERM without waiting, so that several nodes can shut down in parallel."""
        if self.running():
            os.kill(self.popen.pid, signal.SIGTERM)
            if self.paused:
                os.kill(self.popen.pid, signal.SIGCONT)
                self.paused = False

    def wait_or_kill(self, deadline: float) -> None:
        """After send_terminate(): wait until `deadline` (monotonic), then SIGKILL."""
        if self.popen is None:
            return
        try:
            self.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()
        self._close_log()

    def _close_log(self) -> None:
        if self._log_file is not None and not self.running():
            self._log_file.close()
            self._log_file = None

    def rss_bytes(self) -> int | None:
        """Resident set size from /proc (Linux), None when not running."""
        if not self.running():
            return None
        try:
            with open(f"/proc/{self.popen.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


class StdoutLines:
    """The lines a started NodeProcess(stdout_pipe=True) prints, read on a thread.

    Why a thread: a wait for a line must be bounded even when the process prints nothing, and
    stdout must be drained for as long as the process lives so a full pipe never blocks it.
    Every line is also appended to the node log (prefixed ``[stdout]``), so the log shows what
    the process announced among its stderr.
    """

    def __init__(self, proc: NodeProcess) -> None:
        self.proc = proc
        self._lines: queue.Queue[str | None] = queue.Queue()
        stdout, log_path = proc.popen.stdout, proc.log_path

        def pump() -> None:
            with open(log_path, "ab") as log:
                for raw in iter(stdout.readline, b""):
                    log.write(b"[stdout] " + raw)
                    log.flush()
                    self._lines.put(raw.decode(errors="replace").rstrip("\r\n"))
            self._lines.put(None)

        threading.Thread(target=pump, name=f"stdout-{proc.pid}", daemon=True).start()

    def read_until(self, last: Callable[[str], bool], timeout: float) -> list[str]:
        """Lines up to and including the first one for which last(line) is true.

        TimeoutError when none came within `timeout` seconds; EOFError when stdout closed first
        (the process exited). Both messages carry the lines seen and the node log's tail.
        """
        deadline = time.monotonic() + timeout
        seen: list[str] = []
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"no awaited line on stdout within {timeout:.0f}s; stdout so far: "
                                   f"{seen!r}\n{self.proc.log_tail()}") from None
            if line is None:
                self._lines.put(None)  # later readers see the end too
                try:
                    self.proc.popen.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
                raise EOFError(f"the process exited (code {self.proc.returncode()}) before the awaited line; "
                               f"stdout so far: {seen!r}\n{self.proc.log_tail()}")
            seen.append(line)
            if last(line):
                return seen
