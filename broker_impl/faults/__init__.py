"""Named fault points: places in the broker's code where a test can make it die or pause.

Why: a conformance case says "the coordinator crashes after PrepareCommit is durable"; real
Kafka can only approximate that with kill -9 at a lucky moment, the embedded broker can do it
exactly. Each point is a line ``if FAULTS.armed: await FAULTS.reach("name")`` in the code: when
nothing is armed the cost is one attribute read.

Arming (broker configs, so ``--set`` on the command line works, and so does the control path
:meth:`FaultPoints.configure`, which an AlterConfigs handler may call with ``kconform.fault*``
keys):

- ``kconform.fault``            comma-separated point names (see :data:`POINTS`)
- ``kconform.fault.action``     ``crash`` (default): ``os._exit`` at once, nothing flushed
                                beyond what is already durable; or ``pause``
- ``kconform.fault.pause.ms``   how long a pause lasts (default -1: until disarmed)
- ``kconform.fault.skip``       let the first N hits pass (default 0)
- ``kconform.fault.exit.code``  exit status of a crash (default 86)

A crash writes one line ``kconform fault point <name> reached: crash`` to stderr first, so a
test can tell a planned death from a bug.
"""

from __future__ import annotations

import os
import sys

import trio

#: Every fault point the broker has, and where it sits.
POINTS: dict[str, str] = {
    "before_prepare_append": "EndTxn accepted, PrepareCommit/PrepareAbort not yet appended to the txn log",
    "after_prepare_durable": "Prepare* fsynced to the txn log, no marker written yet",
    "after_some_markers": "at least one marker written, at least one still to write",
    "after_all_markers": "every marker written, Complete* not yet appended",
    "after_complete": "Complete* fsynced to the txn log",
    "before_end_txn_response": "EndTxn about to be answered (its outcome is decided)",
}

CRASH = "crash"
PAUSE = "pause"


class FaultPoints:
    def __init__(self) -> None:
        self.armed = False
        self.names: frozenset[str] = frozenset()
        self.action = CRASH
        self.pause_ms = -1
        self.skip = 0
        self.exit_code = 86
        self.hits: dict[str, int] = {}
        self._release: trio.Event | None = None

    def configure(self, values: dict[str, str]) -> None:
        """Arm or disarm from ``kconform.fault*`` config values (unknown names raise)."""
        names = [n.strip() for n in values.get("kconform.fault", "").split(",") if n.strip()]
        unknown = [n for n in names if n not in POINTS]
        if unknown:
            raise ValueError(f"unknown fault point(s) {unknown}; known: {sorted(POINTS)}")
        action = values.get("kconform.fault.action", CRASH)
        if action not in (CRASH, PAUSE):
            raise ValueError(f"kconform.fault.action={action!r}: crash or pause")
        self.names = frozenset(names)
        self.action = action
        self.pause_ms = int(values.get("kconform.fault.pause.ms", "-1"))
        self.skip = int(values.get("kconform.fault.skip", "0"))
        self.exit_code = int(values.get("kconform.fault.exit.code", "86"))
        self.hits = {}
        was_armed = self.armed
        self.armed = bool(self.names)
        if was_armed and not self.armed and self._release is not None:
            self._release.set()
            self._release = None

    def disarm(self) -> None:
        self.configure({})

    async def reach(self, name: str, detail: str = "") -> None:
        """Called at fault point ``name``; crashes or pauses when it is armed."""
        if name not in self.names:
            return
        n = self.hits.get(name, 0) + 1
        self.hits[name] = n
        if n <= self.skip:
            return
        msg = f"kconform fault point {name} reached: {self.action} {detail}".rstrip()
        try:
            sys.stderr.write(msg + "\n")
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - dying anyway
            pass
        if self.action == CRASH:
            os._exit(self.exit_code)
        if self._release is None:
            self._release = trio.Event()
        if self.pause_ms < 0:
            await self._release.wait()
        else:
            with trio.move_on_after(self.pause_ms / 1000.0):
                await self._release.wait()


#: The process-wide fault points (one broker per process).
FAULTS = FaultPoints()
