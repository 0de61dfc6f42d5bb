"""The compatibility page (reports/matrix.py) made from a peer run's results files."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from conformance.cli import main
from reports.matrix import build, one_line, shorten
from reports.matrix_page import cell_text, render_html, render_markdown
from tests.reports.peerrows import EMPTY_ID_CHECK, EMPTY_ID_DOC, NA_POINTS, write_peer_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return write_peer_run(tmp_path_factory.mktemp("runs"))


def _table_rows(md: str, theme: str) -> dict[str, list[str]]:
    """case -> its cells, from the theme's table of the Markdown page."""
    section = md.split(f"### {theme}\n\n", 1)[1].split("\n\n", 1)[0]
    out = {}
    for line in section.splitlines()[2:]:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        out[cells[0].strip("`")] = cells[1:]
    return out


def test_cells_say_the_verdict_and_the_divergence_in_one_line(run_dir):
    m = build([run_dir])
    assert m.reference == "apache-kafka"
    assert m.columns == [(t, c) for t in ("apache-kafka", "kfake", "librdkafka-mock") for c in ("confluent", "java")]
    assert list(m.themes) == ["coordinator", "eos", "groups", "txn", "wire"]
    md = render_markdown(m, "kconform matrix --results R --out docs/compatibility/README.md")
    txn = _table_rows(md, "txn")
    assert txn["txn/basic_commit"] == ["✅ pass"] * 6
    assert txn["txn/empty_transactional_id"][2] == (
        "❌ fail (documented): step[1] raw.request: expected error='INVALID_REQUEST', got "
        "'INVALID_PRODUCER_ID_MAPPING'")
    # the column names the target: the not-applicable reason does not repeat it
    assert txn["txn/empty_transactional_id"][4] == "➖ n/a: serves InitProducerId v0-4; the case sends v5"
    wire = _table_rows(md, "wire")
    assert wire["wire/unknown_api_key"][2] == "💥 crash: died after step 0: node 0's process 31802 exited with code 2"
    eos = _table_rows(md, "eos")
    assert eos["eos/copy_commit"][2] == "✅ pass: outcome differs at offsets.out-0.high_watermark"
    assert eos["eos/copy_commit"][5] == "⚠️ error: RuntimeError: the observer's consumer did not start"
    coord = _table_rows(md, "coordinator")
    assert coord["coordinator/crash_after_prepare_commit"][2].startswith("➖ n/a: cannot crash the coordinator")
    assert len(coord["coordinator/crash_after_prepare_commit"][2]) <= len("➖ n/a: ") + 90
    # how it was made, and the counts
    assert "kconform matrix --results R --out docs/compatibility/README.md" in md
    assert ("`kconform run --target apache-kafka --target kfake --target librdkafka-mock --client confluent "
            "--client java --reference apache-kafka -j 2 --results 20261124T080000Z-peer01`") in md
    assert "wall time 1 min 12 s" in md
    assert "| [kfake](#kfake) · confluent | 2 | 2 | 1 | 1 | 0 |" in md


def test_each_target_lists_its_divergences_with_what_kafka_does(run_dir):
    md = render_markdown(build([run_dir]))
    kfake = md.split("\n## kfake\n", 1)[1].split("\n## ", 1)[0]
    assert "### Divergences from Apache Kafka (3)" in kfake
    entry = kfake.split("- **`txn/empty_transactional_id`**", 1)[1].split("\n- ", 1)[0]
    assert entry.splitlines() == [
        " (confluent, java) fails -- InitProducerId with an empty transactional.id",
        "  - kfake: step[1] raw.request: expected error='INVALID_REQUEST', got 'INVALID_PRODUCER_ID_MAPPING'",
        f"  - apache-kafka 4.3.1: {EMPTY_ID_CHECK} -- holds (ok)",
        f"  - documented: {EMPTY_ID_DOC}"]
    crash = kfake.split("- **`wire/unknown_api_key`**", 1)[1].split("\n- ", 1)[0]
    assert "crashes -- A request with an unknown API key" in crash
    # the panic from the target's last words, read from the row's crash artifact
    assert "its log: panic: runtime error: invalid memory address or nil pointer dereference" in crash
    assert "/ kfake@v0.0.0-20260918054303-01f206a7e32c/client_conn.go:128\n" in crash
    assert "### Outcome differs from Kafka's, checks hold (1)" in kfake
    assert "`eos/copy_commit` (confluent, java): `offsets.out-0.high_watermark`: Kafka 5, kfake 4" in kfake
    assert f"- {NA_POINTS}: `coordinator/crash_after_prepare_commit`" in kfake
    mock = md.split("\n## librdkafka-mock\n", 1)[1]
    assert "### Divergences from Apache Kafka (0)" in mock and "None in these runs." in mock
    assert "### kconform errors (1)" in mock
    assert "\n## apache-kafka\n" not in md  # the reference has no divergence section


def test_a_later_run_wins_per_cell_and_html_has_the_same(run_dir, tmp_path):
    later = write_peer_run(tmp_path, "20261125T080000Z-peer02", datetime(2026, 11, 25, 8, tzinfo=timezone.utc))
    rows = [json.loads(line) for line in (later / "results.jsonl").open()]
    rows = [r for r in rows if r["target"] == "kfake" and r["case"] == "wire/unknown_api_key"]
    for r in rows:
        r.update(verdict="pass", reason=None, artifacts={"logs": []})
    (later / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    m = build([run_dir, later])
    assert m.rows[("wire/unknown_api_key", "kfake", "java")]["verdict"] == "pass"
    assert m.rows[("txn/empty_transactional_id", "kfake", "java")]["verdict"] == "fail"
    assert len(m.runs) == 2
    page = render_html(m)
    assert "<td class='crash'" not in page and "<td class='fail'" in page
    assert "InitProducerId with an empty transactional.id" in page


def test_kconform_matrix_writes_markdown_and_html(run_dir, tmp_path, capsys):
    out = tmp_path / "docs" / "compatibility" / "README.md"
    assert main(["matrix", "--results", str(run_dir), "--out", str(out)]) == 0
    md = out.read_text()
    assert md.startswith("# Compatibility with Apache Kafka")
    # The page is committed and read elsewhere: its commands name no path of this machine.
    assert f"kconform matrix --results {run_dir.name} --out README.md" in md
    assert str(tmp_path) not in md and str(run_dir.parent) not in md
    assert out.with_suffix(".html").read_text().startswith("<!doctype html>")
    assert main(["matrix", "--results", str(run_dir)]) == 0
    assert (run_dir / "compatibility.md").is_file()


def test_one_line_helpers():
    assert shorten("a  b\n c", 10) == "a b c"
    assert shorten("x" * 20, 10) == "x" * 9 + "…"
    row = {"verdict": "fail", "checks": [{"name": "a", "passed": False, "message": "m1"},
                                         {"name": "b", "passed": False, "message": "m2"}]}
    assert one_line(row) == "a: m1 (+1 more)"
    assert cell_text(None) == ""
    assert cell_text({"verdict": "pass"}, history=["fail", "pass"]) == "✅ pass (was fail)"


def test_a_difference_documented_alike_in_many_cases_is_listed_once(run_dir, tmp_path):
    """A target's client difference (the runner records it on every row of that client) is one
    finding: listed once with the cases it explains, not once per case."""
    run = write_peer_run(tmp_path, "20261126T080000Z-peer03", datetime(2026, 11, 26, 8, tzinfo=timezone.utc))
    note = "the mock answers ApiVersions v5 in a layout the Java client misreads"
    rows = [json.loads(line) for line in (run / "results.jsonl").open()]
    for r in rows:
        if r["target"] == "librdkafka-mock" and r["client"] == "java" and r["verdict"] == "pass":
            r.update(verdict="fail", known_difference=note, reason=f"known difference: {note}",
                     checks=[{"name": "step[0] p1.init_transactions: ok", "passed": False,
                              "message": "expected ok, got DEADLINE_EXCEEDED: the library call was still running"}])
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    mock = render_markdown(build([run])).split("\n## librdkafka-mock\n", 1)[1]
    assert "### Divergences from Apache Kafka (3)" in mock
    assert f"- **3 cases** (java) fail the same documented way: {note}" in mock
    assert ("  - `groups/offset_fetch_unknown_group` (java): step[0] p1.init_transactions: expected ok, got "
            "DEADLINE_EXCEEDED: the library call was still running") in mock
    assert mock.count(note) == 1


def test_rows_from_before_the_runner_recorded_documentation_take_the_library_s(tmp_path):
    """A run made before its divergences were documented (its rows have no `known_difference`
    field at all) shows them documented as the case library documents them when the page is
    made, and the page says how many cells took it so; a row that recorded null keeps it."""
    run = write_peer_run(tmp_path, "20261127T080000Z-peer04", datetime(2026, 11, 27, 8, tzinfo=timezone.utc))
    rows = [json.loads(line) for line in (run / "results.jsonl").open()]
    for r in rows:
        if r["target"] == "kfake":
            r.pop("known_difference", None)
            r["reason"] = None if r["verdict"] == "fail" else r.get("reason")
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    asked = []

    def known(case, target, client):
        asked.append((case, target, client))
        return "documented later" if case == "txn/empty_transactional_id" else None

    m = build([run], known)
    fails = {k for k, r in m.rows.items() if k[1] == "kfake" and r["verdict"] == "fail"}
    assert set(asked) == fails  # only failed rows without the field are looked up
    assert m.rows[("txn/empty_transactional_id", "kfake", "confluent")]["known_difference"] == "documented later"
    assert m.documented_later == 2
    md = render_markdown(m)
    assert "2 failed cells come from runs made before the runner recorded" in md
    assert "❌ fail (documented)" in _table_rows(md, "txn")["txn/empty_transactional_id"][2]
    assert build([run]).documented_later == 0


def test_the_page_says_later_runs_supersede(run_dir, tmp_path):
    later = write_peer_run(tmp_path, "20261128T080000Z-peer05", datetime(2026, 11, 28, 8, tzinfo=timezone.utc))
    assert "reruns supersede what they repeat" in render_markdown(build([run_dir, later]))
    assert "reruns supersede" not in render_markdown(build([run_dir]))
    assert "a later run replaces an earlier one" in render_html(build([run_dir, later]))


def test_a_consumer_protocol_run_gets_columns_of_its_own(run_dir, tmp_path):
    """Rows of `kconform run --group-protocol consumer` (and of a run over SASL_SSL) sit beside
    the classic ones instead of replacing them, and are compared with the reference's rows of
    the same kind."""
    later = write_peer_run(tmp_path, "20261125T090000Z-kip848", datetime(2026, 11, 25, 9, tzinfo=timezone.utc))
    rows = [json.loads(line) for line in (later / "results.jsonl").open()]
    rows = [dict(r, group_protocol="consumer") for r in rows if r["case"] == "eos/copy_commit"
            and r["target"] in ("apache-kafka", "kfake")]
    for r in rows:
        if r["target"] == "kfake":
            r.update(verdict="fail", reason="a check failed")
    (later / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    meta = json.loads((later / "run.json").read_text())
    (later / "run.json").write_text(json.dumps(dict(meta, group_protocol="consumer", targets=["apache-kafka", "kfake"])))
    m = build([run_dir, later])
    assert ("kfake", "java (group.protocol=consumer)") in m.columns and ("kfake", "java") in m.columns
    assert m.rows[("eos/copy_commit", "kfake", "java")]["verdict"] == "pass"          # the classic row stays
    assert m.rows[("eos/copy_commit", "kfake", "java (group.protocol=consumer)")]["verdict"] == "fail"
    assert m.rows[("eos/copy_commit", "apache-kafka", "confluent (group.protocol=consumer)")]["verdict"] == "pass"
    md = render_markdown(m)
    assert "| [kfake](#kfake) · java (group.protocol=consumer) |" in md
    from reports.matrix import client_column
    assert client_column("java", "classic", None) == "java"
    assert client_column("java", "consumer", "SASL_SSL") == "java (group.protocol=consumer, SASL_SSL)"
