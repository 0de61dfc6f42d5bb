"""The embedded target: the project's trio broker as a subprocess, per the stdout contract."""
from __future__ import annotations

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
