"""Fixtures for the target tests: every target a test starts is stopped in a finally."""
from __future__ import annotations

import pytest

from conformance.targets import make_target


@pytest.fixture
def start_target(tmp_path):
    """start_target(name, topology, broker_configs=None, **ctor) -> (target, bootstrap).

    name may be NAME@VERSION. Skips (with the target's own reason) when the target cannot run
    on this machine.
    """
    started = []

    def start(name, topology, broker_configs=None, **options):
        target = make_target(name, **options)
        ok, reason = target._available()
        if not ok:
            pytest.skip(f"target {name!r} not available: {reason}")
        started.append(target)
        workdir = tmp_path / f"{name}-{len(started)}"
        bootstrap = target.start(topology, dict(broker_configs or {}), workdir)
        return target, bootstrap

    try:
        yield start
    finally:
        for target in reversed(started):
            target.stop()
