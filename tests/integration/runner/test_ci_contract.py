"""`kconform run` as a CI step, on the real embedded broker: a row that fails as its baseline says
exits 0 (and is skipped in the JUnit XML with its reason and link), the same failure without the
entry exits 1 naming the row, a passing row the baseline expects to fail exits 1 too (the entry
is stale), `--strict` keeps the exit from before baselines, and `--update-baseline` writes the
baseline the run measured -- which then makes the same run exit 0."""
from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conformance.clients import CLIENTS
from conformance.targets import TARGETS

REPO = Path(__file__).resolve().parents[3]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> Path:
    """Two cases: basic/produce_consume as the library has it (passes), and a copy expecting a
    fourth record the case never sends (fails: a divergence we know of)."""
    for ok, why in (TARGETS["embedded"].availability(), CLIENTS["confluent"].availability()):
        if not ok:
            pytest.skip(why)
    root = tmp_path_factory.mktemp("cases")
    (root / "basic").mkdir()
    text = (REPO / "cases" / "basic" / "produce_consume.yaml").read_text()
    (root / "basic" / "produce_consume.yaml").write_text(text)
    (root / "basic" / "four_records.yaml").write_text(
        text.replace("values: [v0, v1, v2]}\n  - {check: records, isolation: read_committed",
                     "values: [v0, v1, v2, v3]}\n  - {check: records, isolation: read_committed"))
    return root


def kconform(cases: Path, tmp: Path, name: str, *extra: str) -> tuple[int, str, Path]:
    results = tmp / name
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--target", "embedded", "--client",
                           "confluent", "--cases-dir", str(cases), "--results", str(results), "-j", "2",
                           "--no-progress", "--junit", str(results / "junit.xml"), *extra],
                          capture_output=True, text=True, timeout=500, cwd=REPO)
    return proc.returncode, proc.stderr, results


def test_the_exit_status_follows_the_baseline(cases, tmp_path):
    baselines = tmp_path / "baselines"
    baselines.mkdir()
    (baselines / "embedded.yaml").write_text(
        "target: embedded\nexpected:\n  basic/four_records:\n    verdict: fail\n"
        "    reason: the case wants a record nobody sends\n    link: https://tracker/4\n")
    rc, err, results = kconform(cases, tmp_path, "known", "--baseline", str(baselines))
    rows = {r["case"]: r for r in map(json.loads, (results / "results.jsonl").read_text().splitlines())}
    assert rc == 0, err[-3000:]
    assert rows["basic/four_records"]["verdict"] == "fail" and rows["basic/four_records"]["status"] == "expected_fail"
    assert rows["basic/produce_consume"]["status"] == "pass"
    assert "1 row(s) fail as their baseline expects" in err
    skipped = ET.parse(results / "junit.xml").getroot().find(".//testcase[@name='basic/four_records']/skipped")
    assert skipped.get("type") == "expected_fail" and "https://tracker/4" in skipped.get("message")

    rc, err, _ = kconform(cases, tmp_path, "strict", "--baseline", str(baselines), "--strict")
    assert rc == 1

    rc, err, results = kconform(cases, tmp_path, "none", "--no-baseline")
    assert rc == 1 and "NEWLY FAILS" not in err    # no baseline at all: failures are failures, as before

    (baselines / "embedded.yaml").write_text((baselines / "embedded.yaml").read_text() + (
        "  basic/produce_consume: {verdict: fail, reason: stale, link: https://tracker/9}\n"))
    rc, err, results = kconform(cases, tmp_path, "stale", "--baseline", str(baselines))
    assert rc == 1
    assert "NEWLY PASSES: basic/produce_consume [embedded-confluent] -- passes; the baseline expects fail: stale" in err
    failure = ET.parse(results / "junit.xml").getroot().find(".//testcase[@name='basic/produce_consume']/failure")
    assert failure.get("type") == "unexpected_pass"


def test_update_baseline_writes_what_the_run_measured(cases, tmp_path):
    rc, err, _ = kconform(cases, tmp_path, "measure", "--no-baseline", "--write-baseline", str(tmp_path / "bl"))
    assert rc == 1
    text = (tmp_path / "bl" / "embedded.yaml").read_text()
    assert "basic/four_records" in text and "basic/produce_consume" not in text
    rc, err, _ = kconform(cases, tmp_path, "again", "--baseline", str(tmp_path / "bl"))
    assert rc == 0, err[-3000:]
