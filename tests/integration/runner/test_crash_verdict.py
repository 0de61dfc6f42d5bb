"""A target that dies during a case is a `crash` row at once -- no step waits out its deadline on
the dead port -- and the next case gets a fresh target. Real embedded broker, real confluent
driver; the test SIGKILLs the broker process it made the runner start."""
from __future__ import annotations

import os
import signal
import textwrap
import threading
import time
from pathlib import Path

import pytest

from conformance.clients.registry import CLIENTS
from conformance.dsl import load_case
from conformance.runner import RowContext, TargetSlot, run_one
from conformance.targets import TARGETS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

CASE = """\
title: a send after a long wait
topology:
  topics: [t1]
actors:
  p1: {role: producer}
steps:
  - {wait_ms: 4000}
  - {actor: p1, op: send, topic: t1, partition: 0, value: a, deadline_ms: 40000}
"""


@pytest.fixture(autouse=True)
def _need_embedded_and_confluent():
    for ok, why in (TARGETS["embedded"].availability(), CLIENTS["confluent"].availability()):
        if not ok:
            pytest.skip(why)


def _kill_target_once_started(slot: TargetSlot, after_s: float, deadline_s: float = 60.0) -> threading.Thread:
    def work() -> None:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end and (slot.target is None or not slot.target.procs):
            time.sleep(0.05)
        time.sleep(after_s)
        for proc in list(slot.target.procs.values()) if slot.target else []:
            os.kill(proc.pid, signal.SIGKILL)

    t = threading.Thread(target=work, daemon=True)
    t.start()
    return t


def test_a_target_killed_mid_case_is_a_crash_row_without_waiting_out_the_step(tmp_path: Path):
    cases = tmp_path / "cases"
    (cases / "x").mkdir(parents=True)
    (cases / "x" / "wait_then_send.yaml").write_text(textwrap.dedent(CASE))
    case = load_case(cases / "x" / "wait_then_send.yaml", cases)
    slot = TargetSlot("embedded", {}, tmp_path / "work", "off")
    ctx = RowContext("test-run", tmp_path / "results")
    try:
        killer = _kill_target_once_started(slot, after_s=1.0)
        row = run_one(case, slot, "confluent", ctx, fresh=True)
        killer.join(timeout=5)
        assert row.verdict == "crash", row
        assert row.reason.startswith("the target died after step 0: node 1's process"), row.reason
        assert "exited with code -9" in row.reason
        # the 4 s wait, not the send's 40 s deadline
        assert row.duration_s < 20, row.duration_s
        crash = (ctx.results_dir / row.artifacts["crash"]).read_text()
        assert crash.startswith(row.reason)
        # the next case on the slot gets a fresh, live target
        again = run_one(load_case(cases / "x" / "wait_then_send.yaml", cases), slot, "confluent", ctx, fresh=False)
        assert again.verdict == "pass", again
    finally:
        slot.release()
