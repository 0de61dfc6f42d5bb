"""Realising a case's faults on a target -- the one place where target-neutral fault words
(`crash: coordinator, of: txn-1, at: after_prepare_durable`) become target actions.

How each kind is realised:
- right-away node actions (crash/pause/resume/restart/stop a node chosen by role): the Target's
  node control (kill -9, SIGSTOP/SIGCONT, restart with the same data, SIGTERM). The role is
  resolved over the wire when the step runs (FindCoordinator, Metadata), the way a client would.
- a node action `at:` a protocol point: exact only where the target has named fault points in
  its code (capability `fault_points`: the embedded broker, broker_impl/faults, armed through
  `kconform.fault*` broker configs at start). Elsewhere no proxy rule is exact -- the points sit
  between a durable txn-log append and marker writes, which happen inside the broker (or
  broker-to-broker) with no client frame to act on -- so the case is not applicable there,
  with that reason, never approximated by a lucky kill -9.
- proxy rules: conformance/proxy through `proxying.ProxyAdapter`.

`at:` faults count from the start of the case: `occurrence: N` is the N-th time the point is
reached in this case (default the first).
"""
from __future__ import annotations

import time
from pathlib import Path

from conformance.targets import NotApplicable, Target

from ..dsl.model import Case, FaultDef, NodeRef
from .namespace import Namespace

POINT_LINE = "kconform fault point {point} reached"
#: Where each protocol point lies inside the coordinator -- why no proxy rule can hit it exactly.
POINT_WHERE = {
    "before_prepare_append": "between the coordinator taking the EndTxn and its PrepareCommit/Abort txn-log append",
    "after_prepare_durable": "between the durable PrepareCommit/Abort txn-log append and the marker writes",
    "after_some_markers": "between two of the coordinator's marker writes",
    "after_all_markers": "between the last marker write and the Complete* txn-log append",
    "after_complete": "right after the Complete* txn-log append",
    "before_end_txn_response": "between the coordinator's durable Prepare append and the EndTxn response leaving it",
}


def plan_broker_configs(case: Case, target: Target) -> dict[str, str]:
    """Extra broker configs that arm the case's `at:` faults; NotApplicable where none can."""
    points = case.protocol_points()
    if not points:
        return {}
    caps = type(target).static_capabilities
    if "fault_points" not in caps:
        f = points[0]
        raise NotApplicable(
            f"target {target.name!r} cannot {f.action} the {f.target.role} exactly at protocol point "
            f"{f.at!r}: it has no fault points in its code, and no proxy rule is exact there (the "
            f"point lies {POINT_WHERE.get(f.at, 'inside the broker')}, which carries no client frame)")
    if len(points) > 1:
        raise NotApplicable(f"target {target.name!r} arms one protocol-point fault per case; the case has "
                            f"{len(points)}")
    f = points[0]
    if f.action != "crash":
        raise NotApplicable(f"target {target.name!r}: {f.action} at a protocol point is not supported "
                            "(its fault points pause inside the broker, which SIGCONT cannot release)")
    return {
        "kconform.fault": f.at,
        "kconform.fault.action": "crash",
        "kconform.fault.skip": str(f.occurrence - 1),
    }


class FaultRealiser:
    def __init__(self, target: Target, ns: Namespace, log_offsets: dict[Path, int], proxy=None) -> None:
        self.target = target
        self.proxy = proxy  # a proxying.ProxyFront when the proxy stands in front of the target
        self.ns = ns
        self.log_offsets = log_offsets
        #: (role, of) -> node id the case already acted on, so "restart the coordinator" after a
        #: crash names the crashed node, not the one that took over.
        self.remembered: dict[tuple[str, str | None], int] = {}
        self.armed: tuple[FaultDef, int] | None = None
        self.events: list[dict] = []

    # ----------------------------------------------------------------- roles
    def resolve(self, ref: NodeRef, prefer_remembered: bool) -> int:
        key = (ref.role, ref.of)
        if prefer_remembered and key in self.remembered:
            return self.remembered[key]
        t = self.target
        if ref.role == "node":
            ids = t.node_ids()
            if ref.node > len(ids):
                raise NotApplicable(f"the case names node {ref.node}; target {t.name!r} has {len(ids)}")
            node = ids[ref.node - 1]
        elif ref.role == "coordinator":
            node = t.transaction_coordinator(self.ns.name(ref.of), timeout=30)
        elif ref.role == "group_coordinator":
            node = t.group_coordinator(self.ns.name(ref.of), timeout=30)
        else:
            topic, _, part = ref.of.rpartition("/")
            node = t.partition_leader(self.ns.name(topic), int(part))
            if node < 0:
                raise RuntimeError(f"partition {ref.of} has no leader now")
        self.remembered[key] = node
        return node

    # ----------------------------------------------------------------- actions
    def apply(self, fault: FaultDef) -> dict:
        """Carry out one `fault:` step; returns what was done (for the step record)."""
        t = self.target
        if fault.proxy is not None:
            if self.proxy is None:
                raise NotApplicable(f"the case needs the proxy ({fault.describe()}), which does not stand "
                                    f"in front of target {t.name!r} in this run")
            rid = self.proxy.add_rule(fault.proxy)
            event = {"fault": fault.describe(), "rule": rid}
            self.events.append(event)
            return event
        if fault.at:
            node = self.resolve(fault.target, prefer_remembered=False)
            self.armed = (fault, node)
            event = {"fault": fault.describe(), "node": node, "armed": True}
        else:
            node = self.resolve(fault.target, prefer_remembered=fault.action in ("resume", "restart"))
            if fault.action == "crash":
                t.kill(node)
            elif fault.action == "pause":
                t.pause(node)
            elif fault.action == "resume":
                t.resume(node)
            elif fault.action == "stop":
                t.stop_node(node)
            elif fault.action == "restart":
                disarm_on_restart(t, node)
                t.restart(node)
            event = {"fault": fault.describe(), "node": node}
        self.events.append(event)
        return event

    def wait_fired(self, timeout_ms: int) -> dict:
        """Block until the armed `at:` fault fired (the broker said so in its log, and a crashed
        node's process is gone); mark the node down. TimeoutError if it never fires."""
        if self.armed is None:
            raise RuntimeError("no armed fault to wait for")
        fault, node = self.armed
        needle = POINT_LINE.format(point=fault.at).encode()
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            if any(needle in chunk for chunk in self._new_log_bytes()):
                break
            if time.monotonic() >= deadline:
                raise TimeoutError(f"fault point {fault.at!r} was not reached within {timeout_ms} ms")
            time.sleep(0.05)
        proc = getattr(self.target, "procs", {}).get(node)
        while proc is not None and proc.running() and time.monotonic() < deadline + 5:
            time.sleep(0.05)
        self.target.down.add(node)
        self.armed = None
        event = {"fault": fault.describe(), "node": node, "fired": True}
        self.events.append(event)
        return event

    def _new_log_bytes(self) -> list[bytes]:
        out = []
        for path in self.target.log_files():
            start = self.log_offsets.get(path, 0)
            try:
                with open(path, "rb") as fh:
                    fh.seek(start)
                    out.append(fh.read())
            except OSError:
                continue
        return out


def disarm_on_restart(target: Target, node: int) -> None:
    """A node restarted after its fault point fired must not crash again at the same point:
    drop the `--set kconform.fault*=...` arguments from the command line the restart repeats.

    This relies on LocalProcessTarget keeping each node's argv in `procs[node].argv` (the
    embedded target's contract: configs go in as `--set key=value`)."""
    proc = getattr(target, "procs", {}).get(node)
    argv = getattr(proc, "argv", None)
    if not argv:
        return
    out = []
    skip = False
    for i, a in enumerate(argv):
        if skip:
            skip = False
            continue
        if a == "--set" and i + 1 < len(argv) and argv[i + 1].startswith("kconform.fault"):
            skip = True
            continue
        out.append(a)
    argv[:] = out
