"""The history page (reports/history.py) over the shards of one release sweep: the shards read
as one run (named once, with its command and no machine path), and a regression case's first
release measured fixed comes from the rows of every shard."""
from __future__ import annotations

import json
from pathlib import Path

from reports.history import build, render

REGRESSION = {"key": "KAFKA-12671", "component": "broker", "affected": "<= 3.5.2", "fixed": "3.6.0",
              "summary": "a stray transactional Produce pins the LSO"}
COMMAND = "kconform run --target apache-kafka@3.5.2 --target apache-kafka@3.6.2 --client confluent"


def _row(case: str, target: str, verdict: str) -> dict:
    return {"run_id": "R", "case": case, "case_title": case, "target": target, "target_version": target.split("@")[1],
            "client": "confluent", "client_version": "2.16.0", "verdict": verdict, "checks": []}


def _shard(root: Path, i: int, rows: list[dict]) -> Path:
    d = root / f"shard{i}"
    d.mkdir(parents=True)
    (d / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "run.json").write_text(json.dumps({
        "run_id": "R", "status": "finished", "started_at": f"2026-11-26T08:0{i}:00Z",
        "finished_at": f"2026-11-26T08:1{i}:00Z", "command": f"{COMMAND} --shard {i}/2 --run-id R",
        "targets": ["apache-kafka@3.5.2", "apache-kafka@3.6.2"], "clients": ["confluent"],
        "shard": {"index": i, "count": 2, "split": "s1", "rows": len(rows), "planned_rows": 3}}))
    return d


def test_the_shards_of_a_release_sweep_are_one_run_and_find_the_fix(tmp_path):
    dirs = [_shard(tmp_path, 1, [_row("regressions/KAFKA-12671", "apache-kafka@3.5.2", "fail")]),
            _shard(tmp_path, 2, [_row("regressions/KAFKA-12671", "apache-kafka@3.6.2", "pass"),
                                 _row("txn/basic_commit", "apache-kafka@3.6.2", "pass")])]
    h = build(dirs, lambda case: REGRESSION if case == "regressions/KAFKA-12671" else None)
    assert h.releases == ["3.5.2", "3.6.2"]
    assert len(h.runs) == 1 and h.runs[0]["shard_count"] == 2
    page = render(h)
    runs = [line for line in page.splitlines() if line.startswith("- `kconform run")]
    assert runs == [f"- `{COMMAND} --shard I/2 --run-id R` -- run `R` as 2 shards (wall times 10 min 00 s, "
                    "10 min 00 s), started 2026-11-26T08:01:00Z"], runs
    assert str(tmp_path) not in page
    bug = next(line for line in page.splitlines() if line.startswith("| [KAFKA-12671]"))
    assert "| 3.6.2 | ❌ fail | ✅ pass |" in bug, bug


def test_a_row_of_the_default_release_that_never_started_counts_under_that_release():
    from reports.history import release_of
    from conformance.targets.maven import DEFAULT_KAFKA_VERSION
    not_started = {"target": "apache-kafka", "target_version": "unknown"}
    assert release_of(not_started) == DEFAULT_KAFKA_VERSION
    assert release_of({"target": "apache-kafka", "target_version": "4.3.1"}) == "4.3.1"
    assert release_of({"target": "apache-kafka@3.6.2", "target_version": "unknown"}) == "3.6.2"
    assert release_of({"target": "embedded", "target_version": "0.1"}) is None


def test_the_client_bug_table_has_only_the_bugs_own_clients(tmp_path):
    bug = {"key": "KAFKA-9279", "component": "java", "affected": "<= 3.1.2", "fixed": "3.2.0", "summary": "s"}
    rows = [dict(_row("regressions/KAFKA-9279", "apache-kafka@4.3.1", "not_applicable"), client="confluent"),
            dict(_row("regressions/KAFKA-9279", "apache-kafka@4.3.1", "fail"), client="java@3.1.0",
                 client_version="3.1.0"),
            dict(_row("regressions/KAFKA-9279", "apache-kafka@4.3.1", "pass"), client="java", client_version="4.4.0")]
    page = render(build([_shard(tmp_path, 1, rows)], lambda case: bug))
    header = next(line for line in page.splitlines() if line.startswith("| bug | what goes wrong | published"
                                                                          " affected -> fixed | java"))
    assert "confluent" not in header and "java@3.1.0 3.1.0 on 4.3.1" in header, header
    row = next(line for line in page.splitlines() if line.startswith("| KAFKA-9279 (java)"))
    assert row.endswith("| ❌ fail | ✅ pass |"), row
