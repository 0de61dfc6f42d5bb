"""Fixtures shared by the embedded broker's integration tests."""

from __future__ import annotations

import pytest

from conformance.targets import EmbeddedTarget, Topology


@pytest.fixture
def start(tmp_path):
    """``start(nodes, topics, **topology) -> (target, bootstrap)``: an embedded target (1 node or
    a cluster; more Topology fields by name) with those topics, stopped after the test."""
    started = []

    def _start(nodes, topics, **topology):
        target = EmbeddedTarget()
        started.append(target)
        return target, target.start(Topology(nodes=nodes, topics=topics, **topology), {},
                                    tmp_path / f"t{len(started)}")

    try:
        yield _start
    finally:
        for t in started:
            t.stop()
