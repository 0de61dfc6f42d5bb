"""Named fault points: places in the broker's code where a test can make it die or stop.

Why: a conformance case says "the coordinator crashes (or freezes) after PrepareCommit is
durable"; real Kafka can only approximate that with kill -9 / SIGSTOP at a lucky moment, the
embedded broker can do it exactly. Each point is a line ``if FAULTS.armed: await
FAULTS.reach(NAME)`` in the code, NAME one of the point constants below (never a string
literal): when nothing is armed the cost is one attribute read.

Arming (broker configs, so ``--set`` on the command line works, and so does the control path
:meth:`FaultPoints.configure`, which an AlterConfigs handler may call with ``kconform.fault*``
keys):

- ``kconform.fault``              comma-separated point names (see :data:`POINTS`)
- ``kconform.fault.action``       what happens when a point fires, for every listed point:
  ``crash`` (default) -- ``os._exit`` at once, nothing flushed beyond what is already durable;
  ``pause`` -- the process SIGSTOPs itself, as a long GC pause or a frozen VM would: every task,
  timer and socket stops, and a SIGCONT from outside (the harness's ``resume``) continues
  exactly where it stopped; or
  ``hold`` -- only the coroutine at the point waits (until released, disarmed or ``hold.ms``)
  while the rest of the broker keeps answering, which makes a pending transition visible to
  clients; SIGUSR1 releases it (the harness's ``release``: a signal, because the broker is a
  process of its own and the point may sit on any of its paths)
- ``kconform.fault.skip``         let the first N hits of a point pass (default 0): a point
  fires once, at hit N+1, and every later hit passes
- ``kconform.fault.hold.ms``      how long a ``hold`` lasts (default -1: until disarmed)
- ``kconform.fault.<point>.action`` / ``.skip`` / ``.hold.ms``  the same for one point,
  over the defaults above (so one case can pause at one point and crash at another)
- ``kconform.fault.exit.code``    exit status of a crash (default 86)
- ``kconform.fault.notify``       ``127.0.0.1:PORT``: where to send a notice of every hit
  (:mod:`.channel`)

Every hit of an armed point is told twice, before the point acts: a notice on the harness's
channel (``reached`` when it fires, ``passed`` when it lets the hit pass -- the harness waits on
these, and counts them to re-arm a restarted broker), and one flushed line in the broker's own
log for people (``kconform fault point <name> reached: <action>``). A crash or a stop therefore
always comes after the harness was told, so a planned death or freeze is never taken for a bug.
:func:`arming_configs` writes the configs above from :class:`Arm` values, so the config
spelling lives here only.
"""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass

import trio

from .channel import FaultNotice, NoticeSender

#: Every fault point the broker has, and where it sits (filled by _point, below).
POINTS: dict[str, str] = {}


def _point(name: str, where: str) -> str:
    if name in POINTS:
        raise ValueError(f"fault point {name!r} defined twice")
    POINTS[name] = where
    return name


# The points, as the names the broker's code reaches them by (``FAULTS.reach(AFTER_COMPLETE)``,
# imported from here): a misspelt name is an ImportError when the module that reaches it loads,
# never a point that silently does nothing (tests/unit/faults/test_fault_point_names.py also
# checks that every point is reached, and reached only by its constant).
BEFORE_PREPARE_APPEND = _point("before_prepare_append",
                               "EndTxn accepted, PrepareCommit/PrepareAbort not yet appended to the txn log")
AFTER_PREPARE_DURABLE = _point("after_prepare_durable", "Prepare* appended to the txn log (and replicated), no marker written yet")
AFTER_SOME_MARKERS = _point("after_some_markers", "at least one marker written, at least one still to write")
AFTER_ALL_MARKERS = _point("after_all_markers", "every marker written, Complete* not yet appended")
AFTER_COMPLETE = _point("after_complete", "Complete* appended to the txn log (and replicated)")
BEFORE_END_TXN_RESPONSE = _point("before_end_txn_response", "EndTxn about to be answered (its outcome is decided)")

CRASH = "crash"
PAUSE = "pause"
HOLD = "hold"
ACTIONS = (CRASH, PAUSE, HOLD)

#: The log lines a point writes when it fires / lets a hit pass (for people reading the log).
REACHED_LINE = "kconform fault point {point} reached: {action}"
PASSED_LINE = "kconform fault point {point} passed (hit {hit})"
#: The config naming the harness's notice channel (HOST:PORT).
NOTIFY = "kconform.fault.notify"


@dataclass(frozen=True)
class Arm:
    """How one armed point acts: what it does, and how many hits it lets pass first."""

    action: str = CRASH
    skip: int = 0
    hold_ms: int = -1


def _say(line: str) -> None:
    """One line to stderr, flushed now: it must be in the log before a crash or a stop."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - a fault point must act even if stderr is gone
        pass


class FaultPoints:
    def __init__(self) -> None:
        self.armed = False
        self.arms: dict[str, Arm] = {}
        self.exit_code = 86
        self.hits: dict[str, int] = {}
        self.node_id = 0
        self._release: trio.Event | None = None
        self._hold_token: trio.lowlevel.TrioToken | None = None
        self._notices: NoticeSender | None = None

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.arms)

    def configure(self, values: dict[str, str]) -> None:
        """Arm or disarm from ``kconform.fault*`` config values (unknown names raise)."""
        arms = parse_arms(values)
        exit_code = int(values.get("kconform.fault.exit.code", "86"))
        notify = values.get(NOTIFY)
        if self._notices is not None:
            self._notices.close()
        self._notices = NoticeSender(notify) if notify and arms else None
        self.node_id = int(values.get("node.id", "0") or 0)
        self.arms = arms
        self.exit_code = exit_code
        self.hits = {}
        was_armed = self.armed
        self.armed = bool(arms)
        if was_armed and not self.armed and self._release is not None:
            self._release.set()
            self._release = None
        if any(a.action == HOLD for a in arms.values()):
            _on_signal(signal.SIGUSR1, self._release_signal)

    def _release_signal(self, signum, frame) -> None:
        """SIGUSR1: let a held point go on. It runs between two bytecodes of the trio thread, so
        the event is set from the loop (run_sync_soon is safe from a signal handler)."""
        event, token = self._release, self._hold_token
        if event is not None and token is not None:
            self._release = None
            try:
                token.run_sync_soon(event.set)
            except trio.RunFinishedError:
                pass

    def disarm(self) -> None:
        self.configure({})

    async def reach(self, name: str, detail: str = "") -> None:
        """Called at fault point ``name``; crashes, stops or holds when it fires."""
        arm = self.arms.get(name)
        if arm is None:
            return
        n = self.hits.get(name, 0) + 1
        self.hits[name] = n
        if n <= arm.skip:
            self._tell(FaultNotice(name, "passed", arm.action, n, self.node_id, os.getpid()))
            _say(PASSED_LINE.format(point=name, hit=n))
            return
        if n > arm.skip + 1:
            return  # fired once already
        release = None
        if arm.action == HOLD:
            # ready before the notice: a release sent as soon as the harness hears of the hold
            # must find it
            if self._release is None:
                self._release = trio.Event()
                self._hold_token = trio.lowlevel.current_trio_token()
            release = self._release
        self._tell(FaultNotice(name, "reached", arm.action, n, self.node_id, os.getpid(), detail))
        _say(f"{REACHED_LINE.format(point=name, action=arm.action)} {detail}".rstrip())
        if arm.action == CRASH:
            os._exit(self.exit_code)
        if arm.action == PAUSE:
            # The whole process stops here; kill() returns only once someone sends SIGCONT,
            # and the coroutine then carries on from this very line.
            os.kill(os.getpid(), signal.SIGSTOP)
            _say(f"kconform fault point {name} continued")
            return
        if arm.hold_ms < 0:
            await release.wait()
        else:
            with trio.move_on_after(arm.hold_ms / 1000.0):
                await release.wait()
        _say(f"kconform fault point {name} released")

    def _tell(self, notice: FaultNotice) -> None:
        if self._notices is not None:
            self._notices.send(notice)


def _on_signal(signum: int, handler) -> None:
    """Install a signal handler where Python allows it (the main thread); a broker run in a
    thread of a test process cannot be released by signal, and needs none."""
    try:
        signal.signal(signum, handler)
    except ValueError:
        pass


#: The settings a point takes, globally (kconform.fault.X) or per point (kconform.fault.<point>.X).
_SETTINGS = ("action", "skip", "hold.ms")


def parse_arms(values: dict[str, str]) -> dict[str, Arm]:
    """The armed points a config map asks for (ValueError names a wrong key or value)."""
    names = [n.strip() for n in values.get("kconform.fault", "").split(",") if n.strip()]
    unknown = [n for n in names if n not in POINTS]
    if unknown:
        raise ValueError(f"unknown fault point(s) {unknown}; known: {sorted(POINTS)}")
    for key in values:
        if not key.startswith("kconform.fault."):
            continue
        rest = key[len("kconform.fault."):]
        if rest in _SETTINGS or rest in ("exit.code", "notify"):
            continue
        point, _, setting = rest.partition(".")
        if point not in POINTS or setting not in _SETTINGS:
            raise ValueError(f"{key}: not a fault-point config (kconform.fault.[<point>.]"
                             f"{{{','.join(_SETTINGS)}}}, points {sorted(POINTS)})")
    default = _arm(values, "kconform.fault", Arm())
    return {n: _arm(values, f"kconform.fault.{n}", default) for n in names}


def arming_configs(arms: dict[str, Arm]) -> dict[str, str]:
    """The broker configs that arm exactly these points (the inverse of :func:`parse_arms`)."""
    for name in arms:
        if name not in POINTS:
            raise ValueError(f"unknown fault point {name!r}; known: {sorted(POINTS)}")
    if not arms:
        return {}
    configs = {"kconform.fault": ",".join(arms)}
    for name, arm in arms.items():
        configs[f"kconform.fault.{name}.action"] = arm.action
        configs[f"kconform.fault.{name}.skip"] = str(arm.skip)
        if arm.hold_ms != -1:
            configs[f"kconform.fault.{name}.hold.ms"] = str(arm.hold_ms)
    return configs


def is_fault_config(key: str) -> bool:
    """Whether a broker config key belongs to the fault points (kconform.fault*)."""
    return key == "kconform.fault" or key.startswith("kconform.fault.")


def _arm(values: dict[str, str], prefix: str, default: Arm) -> Arm:
    action = values.get(f"{prefix}.action", default.action)
    if action not in ACTIONS:
        raise ValueError(f"{prefix}.action={action!r}: one of {list(ACTIONS)}")
    skip = int(values.get(f"{prefix}.skip", default.skip))
    if skip < 0:
        raise ValueError(f"{prefix}.skip={skip}: 0 or more")
    return Arm(action=action, skip=skip, hold_ms=int(values.get(f"{prefix}.hold.ms", default.hold_ms)))


#: The process-wide fault points (one broker per process).
FAULTS = FaultPoints()
