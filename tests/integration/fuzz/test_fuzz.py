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


def test_a_fuzz_over_sasl_ssl_authenticates_and_nothing_gets_in_unauthenticated(tmp_path):
    """`kconform fuzz --security sasl_ssl`: the connections speak TLS and SCRAM, one in eight
    fuzzes before authenticating and is never answered but to ApiVersions/SaslHandshake, and a
    wrong password is refused before and after."""
    from conformance.security import Security
    report = run_fuzz(FuzzOptions(target="embedded", frames=1600, results_dir=tmp_path, connections=16,
                                  health_every=800, seed=2, security=Security.generate("sasl_ssl")))
    assert ok(report), summary(report)
    c = report["counts"]
    assert c["preauth_sent"] > 50 and c["preauth_answered"] == 0 and report["wrong_password_refused"] is True
    assert c["answered"] > c["preauth_sent"]          # the authenticated connections were served
    assert report["round_trip"]["produced"] > 0        # a real client over SASL_SSL afterwards
    (row,) = read_results(tmp_path)
    assert row["security_protocol"] == "SASL_SSL" and row["verdict"] == "pass"
    assert {"no request answered before authentication", "a wrong password is refused"} <= \
        {ch["name"] for ch in row["checks"]}


def test_a_frame_answered_before_authentication_is_a_finding(tmp_path):
    """The check itself (a broker that let a Metadata through unauthenticated): counted, saved."""
    from broker_impl.codec import API_BY_KEY
    from conformance.fuzz.run import Counts, Fuzzer, result_row
    metadata = next(k for k, a in API_BY_KEY.items() if a.name == "Metadata")
    frame = b"\x00\x00\x00\x0c" + metadata.to_bytes(2, "big") + b"\x00\x01\x00\x00\x00\x07\xff\xff\xff\xff"
    fz = Fuzzer.__new__(Fuzzer)
    fz.counts, fz.preauth_samples = Counts(), []
    fz.opts = FuzzOptions(target="embedded", frames=1, results_dir=tmp_path)
    fz.repro, fz.frames = tmp_path / "reproducers", lambda i: ("raw", frame)
    fz._preauth(5, frame, "answered")
    fz._preauth(6, b"\x00\x00\x00\x08\x00\x12\x00\x00\x00\x00\x00\x01", "answered")   # ApiVersions: allowed
    fz._preauth(7, frame, "closed")
    assert (fz.counts.preauth_sent, fz.counts.preauth_answered) == (3, 1)
    assert (tmp_path / fz.preauth_samples[0]["file"]).read_bytes() == frame
    report = {"crashes": 0, "hangs": 0, "incidents": [], "internal_errors": 0, "internal_error_samples": [],
              "round_trip": {"consumed": 1, "produced": 1}, "log_bytes": 0, "run_id": "r", "started_at": "t",
              "target": "embedded", "target_version": "dev", "frames": 3, "seeds": {},
              "counts": vars(fz.counts), "total_seconds": 1.0, "security_protocol": "SASL_SSL",
              "preauth_answered_samples": fz.preauth_samples, "wrong_password_refused": True}
    row = result_row(report)
    assert row.verdict.value == "fail"
    assert [c.name for c in row.checks if not c.passed] == ["no request answered before authentication"]
