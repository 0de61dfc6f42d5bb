"""How a run's rows reach results.jsonl (runner.RunRecord), for `kconform run` and the pytest
plugin alike.

Why: rows finish in any order when several run at once, and a row's diff needs the reference
target's row of the same case and client. Each row is appended as it finishes (an interrupted
run keeps it) -- with its diff when the reference's row is already there, as it always is in
the pytest plugin, whose failure message shows the diff -- and the file is rewritten at the end
in the plan's order with every diff. No target starts here: the rows are made by hand."""
from __future__ import annotations

import json

from conformance.results import Row, Verdict
from conformance.runner import RunRecord


def row(target: str, case: str, verdict: Verdict = Verdict.PASS, value: str = "v") -> Row:
    return Row(run_id="r", started_at="", case=case, case_title=case, target=target, client="confluent",
               verdict=verdict, outcome={"reads": {"t-0": [value]}})


def lines(path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_rows_are_appended_as_they_finish_and_rewritten_in_plan_order_with_their_diffs(tmp_path):
    record = RunRecord(tmp_path, reference="apache-kafka")
    ours = row("embedded", "txn/a", value="aborted")
    na = row("embedded", "txn/b", Verdict.NOT_APPLICABLE)
    ref_a, ref_b = row("apache-kafka", "txn/a"), row("apache-kafka", "txn/b")
    for r in (ours, na, ref_a):   # a parallel run: the reference's row of txn/a finishes last
        record.add(r)
    assert [(x["case"], x["target"], x["diff"]) for x in lines(tmp_path / "results.jsonl")] == [
        ("txn/a", "embedded", None), ("txn/b", "embedded", None), ("txn/a", "apache-kafka", None)]
    record.add(ref_b)
    rows = record.finish([ref_a, ref_b, ours, na])
    final = lines(tmp_path / "results.jsonl")
    assert [(x["target"], x["case"]) for x in final] == [(r.target, r.case) for r in rows]
    assert final[2]["reference_target"] == "apache-kafka"
    assert final[2]["diff"] == [{"path": "reads.t-0[0]", "reference": "v", "actual": "aborted"}]
    assert final[3]["diff"] is None and final[3]["reference_target"] is None  # it did not run
    assert final[0]["diff"] is None  # the reference itself


def test_a_row_after_its_reference_is_appended_with_its_diff(tmp_path):
    record = RunRecord(tmp_path, reference="apache-kafka")
    record.add(row("apache-kafka", "txn/a"))
    same = row("embedded", "txn/a")
    record.add(same)
    assert same.reference_target == "apache-kafka" and same.diff == []
    assert lines(tmp_path / "results.jsonl")[1]["diff"] == []
