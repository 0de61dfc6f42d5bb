"""Spark analytics over real-looking runs: matrix, divergences, flaky cases, durations.

Outside the default test run (``tox -e analytics``): needs PySpark and Java 17.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="analytics is the optional extra 'analytics' (PySpark)")
pytest.importorskip("matplotlib", reason="analytics is the optional extra 'analytics' (matplotlib)")
if shutil.which("java") is None:
    pytest.skip("PySpark needs Java 17 on PATH", allow_module_level=True)

from reports.analytics import analyze  # noqa: E402
from reports.analytics.spark import spark_session  # noqa: E402
from tests.reports.rowgen import CASES, CLIENTS, TARGETS, run_id_for, write_run  # noqa: E402

FLIP_MIDDLE = ("txn/basic_commit", "embedded", "java")      # fail in run 1 only
FLIP_LAST = ("txn/empty_commit", "tansu", "confluent")       # error in the last run only


@pytest.fixture(scope="module")
def spark():
    s = spark_session("local[2]", driver_memory="512m")
    yield s
    s.stop()


def _csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _rows(root: Path) -> list[dict]:
    return [json.loads(line) for p in sorted(root.rglob("results.jsonl")) for line in p.open()]


def _percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    pos = p * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("results")
    for i, override in enumerate((None, {FLIP_MIDDLE: "fail"}, {FLIP_LAST: "error"})):
        rid, t = run_id_for(i)
        write_run(root, rid, t, artifacts=False, seed=i, verdict_overrides=override)
    return root


def test_three_runs_matrix_flaky_divergences_durations(spark, three_runs, tmp_path):
    out = tmp_path / "analytics"
    summary = analyze(three_runs, out, spark=spark)

    matrix = {(r["case"], r["target"], r["client"]): r for r in _csv(out / "matrix.csv")}
    assert len(matrix) == len(CASES) * len(TARGETS) * len(CLIENTS)
    assert matrix[FLIP_MIDDLE]["verdict"] == "pass"          # failed in run 1, passed again in run 2
    assert matrix[FLIP_LAST]["verdict"] == "error"           # the latest run's verdict wins
    assert matrix[FLIP_LAST]["run_id"] == run_id_for(2)[0]
    assert matrix[("txn/basic_abort", "tansu", "java")]["verdict"] == "fail"
    assert matrix[("txn/basic_abort", "tansu", "java")]["diverges"] == "True"
    assert matrix[("txn/basic_abort", "apache-kafka", "java")]["diverges"] == "False"
    assert matrix[("txn/coordinator_crash_after_prepare", "tansu", "kafka-python")]["verdict"] == "not_applicable"
    wide = {r["case"]: r for r in _csv(out / "matrix_wide.csv")}
    assert wide["txn/empty_commit"]["tansu/confluent"] == "error"

    flaky = _csv(out / "flaky.csv")
    assert {(f["case"], f["target"], f["client"]) for f in flaky} == {FLIP_MIDDLE, FLIP_LAST}
    middle = next(f for f in flaky if (f["case"], f["target"], f["client"]) == FLIP_MIDDLE)
    assert (middle["runs"], middle["changes"], middle["verdicts"], middle["latest_verdict"]) == \
           ("3", "2", "fail:1 pass:2", "pass")
    assert "txn/basic_commit on embedded dev with java 4.1.0" in summary

    rows = _rows(three_runs)
    diverging = {(r["case"], r["target"], r["client"]) for r in rows if r["diff"]}
    div = {(d["case"], d["target"], d["client"]): d for d in _csv(out / "divergences.csv")}
    assert set(div) == diverging and len(div) == 6 * 3 + 3
    d = div[("txn/timeout_expiry", "embedded", "java")]
    starts = sorted(r["started_at"] for r in rows
                    if (r["case"], r["target"], r["client"]) == ("txn/timeout_expiry", "embedded", "java"))
    assert (d["first_seen"][:19], d["last_seen"][:19]) == (starts[0][:19], starts[-1][:19])
    assert d["runs"] == "3" and d["current"] == "True"
    assert d["paths"] == "steps[4].error.abortable steps[4].error.code steps[4].error.fatal steps[4].error.name"
    assert d["reference_target"] == "apache-kafka"

    dur = {r["target"]: r for r in _csv(out / "durations.csv")}
    for target, _ in TARGETS:
        xs = [r["duration_s"] for r in rows if r["target"] == target]
        for p, col in ((0.5, "p50_s"), (0.9, "p90_s"), (0.99, "p99_s")):
            assert float(dur[target][col]) == pytest.approx(_percentile(xs, p), abs=1e-3)
        assert int(dur[target]["rows"]) == len(xs)

    for name in ("matrix", "divergences", "flaky", "durations", "durations_by_client"):
        assert spark.read.parquet(str(out / f"{name}.parquet")).count() == len(_csv(out / f"{name}.csv"))
    for png in ("matrix.png", "durations.png", "trend.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "summary.txt").read_text() == summary
    assert "Flaky (verdict changed with the same versions): 2" in summary


def test_a_verdict_change_with_a_new_version_is_not_flaky(spark, tmp_path):
    root = tmp_path / "results"
    targets_new = [("apache-kafka", "4.1.0"), ("embedded", "dev-2"), ("tansu", "0.1.2")]
    cases = CASES[:3]
    for i, (targets, override) in enumerate(((TARGETS, None),
                                             (targets_new, {("txn/basic_commit", "embedded", "java"): "fail"}))):
        rid, t = run_id_for(i)
        write_run(root, rid, t, artifacts=False, seed=i, cases=cases, targets=targets, verdict_overrides=override)
    out = tmp_path / "analytics"
    analyze(root, out, spark=spark)
    assert _csv(out / "flaky.csv") == []
    matrix = {(r["case"], r["target"], r["client"]): r for r in _csv(out / "matrix.csv")}
    assert matrix[("txn/basic_commit", "embedded", "java")]["verdict"] == "fail"
    assert matrix[("txn/basic_commit", "embedded", "java")]["target_version"] == "dev-2"


def test_no_runs_is_an_error(spark, tmp_path):
    with pytest.raises(FileNotFoundError):
        analyze(tmp_path, tmp_path / "out", spark=spark)


def test_the_matrix_across_runs_of_peers(spark, tmp_path):
    """Two runs of the peers: the matrix keeps every cell's verdicts over the runs, says in one
    line how the latest diverges, and renders the compatibility page with the earlier verdicts."""
    from datetime import datetime, timezone

    from tests.reports.peerrows import EMPTY_ID_CHECK, write_peer_run

    root = tmp_path / "results"
    first = write_peer_run(root, "20261124T080000Z-peer01", datetime(2026, 11, 24, 8, 0, tzinfo=timezone.utc))
    second = write_peer_run(root, "20261125T080000Z-peer02", datetime(2026, 11, 25, 8, 0, tzinfo=timezone.utc))
    # In the first run kfake still passed the OffsetFetch case.
    rows = [json.loads(line) for line in (first / "results.jsonl").open()]
    for r in rows:
        if (r["case"], r["target"]) == ("groups/offset_fetch_unknown_group", "kfake"):
            r.update(verdict="pass", checks=[dict(c, passed=True, message="ok") for c in r["checks"]])
    (first / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    out = tmp_path / "analytics"
    summary = analyze(root, out, spark=spark)
    matrix = {(r["case"], r["target"], r["client"]): r for r in _csv(out / "matrix.csv")}
    assert len(matrix) == 6 * 3 * 2
    cell = matrix[("groups/offset_fetch_unknown_group", "kfake", "java")]
    assert (cell["verdict"], cell["history"], cell["runs"]) == ("fail", "pass fail", "2")
    assert cell["divergence"] == "step[0] raw.request: expected error='NONE', got 'GROUP_ID_NOT_FOUND'"
    crash = matrix[("wire/unknown_api_key", "kfake", "confluent")]
    assert (crash["verdict"], crash["history"]) == ("crash", "crash crash")
    assert crash["divergence"] == "died after step 0: node 0's process 31802 exited with code 2"
    assert matrix[("txn/empty_transactional_id", "kfake", "java")]["known_difference"].startswith("kfake answers")
    assert "Matrix across runs: 36 cells, 2 whose verdict changed over the runs" in summary
    assert ("groups/offset_fetch_unknown_group on kfake with java: fail (was pass) -- step[0] raw.request: "
            "expected error='NONE', got 'GROUP_ID_NOT_FOUND'") in summary

    page = (out / "compatibility.md").read_text()
    assert "❌ fail (was pass): step[0] raw.request: expected error='NONE', got 'GROUP_ID_NOT_FOUND'" in page
    assert "💥 crash: died after step 0" in page
    assert f"{EMPTY_ID_CHECK} -- holds (ok)" in page
    assert page.count("- `kconform run --target apache-kafka") == 2        # both runs named
    assert second.name in page and (out / "compatibility.html").is_file()
    assert spark.read.parquet(str(out / "matrix.parquet")).select("checks").count() == 36


def test_release_changes_find_where_kafka_broke_and_fixed_a_case(spark, tmp_path):
    """A release sweep (apache-kafka@V targets, in two runs, versions out of order) and the
    default target: per case x client, the release where the verdict moved, in version order
    (3.10.0 after 3.9.1, a -zk variant after its release), the latest run winning per release."""
    root = tmp_path / "results"
    cases, clients = CASES[:2], CLIENTS[:1]
    bug = ("txn/basic_commit", "confluent")
    older = [("apache-kafka@3.9.1", "3.9.1"), ("apache-kafka@3.5.2", "3.5.2"), ("apache-kafka@3.5.2-zk", "3.5.2")]
    newer = [("apache-kafka@3.10.0", "3.10.0"), ("apache-kafka", "4.3.1"), ("embedded", "dev")]
    runs = (
        (older, {(bug[0], "apache-kafka@3.9.1", bug[1]): "fail", (bug[0], "apache-kafka@3.5.2-zk", bug[1]): "fail"}),
        (newer, {(bug[0], "apache-kafka", bug[1]): "fail", (bug[0], "embedded", bug[1]): "fail"}),
        # 3.9.1 measured again, later: it passes now (the latest row per release wins)
        ([("apache-kafka@3.9.1", "3.9.1")], None),
    )
    for i, (targets, override) in enumerate(runs):
        rid, t = run_id_for(i)
        write_run(root, rid, t, artifacts=False, seed=i, cases=cases, targets=targets, clients=clients,
                  verdict_overrides=override)
    out = tmp_path / "analytics"
    summary = analyze(root, out, spark=spark)
    changes = [(c["case"], c["client"], c["from_release"], c["from_verdict"], c["to_release"], c["to_verdict"],
                c["change"]) for c in _csv(out / "release_changes.csv")]
    assert changes == [
        (bug[0], bug[1], "3.5.2", "pass", "3.5.2-zk", "fail", "regressed"),
        (bug[0], bug[1], "3.5.2-zk", "fail", "3.9.1", "pass", "fixed"),
        (bug[0], bug[1], "3.10.0", "pass", "4.3.1", "fail", "regressed"),
    ]
    assert "Apache Kafka release to release: 3 verdict change(s) per case x client (2 regressed, 1 fixed, 0 other)" \
        in summary
    assert spark.read.parquet(str(out / "release_changes.parquet")).count() == 3


def test_a_kafka_row_whose_target_never_started_names_no_release(spark, tmp_path):
    """A row on the default apache-kafka target whose cluster never came up records its version as
    "unknown" (an error row): it is no release, and the analysis of the runs goes on (measured: it
    failed casting "" to a release number, so `kconform analyze` failed on a real run)."""
    root = tmp_path / "results"
    cases, clients = CASES[:2], CLIENTS[:1]
    for i, version in enumerate(("4.3.1", "unknown", "4.2.0")):
        rid, t = run_id_for(i)
        write_run(root, rid, t, artifacts=False, seed=i, cases=cases, targets=[("apache-kafka", version)],
                  clients=clients, verdict_overrides={(cases[0][0], "apache-kafka", clients[0]): "error"} if i == 1 else None)
    out = tmp_path / "analytics"
    analyze(root, out, spark=spark)
    releases = {c["from_release"] for c in _csv(out / "release_changes.csv")} | \
        {c["to_release"] for c in _csv(out / "release_changes.csv")}
    assert "unknown" not in releases and "" not in releases


def test_a_consumer_protocol_run_keeps_cells_of_its_own(spark, tmp_path):
    """A `--group-protocol consumer` run of the same cases neither replaces the classic cells nor
    counts as their flips: its rows are cells of their own, named as the compatibility page's
    columns (reports/matrix.py client_column)."""
    from datetime import datetime, timezone

    from tests.reports.peerrows import write_peer_run

    root = tmp_path / "results"
    write_peer_run(root, "20261124T080000Z-peer01", datetime(2026, 11, 24, 8, 0, tzinfo=timezone.utc))
    kip848 = write_peer_run(root, "20261125T080000Z-kip848", datetime(2026, 11, 25, 8, 0, tzinfo=timezone.utc))
    rows = [dict(json.loads(line), group_protocol="consumer", verdict="fail")
            for line in (kip848 / "results.jsonl").open()]
    (kip848 / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "analytics"
    analyze(root, out, spark=spark)
    matrix = {(r["case"], r["target"], r["client"]): r for r in _csv(out / "matrix.csv")}
    assert len(matrix) == 2 * 36
    classic = matrix[("txn/basic_commit", "kfake", "java")]
    consumer = matrix[("txn/basic_commit", "kfake", "java (group.protocol=consumer)")]
    assert (classic["verdict"], classic["runs"], consumer["verdict"], consumer["runs"]) == ("pass", "1", "fail", "1")
    assert not [f for f in _csv(out / "flaky.csv") if f["client"] == "java"]
