"""A run stopped by SIGTERM (or Ctrl-C) stops the brokers it started.

Why: the workers are daemon threads; without the runner's interrupt handling the interpreter
exits under them and every embedded broker of the rows in flight is left running (measured:
twelve orphaned broker processes after a SIGTERM).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.clients import CLIENTS
from conformance.targets import TARGETS


def _processes_mentioning(text: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline and int(entry.name) != os.getpid():
            pids.append(int(entry.name))
    return pids


def test_sigterm_stops_the_runs_brokers(tmp_path):
    for ok, why in (TARGETS["embedded"].availability(), CLIENTS["confluent"].availability()):
        if not ok:
            pytest.skip(why)
    results = tmp_path / "interrupted-run"
    run = subprocess.Popen(
        [sys.executable, "-m", "conformance.cli", "run", "--target", "embedded", "--client", "confluent",
         "--case", "cluster/coordinator_kill_mid_txn", "--case", "txn/basic_commit", "-j", "2",
         "--results", str(results), "--no-progress"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "KCONFORM_KEEP_WORK": "1"})
    try:
        deadline = time.monotonic() + 60
        brokers: list[int] = []
        # the cluster case's controller and three brokers, and the other case's broker
        while time.monotonic() < deadline and len(brokers) < 4 and run.poll() is None:
            brokers = [p for p in _processes_mentioning(str(results)) if p != run.pid]
            time.sleep(0.1)
        assert brokers, f"the run started no broker within 60 s (exit {run.poll()}): {run.stderr.read().decode()[-2000:] if run.poll() is not None else ''}"
        run.send_signal(signal.SIGTERM)
        run.wait(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(timeout=10)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _processes_mentioning(str(results)):
        time.sleep(0.2)
    left = _processes_mentioning(str(results))
    for pid in left:  # never leave them behind, even when the test fails
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes of the interrupted run still running: {left}"
    assert run.returncode != 0
