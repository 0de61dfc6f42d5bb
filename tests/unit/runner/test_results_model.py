"""The results model (conformance/results.py): Row, Check, Verdict, the verdict exceptions and
ResultsFile, the one writer of results.jsonl.

Why these tests: results files outlive the code that wrote them -- the matrix and the Spark
analytics read every kept run -- so a row must read back as written, an older row must still
read, and a row the reports cannot trust must be refused with its file and line. The lines
below are as `kconform run` wrote them before the model existed (the first one verbatim from a
run on the embedded broker)."""
from __future__ import annotations

import json

import pytest

from conformance.results import (Check, NotApplicable, ResultsFile, Row, TargetCrashed, TargetUnavailable, Verdict,
                                 VerdictException)

#: A not-applicable row of `kconform run --proxy off` (2026-11-26), byte for byte.
OLD_NOT_APPLICABLE = (
    '{"run_id": "20261126T033211Z-c76305", "started_at": "2026-11-26T03:32:11Z", "case": '
    '"coordinator/end_txn_request_lost", "case_title": "The EndTxn request is lost on a severed connection - the '
    'client retries and commits", "tags": ["transactions", "coordinator", "proxy"], "scenario": ["S26"], "target": '
    '"embedded", "target_version": "unknown", "client": "confluent", "client_version": "2.16.0", "verdict": '
    '"not_applicable", "checks": [], "outcome": {}, "diff": null, "reference_target": null, "duration_s": 0.019, '
    '"reason": "the case needs the proxy, and this run has it off (--proxy off)", "artifacts": {"steps": '
    '"artifacts/embedded/confluent/coordinator__end_txn_request_lost/steps.json", "logs": []}, '
    '"known_difference": null}')


def old_pass_row(**extra) -> dict:
    """A passing row in the order the runner wrote its dict (unspecified, workload last)."""
    return {"run_id": "r1", "started_at": "2026-11-26T03:00:00Z", "case": "txn/basic_commit", "case_title": "t",
            "tags": ["transactions"], "scenario": [], "target": "embedded", "target_version": "0.1",
            "client": "confluent", "client_version": "2.16.0", "verdict": "pass",
            "checks": [{"name": "records", "passed": True, "message": "3 records as expected"}],
            "outcome": {"steps": [{"step": 0, "op": "send", "ok": True}]}, "diff": None, "reference_target": None,
            "duration_s": 1.5, "reason": None, "artifacts": {"steps": "s.json", "logs": []},
            "known_difference": None, **extra}


def test_rows_of_the_runner_read_back_byte_for_byte():
    assert Row.from_dict(json.loads(OLD_NOT_APPLICABLE)).to_json() == OLD_NOT_APPLICABLE
    for extra in ({"unspecified": 0}, {"workload": {"seed": 1, "anomalies": {}}, "unspecified": 0}):
        line = json.dumps(old_pass_row(**extra))
        assert Row.from_dict(json.loads(line)).to_json() == line


def test_a_row_written_by_an_older_kconform_reads_with_defaults():
    row = Row.from_dict({"run_id": "r", "case": "txn/x", "target": "embedded", "client": "java", "verdict": "fail",
                         "checks": [{"name": "c", "passed": False}]})
    assert row.verdict is Verdict.FAIL and row.case_title == "txn/x" and row.tags == [] and row.diff is None
    assert row.checks == [Check("c", False, "")] and row.unspecified is None and row.workload is None
    assert "unspecified" not in row.to_dict() and "workload" not in row.to_dict()


@pytest.mark.parametrize("line, why", [
    ({"case": "x", "target": "t", "client": "c", "verdict": "pass"}, "missing run_id"),
    ({"run_id": "r", "case": "x", "target": "t", "client": "c", "verdict": "skipped"}, "verdict 'skipped'"),
])
def test_a_row_reports_cannot_trust_is_refused_with_its_line(tmp_path, line, why):
    (tmp_path / "results.jsonl").write_text(OLD_NOT_APPLICABLE + "\n\n" + json.dumps(line) + "\n")
    with pytest.raises(ValueError, match=f"results.jsonl:3: {why}"):
        ResultsFile(tmp_path).read_dicts()


def test_the_reports_get_the_rows_as_written_with_the_optional_fields_defaulted(tmp_path):
    old = {"run_id": "r", "case": "txn/x", "target": "embedded", "client": "java", "verdict": "fail",
           "extra_field": 1}
    (tmp_path / "results.jsonl").write_text(json.dumps(old) + "\n" + OLD_NOT_APPLICABLE + "\n")
    first, second = ResultsFile(tmp_path).read_dicts()
    assert first["extra_field"] == 1 and first["case_title"] == "txn/x" and first["checks"] == []
    assert first["artifacts"] == {} and first["duration_s"] == 0.0 and first["reason"] is None
    # absent, not null: the matrix takes the case library's documented difference for such a row
    assert "known_difference" not in first
    assert second == json.loads(OLD_NOT_APPLICABLE)


def test_the_file_is_started_appended_to_and_rewritten(tmp_path):
    results = ResultsFile(tmp_path / "run")
    results.start()
    a, b = Row.from_dict(old_pass_row()), Row.from_dict(json.loads(OLD_NOT_APPLICABLE))
    results.append(a)
    results.append(b)
    assert [r.case for r in results.read()] == [a.case, b.case]
    results.write([b])
    assert results.path.read_text() == OLD_NOT_APPLICABLE + "\n"
    results.start()
    assert results.read() == []


def test_judge_decides_pass_or_fail_and_counts_the_unspecified_checks():
    row = Row.from_dict(old_pass_row(known_difference="the target answers X"))
    row.judge([Check("a", True, "ok"), Check("b", True, "not specified", unspecified=True)])
    assert (row.verdict, row.unspecified, row.reason) == (Verdict.PASS, 1, None)
    row.judge([Check("a", False, "got Y")])
    assert (row.verdict, row.unspecified) == (Verdict.FAIL, 0)
    assert row.reason == "known difference: the target answers X"
    assert [c.name for c in row.failed_checks] == ["a"]


def test_the_verdict_exceptions_are_one_family():
    assert all(issubclass(e, VerdictException) for e in (NotApplicable, TargetUnavailable, TargetCrashed))
    row = Row.from_dict(old_pass_row())
    row.end(TargetCrashed(3, "node 1's process exited with code -9"))
    assert (row.verdict, row.reason) == (Verdict.CRASH, "the target died after step 3: node 1's process exited "
                                                        "with code -9")
    row.end(TargetCrashed(None, "ApiVersions unanswered"))
    assert row.reason == "the target died by the end of the case: ApiVersions unanswered"
    row.end(NotApplicable("target 'tansu' lacks kill"))
    assert (row.verdict, row.reason) == (Verdict.NOT_APPLICABLE, "target 'tansu' lacks kill")
    row.end(TargetUnavailable("java is not installed"))
    assert (row.verdict, row.reason) == (Verdict.NOT_APPLICABLE, "java is not installed")


def test_a_verdict_is_its_string():
    assert Verdict.NOT_APPLICABLE == "not_applicable" and f"{Verdict.PASS:<6}|" == "pass  |"
    assert "fail" in {Verdict.FAIL} and json.dumps([Verdict.CRASH]) == '["crash"]'
    assert [v for v in Verdict if v.ran] == [Verdict.PASS, Verdict.FAIL]
    assert {v for v in Verdict if v.bad} == {Verdict.FAIL, Verdict.CRASH, Verdict.ERROR}
    assert {v for v in Verdict if v.diverges} == {Verdict.FAIL, Verdict.CRASH}
