"""The embedded target: the project's trio broker as a subprocess, per the stdout contract."""
from __future__ import annotations

import time

import pytest

from conformance.targets import EmbeddedTarget, Topology, wire

pytestmark = pytest.mark.timeout(120)

available, reason = EmbeddedTarget.availability()


@pytest.mark.skipif(not available, reason=f"embedded target not available: {reason}")
def test_embedded_starts_is_killed_and_restarts_on_the_same_port(start_target):
    target, bootstrap = start_target("embedded", Topology())
    assert target.node_ids() == [1]
    address = target.addresses[1]
    assert bootstrap == f"{address[0]}:{address[1]}"
    assert wire.api_versions(address).api_versions
    assert "fault_points" in target.capabilities
    target.kill(1)
    with pytest.raises(wire.WireError):
        wire.api_versions(address, timeout=1.0)
    target.restart(1)
    assert target.addresses[1] == address
    assert wire.api_versions(address).api_versions
    assert target.log_files()


@pytest.mark.skipif(not available, reason=f"embedded target not available: {reason}")
def test_embedded_cluster_with_a_dedicated_controller(start_target):
    """Three broker processes and a controller process; nodes are the brokers only; a killed
    broker is fenced (Metadata stops listing it) and a restart brings it back on its port."""
    target, bootstrap = start_target("embedded", Topology(nodes=3, controller="dedicated"))
    assert target.node_ids() == [1, 2, 3]
    assert {"multi_node", "dedicated_controller", "wire_markers"} <= target.capabilities
    assert len(bootstrap.split(",")) == 3
    assert sorted(wire.metadata(target.addresses[1], []).brokers) == [1, 2, 3]
    assert set(target.rss_bytes()) == {1, 2, 3, 1000}     # the controller is a process too
    target.kill(2)
    deadline = time.monotonic() + 15
    while 2 in wire.metadata(target.addresses[1], []).brokers and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sorted(wire.metadata(target.addresses[1], []).brokers) == [1, 3]
    assert target.health() is None                        # a node the case took down is not a crash
    target.restart(2)
    assert sorted(wire.metadata(target.addresses[2], []).brokers) == [1, 2, 3]
    target.stop()
    assert not any(p.running() for p in target.procs.values())
