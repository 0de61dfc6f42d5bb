"""A run stopped by SIGTERM (or Ctrl-C) stops the brokers and client drivers it started.

Why: the workers are daemon threads; without the runner's interrupt handling the interpreter
exits under them and every embedded broker of the rows in flight is left running (measured:
twelve orphaned broker processes after a SIGTERM).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.clients import CLIENTS
from conformance.targets import TARGETS


def _processes_mentioning(text: str, where: str = "cmdline") -> list[int]:
    """PIDs whose command line (or environment, ``where="environ"``) contains ``text``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            found = (entry / where).read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in found and int(entry.name) != os.getpid():
            pids.append(int(entry.name))
    return pids


def _drivers(marker: str) -> list[int]:
    """The client drivers of the run marked ``marker`` (they inherit the runner's environment)."""
    drivers = []
    for pid in _processes_mentioning(marker, "environ"):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "conformance.clients." in cmdline:
            drivers.append(pid)
    return drivers


def test_sigterm_stops_the_runs_brokers_and_drivers(tmp_path):
    for ok, why in (TARGETS["embedded"].availability(), CLIENTS["confluent"].availability()):
        if not ok:
            pytest.skip(why)
    results = tmp_path / "interrupted-run"
    marker = f"{os.getpid()}-{time.monotonic_ns()}"
    run = subprocess.Popen(
        [sys.executable, "-m", "conformance.cli", "run", "--target", "embedded", "--client", "confluent",
         "--case", "cluster/coordinator_kill_mid_txn", "--case", "txn/basic_commit", "-j", "2",
         "--results", str(results), "--no-progress", "--junit", str(tmp_path / "junit.xml")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**os.environ, "KCONFORM_KEEP_WORK": "1", "KCONFORM_INTERRUPT_TEST": marker})
    try:
        deadline = time.monotonic() + 60
        brokers: list[int] = []
        drivers: list[int] = []
        # the cluster case's controller and three brokers, the other case's broker, and their actors
        while time.monotonic() < deadline and (len(brokers) < 4 or not drivers) and run.poll() is None:
            brokers = [p for p in _processes_mentioning(str(results)) if p != run.pid]
            drivers = _drivers(marker)
            time.sleep(0.1)
        assert brokers, f"the run started no broker within 60 s (exit {run.poll()}): {run.stderr.read().decode()[-2000:] if run.poll() is not None else ''}"
        assert drivers, "the run started no client driver within 60 s"
        run.send_signal(signal.SIGTERM)
        run.wait(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(timeout=10)
    # The drivers run in their own session (a Ctrl-C must not reach them): the runner kills them
    # before it exits -- no waiting for them to notice their stdin closed (an op in flight
    # delays that up to its deadline; KafkaJS's reconnect loop used to outlive the run).
    lingering = _drivers(marker)
    for pid in lingering:
        os.kill(pid, signal.SIGKILL)
    assert not lingering, f"client drivers of the interrupted run still running after it exited: {lingering}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _processes_mentioning(str(results)):
        time.sleep(0.2)
    left = _processes_mentioning(str(results))
    for pid in left:  # never leave them behind, even when the test fails
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes of the interrupted run still running: {left}"
    assert run.returncode != 0
    # A stopped run never looks finished: run.json says so, and the JUnit file is the sentinel.
    meta = json.loads((results / "run.json").read_text())
    assert meta["status"] == "failed" and meta["error"] == "interrupted"
    junit = (tmp_path / "junit.xml").read_text()
    assert 'type="harness"' in junit and "kconform run failed: interrupted" in junit
