"""A generative workload on the real embedded broker with a real client driver: the row carries
its history, its checks (one per anomaly kind) and its timeline; a broker that dies mid-workload
is a `crash` row with the broker's last words, long before the workload's time limit."""
from __future__ import annotations

import json
import os
import signal
import textwrap
import threading
import time
from pathlib import Path

import pytest

from conformance.cli import main
from conformance.clients.registry import CLIENTS
from conformance.dsl import load_case
from conformance.history import ANOMALIES
from conformance.results import ResultsFile
from conformance.runner import RowContext, TargetSlot, run_one
from conformance.targets import TARGETS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SPEC = """\
title: a short workload
workload:
  seed: 5
  time_limit_s: {time_limit}
  op_limit: 3000
  settle_s: 60
  generate: {{producers: 1, idempotent: 1, transactional: 2, copiers: 1, readers: 2, faults: [client],
              fault_gap_s: [3, 5], churn: false}}
"""


@pytest.fixture(autouse=True)
def _need_embedded_and_confluent():
    for ok, why in (TARGETS["embedded"].availability(), CLIENTS["confluent"].availability()):
        if not ok:
            pytest.skip(why)


def _case(tmp_path: Path, time_limit: int):
    cases = tmp_path / "cases"
    (cases / "w").mkdir(parents=True, exist_ok=True)
    path = cases / "w" / f"short_{time_limit}.yaml"
    path.write_text(textwrap.dedent(SPEC.format(time_limit=time_limit)))
    return load_case(path, cases)


def test_a_workload_row_has_its_history_checks_and_timeline(tmp_path: Path):
    case = _case(tmp_path, 15)
    slot = TargetSlot("embedded", {}, tmp_path / "work", "auto")
    ctx = RowContext("test-run", tmp_path / "results")
    try:
        row = run_one(case, slot, "confluent", ctx, fresh=True)
    finally:
        slot.release()
    names = {c.name for c in row.checks}
    assert {f"no {kind}" for kind in ANOMALIES} <= names
    assert row.verdict == "pass", row.failed_checks
    w = row.workload
    assert w["by_op"]["txn"]["ok"] > 0 and w["by_op"]["send"]["ok"] > 0 and w["by_op"]["poll"]["ok"] > 0
    assert w["faults"] >= 1                      # the client crashes the schedule asked for
    assert w["anomalies"] == {}
    history = [json.loads(x) for x in (ctx.results_dir / row.artifacts["history"]).read_text().splitlines()]
    invoked = {e["index"] for e in history if e["type"] == "invoke"}
    completed = {e["invoke"] for e in history if e["type"] != "invoke"}
    assert invoked == completed, "every operation of the history completed (ok, fail or info)"
    assert any(e["process"] == "nemesis" and e["value"].get("kind") == "client" for e in history)
    page = (ctx.results_dir / row.artifacts["timeline"]).read_text()
    assert page.startswith("<!doctype html>") and "<svg" in page
    assert row.outcome == {"anomalies": [], "wire_errors": row.outcome["wire_errors"],
                           "client_errors": row.outcome["client_errors"]}

    # `kconform workload --compare-with DIR`: an earlier run's rows join this run's comparison
    earlier = tmp_path / "earlier"
    ResultsFile(earlier).write([row])
    again = tmp_path / "again"
    assert main(["workload", str(tmp_path / "cases" / "w" / "short_15.yaml"), "--time-limit", "4",
                 "--client", "confluent", "--results", str(again), "--compare-with", str(earlier),
                 "--no-progress"]) == 0
    cmp = json.loads((again / "comparison.json").read_text())
    (new_row,) = ResultsFile(again).read()
    assert cmp["targets"]["embedded"]["rows"] == 2
    assert cmp["targets"]["embedded"]["operations"] == w["operations"] + new_row.workload["operations"]
    assert main(["workload", "--results", str(tmp_path / "x"), "--compare-with", str(tmp_path / "none")]) == 2


def test_a_broker_that_dies_mid_workload_is_a_crash_with_its_log_not_a_hang(tmp_path: Path):
    case = _case(tmp_path, 120)
    slot = TargetSlot("embedded", {}, tmp_path / "work", "auto")
    ctx = RowContext("test-run", tmp_path / "results")

    def kill_once_running() -> None:
        end = time.monotonic() + 60
        while time.monotonic() < end and (slot.target is None or not slot.target.procs):
            time.sleep(0.05)
        time.sleep(5)
        for proc in list(slot.target.procs.values()) if slot.target else []:
            os.kill(proc.pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_once_running, daemon=True)
    killer.start()
    try:
        row = run_one(case, slot, "confluent", ctx, fresh=True)
    finally:
        killer.join(timeout=5)
        slot.release()
    assert row.verdict == "crash", row.reason
    assert "node 1's process" in row.reason and "exited with code -9" in row.reason
    assert row.duration_s < case.workload.time_limit_s, "the workload ended when the broker died"
    crash = (ctx.results_dir / row.artifacts["crash"]).read_text()
    assert crash.startswith(row.reason)
