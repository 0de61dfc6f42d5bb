"""Kafka Connect's exactly-once source support (connect-runtime and connect-file from Maven
Central) against the real embedded broker as one row: the worker killed while it copies, every
line read exactly once, in order, by read_committed readers."""
from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

CELL = """\
title: a Connect worker with exactly-once source support, killed twice
application:
  kind: connect_eos_source
  lines: 6000
  write_s: 12
  kills: 2
  kill_every: 1500
"""


def test_a_worker_killed_mid_copy_resumes_exactly_once(run_cell, tmp_path: Path):
    row, _ = run_cell(CELL, "apps/connect_cell")
    app = row.application
    assert app["output"]["read"] == 6000 and app["output"]["duplicates"] == app["output"]["losses"] == 0
    assert app["worker_starts"] == 3 and all(k["landed"] and k["exit"] == -9 for k in app["kills"])
    # the task wrote in transactions: EndTxn crossed the proxy, each commit named by the coordinator
    assert "EndTxn" not in app["wire_errors"] or "PRODUCER_FENCED" not in app["wire_errors"]["EndTxn"]
    transcript = (tmp_path / "results" / row.artifacts["transcript"]).read_text()
    assert '"api_name":"EndTxn"' in transcript.replace(" ", "")
