"""Kafka's transactions_test.py tools (kafka-tools from Maven Central) against the real embedded
broker as one row: the seed is copied exactly once, the row records the two reads, the copiers'
ends and the error codes per API that crossed the proxy."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

CELL = """\
title: a small transactions_test cell, the copiers killed once
application:
  kind: transactions_test
  bounce_target: clients
  failure_mode: hard_bounce
  bounce_rounds: 1
  messages: 3000
"""


def test_a_copier_killed_mid_copy_still_copies_exactly_once(run_cell, tmp_path: Path):
    row, _ = run_cell(CELL, "apps/cell")
    app = row.application
    assert app["output"]["read"] == app["messages"] == 3000
    assert app["output"]["duplicates"] == app["output"]["losses"] == 0
    # the kill landed while that copier was copying (it had made progress and was not finished)
    assert app["bounces_done"] >= 1 and app["bounces_landed"] >= 1
    assert any(b["landed"] and b["exit"] not in (0, None) for b in app["bounces"])
    # the copiers' transactions crossed the proxy, and their answers were counted
    assert row.artifacts.get("transcript")
    lines = (tmp_path / "results" / row.artifacts["transcript"]).read_text().splitlines()
    assert any(json.loads(x).get("api_key") == 26 for x in lines[:20000])  # EndTxn
    assert isinstance(app["wire_errors"], dict)
    assert {c.name for c in row.checks} >= {"seeded", "copiers_finished", "no_duplicates", "no_losses",
                                            "concurrent_no_duplicates", "concurrent_no_losses", "bounces_landed"}
