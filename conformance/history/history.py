"""A workload's history: every operation's invocation and completion, with its time.

Jepsen's model: an operation is invoked by a process and then completes as
- `ok`   -- it happened (a send acknowledged, a commit answered NONE),
- `fail` -- it certainly did not happen (a transaction whose commit was never sent),
- `info` -- nobody can tell (a commit answered with an error or never answered; an
  unacknowledged send): the checker then allows both worlds, but not a mixture of them.
A process is one driver process: `t1#2` is worker t1's second process (the first was killed).
Instantaneous events (a fault the nemesis applied, an LSO sample) are recorded as an invocation
and its completion at once.

Events are dicts so they go to history.jsonl as they are:

    {"index": 17, "time": 3.214, "process": "t1#2", "worker": "t1", "type": "invoke",
     "f": "txn", "value": {"txn": "t1/4", "intent": "commit"}}
    {"index": 23, "time": 3.998, "process": "t1#2", "worker": "t1", "type": "ok", "f": "txn",
     "invoke": 17, "value": {"end": "commit", "records": [["t1-40", "data", 2, 118]]}}

`time` is seconds since the history began (the same zero the proxy's transcript uses, so wire
frames and operations line up on one timeline).
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, Iterator

TYPES = ("invoke", "ok", "fail", "info")


class History:
    """Thread-safe, append-only. Workers call `invoke` and then `complete` with its index."""

    def __init__(self, t0: float | None = None) -> None:
        self.t0 = time.monotonic() if t0 is None else t0
        self._lock = threading.Lock()
        self._events: list[dict[str, Any]] = []
        self._open: dict[int, dict[str, Any]] = {}

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 4)

    def _append(self, event: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            event["index"] = len(self._events)
            event.setdefault("time", self.now())
            self._events.append(event)
            return event

    def invoke(self, process: str, f: str, value: Any = None) -> int:
        """Record the start of an operation; returns its index for `complete`."""
        ev = self._append({"process": process, "worker": process.split("#")[0], "type": "invoke", "f": f,
                           "value": value})
        with self._lock:
            self._open[ev["index"]] = ev
        return ev["index"]

    def complete(self, invoke: int, type: str, value: Any = None, error: dict | None = None) -> dict[str, Any]:
        """Record how the operation `invoke` ended (ok / fail / info)."""
        if type not in TYPES[1:]:
            raise ValueError(f"a completion is ok, fail or info, not {type!r}")
        with self._lock:
            inv = self._open.pop(invoke, None)
        if inv is None:
            raise ValueError(f"operation {invoke} is not open")
        ev = {"process": inv["process"], "worker": inv["worker"], "type": type, "f": inv["f"], "invoke": invoke,
              "value": value}
        if error is not None:
            ev["error"] = error
        return self._append(ev)

    def event(self, process: str, f: str, value: Any = None, type: str = "ok") -> dict[str, Any]:
        """An instantaneous operation: its invocation and completion at the same time."""
        i = self.invoke(process, f, value)
        return self.complete(i, type, value)

    def close_open(self, why: str) -> int:
        """Complete every operation still open as `info` (the workload ended, or its process
        died, before it answered); returns how many."""
        with self._lock:
            left = sorted(self._open)
        for i in left:
            self.complete(i, "info", error={"name": "UNFINISHED", "message": why})
        return len(left)

    def open_of(self, process: str) -> list[int]:
        with self._lock:
            return sorted(i for i, ev in self._open.items() if ev["process"] == process)

    # ----------------------------------------------------------------- reading
    def events(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._events)

    def __len__(self) -> int:
        return len(self._events)

    def completed(self) -> int:
        """Completions recorded so far (the workload's op count)."""
        with self._lock:
            return sum(1 for e in self._events if e["type"] != "invoke")

    def write_jsonl(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            for ev in self.events():
                fh.write(json.dumps(ev, default=str) + "\n")
        return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def pairs(events: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any] | None]]:
    """(invocation, completion) for every operation, in invocation order; completion None when
    the history ended with it open."""
    done = {e["invoke"]: e for e in events if e["type"] != "invoke"}
    for e in events:
        if e["type"] == "invoke":
            yield e, done.get(e["index"])
