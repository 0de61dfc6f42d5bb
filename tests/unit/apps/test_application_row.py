"""An application row as the results file and the reports carry it: `application` written and
read back, attached to its Allure result (its own theme, `apps`), summarised in JUnit."""
from __future__ import annotations

import json
from pathlib import Path

from conformance.results import Check, ResultsFile, Row, Verdict
from conformance.runner.row import application_outcome
from reports.allure_results import _Writer, row_to_result
from reports import junit

SUMMARY = {"application": "transactions_test", "bounce_target": "brokers", "failure_mode": "hard_bounce",
           "messages": 20000, "copy_s": 41.2, "bounces_landed": 3, "bounces_done": 3,
           "output": {"read": 20001, "distinct": 20000, "duplicates": 1, "losses": 0, "unexpected": 0},
           "concurrent": {"read": 20000, "distinct": 20000, "duplicates": 0, "losses": 0, "unexpected": 0},
           "wire_errors": {"Produce": {"NOT_ENOUGH_REPLICAS": 12, "NOT_LEADER_OR_FOLLOWER": 3}}}


def _row() -> Row:
    row = Row(run_id="r", started_at="2026-11-26T17:00:00Z", case="apps/transactions/brokers-hard_bounce-group_metadata",
              case_title="cell", target="embedded", client="java", application=SUMMARY,
              outcome=application_outcome(SUMMARY))
    row.judge([Check("no_duplicates", False, "output: 1 duplicates in 20001 read_committed records")])
    return row


def test_the_outcome_keeps_counts_that_must_be_zero_and_error_kinds():
    assert application_outcome(SUMMARY) == {
        "output": {"duplicates": 1, "losses": 0, "unexpected": 0},
        "concurrent": {"duplicates": 0, "losses": 0, "unexpected": 0},
        "wire_errors": {"Produce": ["NOT_ENOUGH_REPLICAS", "NOT_LEADER_OR_FOLLOWER"]}}


def test_application_is_written_and_read_back(tmp_path: Path):
    f = ResultsFile(tmp_path)
    f.write([_row()])
    (back,) = f.read()
    assert back.application == SUMMARY and back.verdict is Verdict.FAIL
    assert json.loads((tmp_path / "results.jsonl").read_text())["application"]["bounces_landed"] == 3


def test_allure_attaches_the_application_summary(tmp_path: Path):
    result = row_to_result(_row().to_dict(), tmp_path, _Writer(tmp_path), None)
    (att,) = [a for a in result["attachments"] if a["name"].startswith("application")]
    assert json.loads((tmp_path / att["source"]).read_text())["output"]["duplicates"] == 1
    assert {"name": "parentSuite", "value": "apps"} in result["labels"]


def test_junit_says_what_the_application_counted(tmp_path: Path):
    out = junit.testcase(_row().to_dict(), tmp_path, baselined=False).find("system-out").text
    assert "1 duplicates, 0 losses, bounces landed 3 of 3" in out


def test_an_application_cell_is_one_row_per_target_with_the_tools_client():
    from conformance.dsl import load_cases
    from conformance.runner.runner import plan

    cells = load_cases(["apps/transactions/brokers-hard_bounce-group_metadata", "txn/basic_commit"])
    rows = plan(["embedded", "apache-kafka"], cells, ["confluent", "kafka-python"], "apache-kafka")
    apps = [(r.target, r.client, r.how.shared) for r in rows if r.case.application is not None]
    assert apps == [("apache-kafka", "java", False), ("embedded", "java", False)]
    assert len([r for r in rows if r.case.application is None]) == 4
