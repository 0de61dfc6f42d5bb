"""A Flink job (Flink 2.2.1 MiniCluster, flink-connector-kafka 5.0.0-2.2, built from
conformance/apps/flink by Maven) against the real embedded broker as one row: a task failure,
the job killed and restored from its last checkpoint, every record read exactly once, in order."""
from __future__ import annotations

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

CELL = """\
title: a Flink EXACTLY_ONCE job, a task failure, then killed and restored
application:
  kind: flink_eos
  records: 3000
  record_delay_ms: 5
"""


def test_a_task_failure_and_a_restore_from_checkpoint_keep_exactly_once(run_cell):
    row, _ = run_cell(CELL, "apps/flink_cell")
    app = row.application
    assert app["output"]["read"] == 3000 and app["output"]["duplicates"] == app["output"]["losses"] == 0
    assert app["task_failure_at_s"] is not None and app["job_starts"] == 2
    kill = app["kill"]
    assert kill["landed"] and kill["exit"] == -9 and kill["restore_from"].startswith("chk-")
    assert {c.name for c in row.checks} >= {"seeded", "task_failure_recovered", "kill_landed", "restored_job_copied",
                                            "no_duplicates", "no_losses", "order"}
