"""The runner end to end on the embedded broker with the confluent client: real broker processes,
real driver processes, real sockets. Each test bounds its run by the cases' own deadlines."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from conformance.clients.registry import CLIENTS
from conformance.cli import main
from conformance.dsl import load_cases
from conformance.runner import RunOptions, run
from conformance.targets import TARGETS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SCHEMA_FIELDS = {"run_id", "started_at", "case", "case_title", "tags", "target", "target_version", "client",
                 "client_version", "verdict", "checks", "outcome", "diff", "reference_target", "duration_s",
                 "reason", "artifacts"}


@pytest.fixture(autouse=True)
def _need_embedded_and_confluent():
    ok, why = TARGETS["embedded"].availability()
    if not ok:
        pytest.skip(why)
    ok, why = CLIENTS["confluent"].availability()
    if not ok:
        pytest.skip(why)


def write_case(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def test_library_cases_pass_and_rows_follow_the_schema(tmp_path):
    cases = load_cases(["txn/basic_abort", "zombie/fence_on_commit", "cluster/coordinator_kill_mid_txn",
                        "coordinator/crash_after_prepare_commit", "idempotence/lost_response_non_idempotent"])
    rows = run(RunOptions(targets=["embedded"], clients=["confluent"], cases=cases, results_dir=tmp_path))
    lines = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(lines) == len(rows) == 5
    for row in lines:
        assert SCHEMA_FIELDS <= set(row), SCHEMA_FIELDS - set(row)
        assert (tmp_path / row["artifacts"]["steps"]).exists()
    verdicts = {r["case"]: r for r in lines}
    # a multi-node case runs on the embedded target's cluster
    for case in ("txn/basic_abort", "zombie/fence_on_commit", "coordinator/crash_after_prepare_commit",
                 "idempotence/lost_response_non_idempotent", "cluster/coordinator_kill_mid_txn"):
        row = verdicts[case]
        assert row["verdict"] == "pass", (case, row["reason"], [c for c in row["checks"] if not c["passed"]])
    abort = verdicts["txn/basic_abort"]["outcome"]
    assert [r["value"] for r in abort["reads"]["read_committed"]["t1-0"]] == [f"c{i}" for i in range(5)]
    assert len(abort["reads"]["read_uncommitted"]["t1-0"]) == 10
    # names are the case's own in the outcome; producer ids and timings are masked
    text = json.dumps(abort)
    assert "producer_id" not in text and "elapsed_ms" not in text
    fenced = [s for s in verdicts["zombie/fence_on_commit"]["outcome"]["steps"] if s["step"] == 7][0]
    assert fenced["error"]["name"] == "PRODUCER_FENCED"
    crash = verdicts["coordinator/crash_after_prepare_commit"]
    assert [f["fault"] for f in crash["outcome"]["faults"]][-1].startswith("restart coordinator")
    dup = verdicts["idempotence/lost_response_non_idempotent"]
    assert dup["artifacts"].get("transcript")
    assert any(c["name"].startswith("proxy fault sever") and c["passed"] for c in dup["checks"])


def test_a_wrong_expectation_fails_and_the_cli_exits_nonzero(tmp_path):
    root = tmp_path / "cases"
    write_case(root, "x/wrong.yaml", """
        title: expects a record that is never written
        topology: {topics: [t1]}
        actors: {p1: {role: producer}}
        steps:
          - {actor: p1, op: send, topic: t1, partition: 0, key: k, value: written}
        checks:
          - {check: records, isolation: read_uncommitted, topic: t1, values: [something-else]}
    """)
    results = tmp_path / "results"
    rc = main(["run", "--client", "confluent", "--cases-dir", str(root), "--results", str(results), "--no-progress"])
    assert rc == 1
    row = json.loads((results / "results.jsonl").read_text())
    assert row["verdict"] == "fail"
    failed = [c for c in row["checks"] if not c["passed"]]
    assert "written" in failed[0]["message"] and "something-else" in failed[0]["message"]


def test_invalid_case_is_reported_with_file_and_field(tmp_path, capsys):
    root = tmp_path / "cases"
    write_case(root, "bad.yaml", """
        title: bad
        steps:
          - {actor: nobody, op: flush}
    """)
    rc = main(["run", "--cases-dir", str(root), "--results", str(tmp_path / "r"), "--no-progress"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "bad.yaml: steps[0].actor: expected an actor declared under `actors`" in err


def test_expected_error_step_and_background_await(tmp_path):
    root = tmp_path / "cases"
    write_case(root, "bg.yaml", """
        title: background commit awaited later, and a refused second init
        topology: {topics: [t1]}
        actors: {p1: {role: producer, config: {transactional.id: bg-1}}}
        steps:
          - p1: init_transactions
          - {actor: p1, op: init_transactions, expect: ILLEGAL_STATE}
          - p1: begin_transaction
          - {actor: p1, op: send, topic: t1, partition: 0, key: k, value: v}
          - {actor: p1, op: commit_transaction, background: true, id: c}
          - {await: c, expect: ok}
        checks:
          - {check: records, isolation: read_committed, topic: t1, values: [v]}
          - {check: offsets, topic: t1, high_watermark: 2, last_stable: 2}
    """)
    rows = run(RunOptions(targets=["embedded"], clients=["confluent"], cases=load_cases(root=root),
                          results_dir=tmp_path / "r"))
    assert rows[0].verdict == "pass", rows[0]
