"""kconform fuzz on real targets: the embedded broker survives, and a broker that dies is caught
with the frame that kills it."""
from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from conformance.fuzz import FuzzOptions, run_fuzz
from conformance.fuzz.cli import ok, summary
from conformance.targets import KfakeTarget, Topology, make_target
from reports.results import read_results


def test_the_embedded_broker_survives_a_short_fuzz(tmp_path):
    report = run_fuzz(FuzzOptions(target="embedded", frames=3000, results_dir=tmp_path, connections=16,
                                  health_every=1000, seed=1))
    assert ok(report), summary(report)
    assert report["counts"]["sent"] == 3000
    assert report["counts"]["closed"] > 0 and report["counts"]["answered"] > 0  # it refused and it served
    assert report["seeds"]["client_session"] > 10 and report["round_trip"]["produced"] > 0
    assert report["log_bytes"] < 1 << 20
    (row,) = read_results(tmp_path)
    assert row["case"] == "fuzz/embedded" and row["verdict"] == "pass"


def test_a_crash_is_reported_with_the_frame_that_causes_it(tmp_path):
    """kfake (pinned in conformance/targets/kfake-go/go.mod) dies of a request with an API key it
    does not know: the fuzzer sees the crash, isolates the frame, and the frame alone kills a
    fresh kfake."""
    ok_, why = KfakeTarget.availability()
    if not ok_:
        pytest.skip(f"kfake not available: {why}")
    report = run_fuzz(FuzzOptions(target="kfake", frames=600, results_dir=tmp_path / "run", connections=8,
                                  health_every=100, max_incidents=1, generated=False))
    assert report["crashes"] >= 1, summary(report)
    incident = report["incidents"][0]
    assert "exited" in incident["reason"] and incident.get("reproducer"), incident
    frame = (tmp_path / "run" / incident["reproducer"]).read_bytes()
    with make_target("kfake") as target:
        target.start(Topology(nodes=1), {}, tmp_path / "replay")
        address = target.live_addresses()[0][1]
        with socket.create_connection(address, timeout=5) as s:
            s.sendall(frame)
            s.settimeout(5)
            try:
                s.recv(1 << 16)
            except OSError:
                pass
        deadline = time.monotonic() + 10
        while target.health() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert target.health() is not None
    assert Path(tmp_path / "run" / "fuzz.json").exists()
