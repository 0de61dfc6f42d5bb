"""Which node a fault step acts on: the role memory of FaultRealiser.

Why: `restart: node, node: 1` after `crash: node, node: 2` must restart node 1. The realiser
remembers the node each role resolved to (so "restart the coordinator" names the node that was
crashed, not the one that took over); node roles are remembered per node number, never shared.
These tests cover that bookkeeping only -- the node-control calls are recorded, no broker runs
(the wire side of each role is covered by the runner's integration tests on real targets).
"""
from __future__ import annotations

from conformance.dsl.model import FaultDef, NodeRef
from conformance.runner.faults import FaultRealiser
from conformance.runner.namespace import Namespace


class RecordingNodes:
    """Node control that records the calls: the target side of the bookkeeping under test."""

    name = "recording"

    def __init__(self, nodes: int) -> None:
        self.calls: list[tuple[str, int]] = []
        self.down: set[int] = set()
        self._ids = list(range(1, nodes + 1))

    def node_ids(self) -> list[int]:
        return list(self._ids)

    def log_files(self) -> list:
        return []

    def kill(self, node: int) -> None:
        self.calls.append(("kill", node))

    def restart(self, node: int) -> None:
        self.calls.append(("restart", node))

    def pause(self, node: int) -> None:
        self.calls.append(("pause", node))

    def resume(self, node: int) -> None:
        self.calls.append(("resume", node))


def fault(action: str, node: int) -> FaultDef:
    return FaultDef(action=action, target=NodeRef("node", node=node))


def test_each_node_number_is_its_own_role():
    t = RecordingNodes(3)
    r = FaultRealiser(t, Namespace("x"))
    for f in (fault("crash", 1), fault("crash", 2), fault("restart", 1), fault("restart", 2)):
        r.apply(f)
    assert t.calls == [("kill", 1), ("kill", 2), ("restart", 1), ("restart", 2)]


def test_pause_then_resume_names_the_same_node():
    t = RecordingNodes(3)
    r = FaultRealiser(t, Namespace("x"))
    r.apply(fault("pause", 3))
    r.apply(fault("resume", 3))
    assert t.calls == [("pause", 3), ("resume", 3)]
