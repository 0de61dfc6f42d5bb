"""The nemesis: a workload's fault schedule carried out on the target, on time.

Jepsen's word for the process that injects faults. Every schedule entry is the case language's
own fault (FaultRealiser realises it exactly as a `fault:` step would) or a client fault (a
worker's process killed or closed), applied when the workload's clock reaches its `at_s`; a
proxy rule is removed again after its `for_s`. What was done goes into the history as the
`nemesis` process's operations, with the node it hit, so the checker can tell an error
answered during a fault from one answered on a healthy cluster.

At the end (`heal`) every fault still in force is undone -- proxy rules removed, paused nodes
resumed, crashed or stopped ones restarted -- so the end phase and the final reads see the
whole cluster again. Faults at protocol points (`at:`) are armed when the target starts
(runner/faults.plan_broker_configs); a watcher waits for each to fire and starts the node
again after a moment, as an operator would.
"""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from ..dsl.model import FaultDef
from ..dsl.workload import ScheduledFault
from ..results import NotApplicable
from .faults import FaultRealiser

if TYPE_CHECKING:
    from .workload_run import WorkloadRun

UNDO = {"crash": "restart", "stop": "restart", "pause": "resume"}
#: Seconds a node that crashed at a protocol point stays down before it is started again.
POINT_DOWN_S = 2.0


class Nemesis(threading.Thread):
    def __init__(self, run: "WorkloadRun", realiser: FaultRealiser) -> None:
        super().__init__(name="nemesis", daemon=True)
        self.run_ = run
        self.realiser = realiser
        self.h = run.history
        self.stop_event = threading.Event()
        #: role key -> (fault that took it down, its node) while not undone
        self.down: dict[tuple, tuple[FaultDef, int | None]] = {}
        #: proxy rule id -> (removal time, description)
        self.rules: dict[int, tuple[float, str]] = {}
        self.watchers: list[threading.Thread] = []
        self._lock = threading.Lock()
        #: A node fault is being applied now (a process the target is killing is not a crash).
        self.busy = False
        #: Protocol-point faults armed and not fired yet (the node will end itself there).
        self.points_pending = 0

    # ----------------------------------------------------------------- schedule
    def run(self) -> None:
        for entry in self.run_.w.schedule:
            if entry.fault is not None and entry.fault.at:
                self._watch_point(entry)
        for entry in self.run_.w.schedule:
            if entry.fault is not None and entry.fault.at:
                continue
            while not self.stop_event.is_set():
                self._expire_rules()
                left = entry.at_s - self.run_.elapsed()
                if left <= 0:
                    break
                self.stop_event.wait(min(left, 0.1))
            if self.stop_event.is_set():
                return
            self.apply(entry)
        while not self.stop_event.wait(0.1):
            self._expire_rules()

    def apply(self, entry: ScheduledFault) -> None:
        if entry.fault is None:
            worker = self.run_.workers.get(entry.worker)
            if worker is None:
                return
            value = {"kind": "client", "action": entry.worker_action, "worker": entry.worker,
                     "fault": entry.describe(), "until": round(self.run_.elapsed() + entry.down_s, 3)}
            i = self.h.invoke("nemesis", "fault", value)
            if entry.worker_action == "crash":
                worker.crash(entry.down_s)
            else:
                worker.request_restart()
            self.h.complete(i, "ok", value)
            return
        f = entry.fault
        if f.proxy is not None:
            value = {"kind": "proxy", "action": f.proxy.action, "fault": entry.describe()}
            i = self.h.invoke("nemesis", "fault", value)
            try:
                event = self.realiser.apply(f)
            except (NotApplicable, RuntimeError, TimeoutError, KeyError, OSError) as exc:
                self.h.complete(i, "fail", value, error={"name": "FAULT_FAILED", "message": str(exc)})
                return
            rid = event["rule"]
            until = self.run_.elapsed() + (entry.for_s if entry.for_s is not None else 1e9)
            with self._lock:
                self.rules[rid] = (until, entry.describe())
            self.h.complete(i, "ok", dict(value, rule=rid, node=event.get("node")))
            return
        value = {"kind": "node", "action": f.action, "role": _role(f), "fault": entry.describe()}
        i = self.h.invoke("nemesis", "fault", value)
        try:
            self.busy = True
            event = self.realiser.apply(f)
        except (NotApplicable, RuntimeError, TimeoutError, KeyError, OSError) as exc:
            self.h.complete(i, "fail", value, error={"name": "FAULT_FAILED", "message": str(exc)})
            return
        finally:
            self.busy = False
        key = f.target.key()
        with self._lock:
            if f.action in UNDO:
                self.down[key] = (f, event.get("node"))
            else:
                self.down.pop(key, None)
        self.h.complete(i, "ok", dict(value, node=event.get("node")))

    def _expire_rules(self, all_: bool = False) -> None:
        now = self.run_.elapsed()
        with self._lock:
            due = [rid for rid, (until, _) in self.rules.items() if all_ or until <= now]
        for rid in due:
            with self._lock:
                _, what = self.rules.pop(rid)
            self.run_.remove_rule(rid)
            self.h.event("nemesis", "fault", {"kind": "proxy", "action": "remove", "rule": rid, "fault": what})

    # ----------------------------------------------------------------- protocol points
    def _watch_point(self, entry: ScheduledFault) -> None:
        f = entry.fault
        target = self.run_.target
        self.points_pending += 1

        def watch() -> None:
            while not self.stop_event.is_set():
                try:
                    node = target.await_fault_point(f.at, 0.5)
                    break
                except TimeoutError:
                    continue
            else:
                self.points_pending -= 1
                return
            self.points_pending -= 1
            self.realiser.remembered[f.target.key()] = node
            if self.run_.proxy is not None:
                self.run_.proxy.node_down(node)
            value = {"kind": "point", "action": f.action, "role": _role(f), "fault": entry.describe(), "node": node,
                     "until": round(self.run_.elapsed() + POINT_DOWN_S, 3)}
            self.h.event("nemesis", "fault", value)
            time.sleep(POINT_DOWN_S)
            self._undo(f, node)

        t = threading.Thread(target=watch, name=f"point-{f.at}", daemon=True)
        t.start()
        self.watchers.append(t)

    def _undo(self, f: FaultDef, node: int | None) -> None:
        undo = FaultDef(action=UNDO.get(f.action, "restart"), target=f.target)
        value = {"kind": "node", "action": undo.action, "role": _role(f), "fault": undo.describe(), "heal": True}
        i = self.h.invoke("nemesis", "fault", value)
        try:
            self.busy = True
            event = self.realiser.apply(undo)
            self.h.complete(i, "ok", dict(value, node=event.get("node", node)))
        except (NotApplicable, RuntimeError, TimeoutError, KeyError, OSError) as exc:
            self.h.complete(i, "fail", value, error={"name": "FAULT_FAILED", "message": str(exc)})
        finally:
            self.busy = False

    # ----------------------------------------------------------------- the end
    def heal(self) -> None:
        """Stop the schedule and undo every fault still in force."""
        self.stop_event.set()
        if self.is_alive():
            self.join(timeout=60)
        for t in self.watchers:
            t.join(timeout=30)
        self._expire_rules(all_=True)
        with self._lock:
            down = list(self.down.values())
            self.down.clear()
        for f, node in down:
            self._undo(f, node)


def _role(f: FaultDef) -> str:
    return f.target.describe() if f.target is not None else "?"
