"""`python -m MODULE ARGS` without paying for the imports each time: a fork server.

Why: a run starts hundreds of embedded broker processes (a case that kills a node, another
topology or other broker configs gets brokers of its own), and each `python -m broker_impl`
spent ~0.4 s of CPU importing trio and the broker before it served a byte -- measured on stop
46's code, a third of the whole run's CPU (docs/measurements.md). A zygote is one process per
(python, module, interpreter environment) that imports the module's code once and then forks a
child per start. The child is what `python -m MODULE ARGS` would have been: its own session,
the stdin/stdout/stderr the caller passed, the caller's working directory and environment,
`sys.argv`, and the module run as `__main__`; it is signalled (kill -9, SIGSTOP/SIGCONT,
SIGTERM) by its own PID like any process the harness started.

Two halves in one module, so that they cannot drift apart:
- `serve` runs in the zygote (`python -m conformance.zygote FD MODULE`): single-threaded (a fork
  from a threaded process can inherit a lock some other thread held), it imports MODULE's
  package, forks on each request and reaps its children, telling the caller each exit status.
- `spawn` runs in the harness and returns a `Forked`, which answers what the harness asks of a
  subprocess.Popen (pid, stdin, stdout, poll, wait, returncode). The zygote is started on first
  use and ends when the harness does (its end of the socket closes).

`KCONFORM_ZYGOTE=0` turns it off (every start a plain exec), e.g. to compare the two. A child's
CPU is not in the harness's own accounting (`time`, getrusage: the zygote, not the harness,
reaps it): measure the machine's (bench/broker_start.py) or read `Forked.cpu_s`.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

#: The PYTHON* variables decide how an interpreter starts (buffering, hash seed, import path),
#: so a zygote serves only children whose environment agrees with its own on them.
_STARTUP_VARS = ("PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE",
                 "PYTHONSAFEPATH", "PYTHONWARNINGS", "PYTHONOPTIMIZE", "PYTHONDEVMODE")
_MAX_MESSAGE = 1 << 20
#: The zygote's last argument, unused: room in its argument area for each child's command line
#: (_name_self); a longer one is shown cut.
_PADDING = " " * 16384
#: How long a start waits for the zygote's answer (it is busy importing on its first request).
START_TIMEOUT_S = 60.0


def enabled() -> bool:
    return os.environ.get("KCONFORM_ZYGOTE", "1") != "0" and hasattr(socket, "send_fds") and sys.platform == "linux"


# ================================================================ the zygote's side
def serve(fd: int, module: str) -> None:
    import gc
    import importlib
    import importlib.util
    import select
    import signal

    sock = socket.socket(fileno=fd)
    imported = importlib.import_module(module)   # a package's __main__, or the module, runs in each child
    main_spec = importlib.util.find_spec(f"{module}.__main__") if hasattr(imported, "__path__") else None
    if main_spec is not None:
        # what __main__ imports (the cli and everything under it), without running it
        for name in _imports_of(main_spec, module):
            importlib.import_module(name)
    import ctypes  # noqa: F401 -- for _name_self, in every child
    gc.collect()
    gc.freeze()                           # the children's collections leave these pages shared

    wake_r, wake_w = os.pipe()
    for end in (wake_r, wake_w):
        os.set_blocking(end, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the harness decides when we end

    #: each running child's request id: PIDs are reused (they wrap within one long run), so an
    #: exit is told by the request that started the child, never by its PID alone
    started: dict[int, int] = {}

    def send(message: dict) -> None:
        try:
            sock.sendmsg([json.dumps(message).encode()])
        except OSError:
            pass

    while True:
        try:
            ready, _, _ = select.select([sock, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        while True:                        # reap every child that ended
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            send({"exited": started.pop(pid, None), "pid": pid, "code": os.waitstatus_to_exitcode(status),
                  "cpu_s": usage.ru_utime + usage.ru_stime})
        if sock in ready:
            try:
                data, fds, _, _ = socket.recv_fds(sock, _MAX_MESSAGE, 8)
            except OSError:
                data, fds = b"", []
            if not data:                   # the harness ended: so do we (a child still running lives on)
                return
            request = json.loads(data)
            try:
                pid = os.fork()
            except OSError as exc:
                for f in fds:
                    os.close(f)
                send({"id": request["id"], "error": f"fork failed: {exc}"})
                continue
            if pid == 0:
                _child(request, fds, sock, (wake_r, wake_w))   # never returns
            for f in fds:
                os.close(f)
            started[pid] = request["id"]
            send({"id": request["id"], "pid": pid})


def _imports_of(spec, package: str) -> list[str]:
    """The modules a `__main__` imports from its own package (``from .cli import main``),
    read from its source: importing them in the zygote is what the children then skip."""
    import ast
    try:
        tree = ast.parse(Path(spec.origin).read_text())
    except (OSError, SyntaxError, TypeError):
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:
                names.append(f"{package}.{node.module}" if node.module else package)
            elif node.level == 0 and node.module:
                names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return names


def _name_self(module: str, argv: list[str]) -> None:
    """Make /proc/self/cmdline (ps, pgrep, a test looking for a run's brokers) show `argv`, the
    command line this child stands for, not the zygote's: it is written over the zygote's own
    argument area, which the zygote's padding argument made large enough (what setproctitle
    does); and /proc/self/comm (top, perf) the module's last name."""
    import ctypes
    try:
        with open("/proc/self/comm", "w") as fh:
            fh.write(module.rsplit(".", 1)[-1][:15])
        with open("/proc/self/stat", "rb") as fh:
            stat = fh.read()
        fields = stat[stat.rfind(b")") + 2:].split()     # fields[0] is stat's 3rd field
        start, end = int(fields[45]), int(fields[46])      # arg_start, arg_end (stat's 48th, 49th)
    except (OSError, ValueError, IndexError):
        return
    text = b"\0".join(a.encode(errors="replace") for a in argv)[:end - start - 1]
    ctypes.memmove(start, text + b"\0" * (end - start - len(text)), end - start)


def _child(request: dict, fds: list[int], sock: socket.socket, wake: tuple[int, int]) -> None:
    """In the forked child: become `python -m MODULE ARGS` and exit with its status."""
    import runpy
    import signal
    import traceback

    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sock.close()
        for end in wake:
            os.close(end)
        os.setsid()
        _name_self(request["module"], request["argv"])
        for target, f in enumerate(fds[:3]):
            os.dup2(f, target)
        for f in fds:
            if f > 2:
                os.close(f)
        if request.get("cwd"):
            os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [request["module"], *request["args"]]
        try:
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code
            else:
                print(exc.code, file=sys.stderr)
                code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code & 0xFF if code >= 0 else 1)


# ================================================================ the harness's side
class Forked:
    """A child of a zygote, seen as the harness sees a subprocess.Popen."""

    def __init__(self, zygote: "Zygote", start: int, pid: int, stdin, stdout, stderr) -> None:
        self._zygote = zygote
        self._start = start   # the request that started it: what its exit is told by
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None

    @property
    def cpu_s(self) -> float | None:
        """The CPU seconds the child used, once it ended (bench/broker_start.py)."""
        return self._zygote.cpu.get(self._start)

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._zygote.exit_code(self._start, self.pid, 0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            code = self._zygote.exit_code(self._start, self.pid, timeout)
            if code is None:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout)
            self.returncode = code
        return self.returncode


class Zygote:
    def __init__(self, python: str, module: str, env: dict[str, str]) -> None:
        self.module = module
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        root = str(Path(__file__).resolve().parent.parent)
        zenv = dict(env)
        zenv["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        try:
            self.proc = subprocess.Popen([python, "-m", "conformance.zygote", str(theirs.fileno()), module, _PADDING],
                                         env=zenv, pass_fds=[theirs.fileno()], start_new_session=True,
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        finally:
            theirs.close()
        self.sock = ours
        self._send_lock = threading.Lock()
        self._cond = threading.Condition()
        self._answers: dict[int, dict] = {}
        #: exit code of each ended child, by the id of the request that started it
        self._exits: dict[int, int] = {}
        #: CPU seconds of each ended child, by the same id
        self.cpu: dict[int, float] = {}
        self._next = 0
        self.alive = True
        threading.Thread(target=self._read, name=f"zygote-{module}", daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(_MAX_MESSAGE)
            except OSError:
                data = b""
            with self._cond:
                if not data:
                    self.alive = False
                    self._cond.notify_all()
                    return
                message = json.loads(data)
                if "exited" in message:
                    if message["exited"] is not None:
                        self._exits[message["exited"]] = message["code"]
                        self.cpu[message["exited"]] = message["cpu_s"]
                else:
                    self._answers[message["id"]] = message
                self._cond.notify_all()

    def spawn(self, argv: list[str], env: dict[str, str], cwd: str | None, stdio: list[int]) -> tuple[int, int]:
        """(the request's id, the child's PID)."""
        args = module_of(argv)[2]
        with self._cond:
            self._next += 1
            rid = self._next
        request = {"id": rid, "module": self.module, "args": args, "env": env, "cwd": cwd, "argv": argv}
        with self._send_lock:
            socket.send_fds(self.sock, [json.dumps(request).encode()], stdio)
        with self._cond:
            if not self._cond.wait_for(lambda: rid in self._answers or not self.alive, START_TIMEOUT_S):
                raise OSError(f"the {self.module} zygote did not answer within {START_TIMEOUT_S:.0f}s")
            answer = self._answers.pop(rid, None)
        if answer is None:
            raise OSError(f"the {self.module} zygote ended")
        if "error" in answer:
            raise OSError(answer["error"])
        return rid, answer["pid"]

    def exit_code(self, start: int, pid: int, timeout: float | None) -> int | None:
        """The child's exit code once the zygote reaped it; None while it runs after `timeout`.
        Should the zygote itself be gone, nobody reaps or tells: the child's PID is watched
        instead, and a child that no longer runs counts as killed (-9)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while start not in self._exits and self.alive:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cond.wait(left)
            if start in self._exits:
                return self._exits[start]
        while True:
            try:
                with open(f"/proc/{pid}/stat", "rb") as fh:
                    stat = fh.read()
            except OSError:               # reaped by init
                return -9
            if stat[stat.rfind(b")") + 2:][:1] in (b"Z", b"X"):   # ended, not reaped yet
                return -9
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(0.05)


_zygotes: dict[tuple, Zygote] = {}
_lock = threading.Lock()



def zygote_for(python: str, module: str, env: dict[str, str]) -> Zygote:
    key = (python, module, tuple((k, env.get(k)) for k in _STARTUP_VARS))
    with _lock:
        z = _zygotes.get(key)
        if z is None or not z.alive or z.proc.poll() is not None:
            z = _zygotes[key] = Zygote(python, module, env)
        return z


def module_of(argv: list[str]) -> tuple[str, str, list[str]] | None:
    """(python, module, args) when `argv` is `PYTHON -m MODULE ARGS...`, else None."""
    if len(argv) >= 3 and argv[1] == "-m" and Path(argv[0]).name.startswith("python"):
        return argv[0], argv[2], list(argv[3:])
    return None


def spawn(argv: list[str], *, env: dict[str, str] | None, cwd: Path | None, stdin, stdout, stderr) -> Forked:
    """Start `argv` (PYTHON -m MODULE ARGS) as a zygote's child. stdin/stdout/stderr: a file
    object, subprocess.PIPE or subprocess.DEVNULL, as for Popen. OSError when it could not."""
    python, module, _ = module_of(argv)
    env = dict(os.environ if env is None else env)
    zygote = zygote_for(python, module, env)
    theirs: list[int] = []
    ours: dict[str, object] = {"stdin": None, "stdout": None, "stderr": None}
    opened: list[int] = []
    try:
        for index, (name, spec, mode) in enumerate((("stdin", stdin, "wb"), ("stdout", stdout, "rb"),
                                                     ("stderr", stderr, "rb"))):
            if spec is None:                 # inherited, as Popen does
                theirs.append(index)
            elif spec == subprocess.PIPE:
                r, w = os.pipe()
                mine, child = (w, r) if name == "stdin" else (r, w)
                ours[name] = os.fdopen(mine, mode)
                theirs.append(child)
                opened.append(child)
            elif spec == subprocess.DEVNULL:
                f = os.open(os.devnull, os.O_RDWR)
                theirs.append(f)
                opened.append(f)
            else:
                theirs.append(spec.fileno())
        start, pid = zygote.spawn(list(argv), env, str(cwd) if cwd else None, theirs)
    except BaseException:
        for f in ours.values():
            if f is not None:
                f.close()
        raise
    finally:
        for f in opened:
            os.close(f)
    return Forked(zygote, start, pid, ours["stdin"], ours["stdout"], ours["stderr"])


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2])   # sys.argv[3]: _PADDING
