"""Realising a case's faults on a target -- the one place where target-neutral fault words
(`crash: coordinator, of: txn-1, at: after_prepare_durable`) become target actions.

How each kind is realised:
- right-away node actions (crash/pause/resume/restart/stop a node chosen by role): the Target's
  node control (kill -9, SIGSTOP/SIGCONT, restart with the same data, SIGTERM). The role is
  resolved over the wire when the step runs (FindCoordinator, Metadata), the way a client would.
- a node action `at:` a protocol point: exact only where the target has named fault points in
  its code (capability `fault_points`: the embedded broker, broker_impl/faults, armed through
  `kconform.fault*` broker configs at start). `crash` there is the broker's own `os._exit`;
  `pause` is the broker SIGSTOPping itself right after it logged the point, so the node is
  frozen exactly there (sockets held, nothing answered, timers stopped) and the case's later
  `resume` (the target's SIGCONT) continues it from that line. Elsewhere no proxy rule is
  exact -- the points sit between a durable txn-log append and marker writes, which happen
  inside the broker (or broker-to-broker) with no client frame to act on -- so the case is not
  applicable there, with that reason, never approximated by a lucky kill -9 or SIGSTOP.
- proxy rules: conformance/proxy through `proxying.ProxyAdapter`.

`at:` faults count from the start of the case: `occurrence: N` is the N-th time the point is
reached in this case (default the first), across restarts of the node. A case may arm several
points (one fault per point); `wait_fault` steps wait for them in the order they were armed.
"""
from __future__ import annotations

import re
import time
from pathlib import Path

from conformance.targets import NotApplicable, Target

from ..dsl.model import Case, FaultDef, NodeRef
from .namespace import Namespace

POINT_LINE = "kconform fault point {point} reached"
#: The broker's lines for a point that fired and for a hit it let pass (an `occurrence` not yet due).
HIT_LINES = re.compile(rb"kconform fault point (\w+) (reached|passed)")
#: `at:` actions and the broker's kconform.fault.action for each.
POINT_ACTIONS = {"crash": "crash", "pause": "pause"}
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
    seen: dict[str, FaultDef] = {}
    for f in points:
        if f.at in seen:
            raise NotApplicable(f"target {target.name!r} arms one fault per protocol point; the case has "
                                f"{seen[f.at].describe()!r} and {f.describe()!r}")
        if f.action not in POINT_ACTIONS:
            raise NotApplicable(f"target {target.name!r}: {f.action} at a protocol point is not supported")
        seen[f.at] = f
    configs = {"kconform.fault": ",".join(seen)}
    for point, f in seen.items():
        configs[f"kconform.fault.{point}.action"] = POINT_ACTIONS[f.action]
        configs[f"kconform.fault.{point}.skip"] = str(f.occurrence - 1)
    return configs


class FaultRealiser:
    def __init__(self, target: Target, ns: Namespace, log_offsets: dict[Path, int], proxy=None) -> None:
        self.target = target
        self.proxy = proxy  # a proxying.ProxyFront when the proxy stands in front of the target
        self.ns = ns
        self.log_offsets = log_offsets
        #: (role, of) -> node id the case already acted on, so "restart the coordinator" after a
        #: crash names the crashed node, not the one that took over.
        self.remembered: dict[tuple, int] = {}
        #: `at:` faults armed and not yet waited for, in arming order, with the node resolved then.
        self.armed: list[tuple[FaultDef, int]] = []
        self.events: list[dict] = []

    # ----------------------------------------------------------------- roles
    def resolve(self, ref: NodeRef, prefer_remembered: bool) -> int:
        key = ref.key()
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
        elif ref.role == "not_coordinator":
            coordinator = t.transaction_coordinator(self.ns.name(ref.of), timeout=30)
            others = [n for n in t.node_ids() if n != coordinator]
            if ref.node > len(others):
                raise NotApplicable(f"the case names node #{ref.node} other than the coordinator; target "
                                    f"{t.name!r} has {len(others)} such node(s)")
            node = others[ref.node - 1]
        elif ref.role == "group_coordinator":
            node = t.group_coordinator(self.ns.name(ref.of), timeout=30)
        elif ref.role == "leader":
            topic, _, part = ref.of.rpartition("/")
            node = t.partition_leader(self.ns.name(topic), int(part))
            if node < 0:
                raise RuntimeError(f"partition {ref.of} has no leader now")
        else:  # follower: the first replica, in Metadata's replica order, that does not lead
            topic, _, part = ref.of.rpartition("/")
            leader, replicas, _ = t.partition_replicas(self.ns.name(topic), int(part))
            followers = [r for r in replicas if r != leader]
            if not followers:
                raise NotApplicable(f"partition {ref.of} has no follower (replicas {list(replicas)}, leader {leader})")
            node = followers[0]
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
            self.armed.append((fault, node))
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
                disarm_on_restart(t, node, self._point_hits())
                t.restart(node)
            event = {"fault": fault.describe(), "node": node}
        self.events.append(event)
        return event

    def wait_fired(self, timeout_ms: int) -> dict:
        """Block until the earliest armed `at:` fault fired: the broker said so in its log, and
        then a crashed node's process is gone, a paused one is really stopped (state T). Mark the
        node down -- and paused, as the target's own pause() does, so that `resume` continues it
        and a `restart` or the target's stop sends SIGCONT with its SIGTERM. TimeoutError if it
        never fires."""
        if not self.armed:
            raise RuntimeError("no armed fault to wait for")
        fault, node = self.armed[0]
        needle = POINT_LINE.format(point=fault.at).encode()
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            where = next((path for path, chunk in self._new_log_chunks() if needle in chunk), None)
            if where is not None:
                break
            if time.monotonic() >= deadline:
                raise TimeoutError(f"fault point {fault.at!r} was not reached within {timeout_ms} ms")
            time.sleep(0.05)
        self.armed.pop(0)
        procs = getattr(self.target, "procs", {})
        # The node whose log has the line fired; on a one-node target that is the resolved node.
        node = next((n for n, p in procs.items() if getattr(p, "log_path", None) == where), node)
        proc = procs.get(node)
        settle = deadline + 5
        if fault.action == "pause":
            state = None
            while proc is not None and time.monotonic() < settle:
                state = process_state(proc.pid) if proc.running() else None
                if state in ("T", "t", None):
                    break
                time.sleep(0.02)
            if proc is not None and state not in ("T", "t"):
                raise TimeoutError(f"fault point {fault.at!r} was reached but node {node}'s process "
                                   f"{proc.pid} did not stop (state {state!r}, running {proc.running()})")
            if proc is not None:
                proc.paused = True
        else:
            while proc is not None and proc.running() and time.monotonic() < settle:
                time.sleep(0.05)
        self.target.down.add(node)
        # `resume`/`restart` of this role name the node that fired (the key resolve() uses).
        ref = fault.target
        self.remembered[ref.key()] = node
        event = {"fault": fault.describe(), "node": node, "fired": True}
        self.events.append(event)
        return event

    def _point_hits(self) -> dict[str, tuple[int, bool]]:
        """Per protocol point, what the node's logs say since the case began: (hits let pass,
        fired)."""
        text = b"".join(chunk for _, chunk in self._new_log_chunks())
        out: dict[str, tuple[int, bool]] = {}
        for m in HIT_LINES.finditer(text):
            point = m.group(1).decode()
            passed, fired = out.get(point, (0, False))
            if m.group(2) == b"passed":
                passed += 1
            else:
                fired = True
            out[point] = (passed, fired)
        return out

    def _new_log_chunks(self) -> list[tuple[Path, bytes]]:
        """What each node log gained since the case began."""
        out = []
        for path in self.target.log_files():
            start = self.log_offsets.get(path, 0)
            try:
                with open(path, "rb") as fh:
                    fh.seek(start)
                    out.append((path, fh.read()))
            except OSError:
                continue
        return out


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


def disarm_on_restart(target: Target, node: int, hits: dict[str, tuple[int, bool]] | None = None) -> None:
    """A node restarted after its fault point fired must not crash (or stop) again at the same
    point: rewrite the `--set kconform.fault*=...` arguments of the command line the restart
    repeats. `hits` (per point: hits let pass, fired -- FaultRealiser._point_hits) keeps the
    points that have not fired armed, their `skip` lowered by the hits the node's earlier life
    already let pass, so `occurrence` still counts from the start of the case; without it every
    point is disarmed.

    This relies on LocalProcessTarget keeping each node's argv in `procs[node].argv` (the
    embedded target's contract: configs go in as `--set key=value`)."""
    proc = getattr(target, "procs", {}).get(node)
    argv = getattr(proc, "argv", None)
    if not argv:
        return
    kept: list[str] = []
    faults: dict[str, str] = {}
    i = 0
    while i < len(argv):
        if argv[i] == "--set" and i + 1 < len(argv) and argv[i + 1].startswith("kconform.fault"):
            key, _, value = argv[i + 1].partition("=")
            faults[key] = value
            i += 2
            continue
        kept.append(argv[i])
        i += 1
    points = [p for p in faults.get("kconform.fault", "").split(",") if p]
    left = [] if hits is None else [p for p in points if not hits.get(p, (0, False))[1]]
    if left:
        out = {k: v for k, v in faults.items()
               if not any(k.startswith(f"kconform.fault.{p}.") for p in points if p not in left)}
        out["kconform.fault"] = ",".join(left)
        for p in left:
            key = f"kconform.fault.{p}.skip"
            skip = int(out.get(key, faults.get("kconform.fault.skip", "0")))
            out[key] = str(max(0, skip - hits.get(p, (0, False))[0]))
        for k, v in out.items():
            kept += ["--set", f"{k}={v}"]
    argv[:] = kept
