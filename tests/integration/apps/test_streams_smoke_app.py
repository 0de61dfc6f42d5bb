"""Kafka Streams' smoke test (the kafka-streams test jar from Maven Central) against the real
embedded broker as one row: three processors one after another, the first two killed while the
driver writes, and the driver's own verification of every output topic."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

CELL = """\
title: streams_smoke_test, exactly_once_v2, processors killed
application:
  kind: streams_smoke
  processing_guarantee: exactly_once_v2
  crash: true
"""


def test_processors_killed_while_the_driver_writes_still_verify_exactly_once(run_cell, tmp_path: Path):
    row, kept = run_cell(CELL, "apps/streams_cell", fresh=False)
    # the program's fixed topic names: the instance is never handed to another row
    assert not kept
    app = row.application
    assert app["driver_result"] == "SUCCESS" and row.client_version.startswith("kafka-streams ")
    killed = [p for p in app["processors"] if "stopped_at_s" in p]
    assert len(killed) == 2 and all(p["exit"] == -9 and not p["driver_verifying"] for p in killed)
    assert {c.name for c in row.checks} == {"processors_ran", "stops_landed", "verified"}
    # the processors' RocksDB state (hundreds of MB) is not kept with the row
    assert not [p for p in (tmp_path / "results").rglob("*") if p.is_dir() and "state" in p.name]
    # the Streams clients' transactions crossed the proxy, and their answers were counted
    lines = (tmp_path / "results" / row.artifacts["transcript"]).read_text().splitlines()
    assert any(json.loads(x).get("api_key") == 26 for x in lines)  # EndTxn
