"""Realising a case's faults on a target -- the one place where target-neutral fault words
(`crash: coordinator, of: txn-1, at: after_prepare_durable`) become target actions.

How each kind is realised:
- right-away node actions (crash/pause/resume/restart/stop a node chosen by role): the Target's
  node control (kill -9, SIGSTOP/SIGCONT, restart with the same data, SIGTERM). The role is
  resolved over the wire when the step runs (FindCoordinator, Metadata), the way a client would.
- a node action `at:` a protocol point: exact only where the target has named fault points in
  its code (capability `fault_points`: the embedded broker, broker_impl/faults), armed through
  the broker configs broker_impl.faults.arming_configs writes at start. `crash` there is the
  broker's own `os._exit`; `pause` is the broker SIGSTOPping itself right after it told the
  target so (broker_impl/faults/channel), so the node is frozen exactly there (sockets held,
  nothing answered, timers stopped) and the case's later `resume` continues it from that line.
  Elsewhere no proxy rule is exact -- the points sit between a durable txn-log append and marker
  writes, which happen inside the broker (or broker-to-broker) with no client frame to act on --
  so the case is not applicable there, with that reason, never approximated by a lucky kill -9
  or SIGSTOP.
- `hold` at a point (only there): the broker's own hold -- the one coroutine at the point waits,
  the rest of the node answers -- and a later `release` of the same role lets it go on
  (Target.release_hold: SIGUSR1 to the embedded broker). A release waits for its hold to be
  reached first, so it can never come before it.
- proxy rules: conformance/proxy through `proxying.ProxyFront`. A rule `from:` a broker by role
  (`from: coordinator, of: txn-1`) acts on the requests that broker sends (its inter-broker
  client id names it), the role resolved when the rule is added.

`at:` faults count from the start of the case: `occurrence: N` is the N-th time the point is
reached in this case (default the first), across restarts of the node (the target re-arms a
restarted node with what has not fired). A case may arm several points (one fault per point);
`wait_fault` steps wait for them in the order they were armed; a proxy rule is waited for the
same way, until it acted on a frame (so a case can act once a broker sent what the rule drops).
"""
from __future__ import annotations

import dataclasses

from broker_impl.faults import Arm, arming_configs

from conformance.targets import Target

from ..dsl.model import Case, FaultDef, NodeRef
from ..results import NotApplicable
from ..vocabulary import PROTOCOL_POINTS
from .namespace import Namespace

#: How long a `release` waits for the hold it releases to be reached, when no `wait_fault` did.
RELEASE_WAIT_S = 20.0


def plan_broker_configs(case: Case, target_cls: type[Target], target_name: str | None = None) -> dict[str, str]:
    """Extra broker configs that arm the case's `at:` faults; NotApplicable where none can.
    `target_name`: the run's name for the target (`apache-kafka@3.9.1`), said in the reason."""
    points = case.protocol_points()
    if not points:
        return {}
    name = target_name or target_cls.name
    if "fault_points" not in target_cls.static_capabilities:
        f = points[0]
        raise NotApplicable(
            f"target {name!r} cannot {f.action} the {f.target.role} exactly at protocol point "
            f"{f.at!r}: it has no fault points in its code, and no proxy rule is exact there (at that point: "
            f"{PROTOCOL_POINTS[f.at]} -- inside the broker, with no client frame to act on)")
    arms: dict[str, Arm] = {}
    seen: dict[str, FaultDef] = {}
    for f in points:
        if f.at in seen:
            raise NotApplicable(f"target {name!r} arms one fault per protocol point; the case has "
                                f"{seen[f.at].describe()!r} and {f.describe()!r}")
        seen[f.at] = f
        arms[f.at] = Arm(action=f.action, skip=f.occurrence - 1)
    return arming_configs(arms)


class FaultRealiser:
    def __init__(self, target: Target, ns: Namespace, proxy=None) -> None:
        self.target = target
        self.proxy = proxy  # a proxying.ProxyFront when the proxy stands in front of the target
        self.ns = ns
        #: (role, of) -> node id the case already acted on, so "restart the coordinator" after a
        #: crash names the crashed node, not the one that took over.
        self.remembered: dict[tuple, int] = {}
        #: `at:` faults armed and not yet waited for, in arming order.
        self.armed: list[FaultDef] = []
        #: what `wait_fault` steps wait for, in order: `at:` faults, and proxy rules (their ids)
        self.waits: list[tuple[FaultDef, int | None]] = []
        self.events: list[dict] = []

    # ----------------------------------------------------------------- roles
    def resolve(self, ref: NodeRef, prefer_remembered: bool, remember: bool = True) -> int:
        """The node id of a role, asked over the wire now (or the one the case already acted
        on, with ``prefer_remembered``). ``remember``: later resume/restart/release of the role
        name this node (a raw request's addressee is looked up without it)."""
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
        if remember:
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
            rule = fault.proxy
            event = {"fault": fault.describe()}
            if fault.target is not None:
                event["node"] = self.resolve(fault.target, prefer_remembered=False)
                rule = dataclasses.replace(rule, source_node=event["node"])
            rid = event["rule"] = self.proxy.add_rule(rule)
            self.waits.append((fault, rid))
            self.events.append(event)
            return event
        if fault.at:
            # Armed at start (plan_broker_configs); the node is whichever reaches the point.
            self.armed.append(fault)
            self.waits.append((fault, None))
            event = {"fault": fault.describe(), "node": self.resolve(fault.target, prefer_remembered=False),
                     "armed": True}
        else:
            if fault.action == "release":
                # a hold not yet waited for: wait for it first, so the release cannot come before
                # the hold (and name the node it held on)
                held = [f for f in self.armed if f.action == "hold" and f.target.key() == fault.target.key()]
                if held:
                    self._wait(held[0], RELEASE_WAIT_S)
            node = self.resolve(fault.target, prefer_remembered=fault.action in ("resume", "restart", "release"))
            if fault.action == "release":
                t.release_hold(node)
            elif fault.action == "crash":
                t.kill(node)
                self._node_gone(node)
            elif fault.action == "pause":
                t.pause(node)
            elif fault.action == "resume":
                t.resume(node)
            elif fault.action == "stop":
                t.stop_node(node)
                self._node_gone(node)
            elif fault.action == "restart":
                t.restart(node)
                if self.proxy is not None:
                    self.proxy.node_up(node)
            event = {"fault": fault.describe(), "node": node}
        self.events.append(event)
        return event

    def _node_gone(self, node: int) -> None:
        """A node this case took down refuses connections at the proxy too (it reopens its port
        when the node is back)."""
        if self.proxy is not None:
            self.proxy.node_down(node)

    def wait_fired(self, timeout_ms: int) -> dict:
        """Block until the earliest armed `at:` fault fired and its node crashed or stopped
        there (the target's await_fault_point), or the earliest proxy rule acted on a frame.
        TimeoutError if it never does."""
        if not self.waits:
            raise RuntimeError("no armed fault to wait for")
        fault, rid = self.waits[0]
        if rid is not None:
            match = self.proxy.wait_acted(rid, timeout_ms / 1000)
            if match is None:
                raise TimeoutError(f"{fault.describe()} acted on no frame in {timeout_ms} ms")
            self.waits.pop(0)
            event = {"fault": fault.describe(), "rule": rid, "fired": True}
            self.events.append(event)
            return event
        return self._wait(fault, timeout_ms / 1000)

    def _wait(self, fault: FaultDef, timeout_s: float) -> dict:
        node = self.target.await_fault_point(fault.at, timeout_s)
        self.armed.remove(fault)
        self.waits = [w for w in self.waits if w[0] is not fault]
        if fault.action == "crash":
            self._node_gone(node)
        # `resume`/`restart` of this role name the node that fired (the key resolve() uses).
        self.remembered[fault.target.key()] = node
        event = {"fault": fault.describe(), "node": node, "fired": True}
        self.events.append(event)
        return event
