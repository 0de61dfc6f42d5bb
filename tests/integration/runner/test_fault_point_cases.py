"""`pause` at a protocol point through the runner, on the embedded target with the confluent
client: the realiser sees the node stopped (state T) and marks it paused, `resume` continues it,
`restart` after a fired pause starts it without that point, and two points arm in one case."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from conformance.clients.registry import CLIENTS
from conformance.dsl import load_cases
from conformance.runner import RunOptions, run
from conformance.targets import TARGETS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(autouse=True)
def _need_embedded_and_confluent():
    for ok, why in (TARGETS["embedded"].availability(), CLIENTS["confluent"].availability()):
        if not ok:
            pytest.skip(why)


HEAD = """\
    title: {title}
    scenario: S09
    tags: [transactions, coordinator, pause, fault-point]
    description: test case
    topology:
      topics: [{{name: t1, partitions: 2}}]
    actors:
      p1: {{role: producer, config: {{transactional.id: txn-1}}}}
    steps:
      - p1: init_transactions
      - p1: begin_transaction
      - {{actor: p1, op: send, topic: t1, partition: 0, key: a, value: "1"}}
      - {{actor: p1, op: send, topic: t1, partition: 1, key: b, value: "2"}}
"""
TAIL = """\
    checks:
      - {check: records, isolation: read_committed, topic: t1, values: ["1", "2"]}
"""

CASES = {
    "x/pause_then_restart": """\
      - fault: {pause: coordinator, of: txn-1, at: after_prepare_durable}
      - {actor: p1, op: commit_transaction, background: true, id: commit, deadline_ms: 60000}
      - wait_fault: {timeout_ms: 20000}
      - fault: {restart: coordinator, of: txn-1}
      - {await: commit, expect: ok, timeout_ms: 60000}
""",
    "x/pause_then_crash": """\
      - fault: {pause: coordinator, of: txn-1, at: after_prepare_durable}
      - fault: {crash: coordinator, of: txn-1, at: after_complete}
      - {actor: p1, op: commit_transaction, background: true, id: commit, deadline_ms: 60000}
      - wait_fault: {timeout_ms: 20000}
      - fault: {resume: coordinator, of: txn-1}
      - wait_fault: {timeout_ms: 20000}
      - fault: {restart: coordinator, of: txn-1}
      - {await: commit, expect: any, timeout_ms: 60000}
      - {wait_ms: 1000, note: "markers may follow the answer"}
""",
}


def test_pause_restart_and_two_points_through_the_runner(tmp_path):
    root = tmp_path / "cases"
    for cid, steps in CASES.items():
        path = root / f"{cid}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(HEAD.format(title=cid)) + textwrap.indent(textwrap.dedent(steps), "  ")
                        + textwrap.dedent(TAIL))
    cases = load_cases([], root)
    results = tmp_path / "res"
    run(RunOptions(targets=["embedded"], clients=["confluent"], cases=cases, results_dir=results))
    rows = {r["case"]: r for r in map(json.loads, (results / "results.jsonl").read_text().splitlines())}
    for cid, row in rows.items():
        assert row["verdict"] == "pass", (cid, row["reason"], [c for c in row["checks"] if not c["passed"]])

    restart = rows["x/pause_then_restart"]
    assert [f["fault"] for f in restart["outcome"]["faults"]] == [
        "pause coordinator of txn-1 at after_prepare_durable",
        "pause coordinator of txn-1 at after_prepare_durable",
        "restart coordinator of txn-1"]
    assert restart["outcome"]["faults"][1]["fired"] is True
    log = broker_log(results, restart)
    # fired once, continued by the restart's SIGCONT, and the restarted broker runs unarmed
    assert log.count("after_prepare_durable reached: pause") == 1
    last_start = log[log.rindex("=== start"):].splitlines()[0]
    assert "kconform.fault" not in last_start

    both = rows["x/pause_then_crash"]
    fired = [f for f in both["outcome"]["faults"] if f.get("fired")]
    assert [f["fault"] for f in fired] == ["pause coordinator of txn-1 at after_prepare_durable",
                                           "crash coordinator of txn-1 at after_complete"]
    log = broker_log(results, both)
    order = [log.index(s) for s in ("after_prepare_durable reached: pause", "after_prepare_durable continued",
                                    "after_complete reached: crash")]
    assert order == sorted(order)


def broker_log(results: Path, row: dict) -> str:
    art = (results / row["artifacts"]["steps"]).parent
    logs = sorted(art.glob("broker-*.log"))
    assert logs, f"no broker log in {art}"
    return "".join(p.read_text(errors="replace") for p in logs)
