"""Baselines (conformance/baseline.py) and the status of a row against one (conformance/results.py:
Status, Expected, judge_status): what makes a vendor's CI green on its known divergences and red
on new ones -- a failure of another kind or of another check than the entry lists is new, a pass
where a failure is expected is news too, an error never hides behind a baseline; and an updated
baseline keeps what it knew (reasons, links, rows the run did not have) and changes only what the
run measured."""
from __future__ import annotations

import pytest

from conformance import baseline as bl
from conformance.results import Check, Expected, Row, Status, Verdict, judge_status, status_of


def row(case="txn/a", client="confluent", verdict=Verdict.FAIL, failed=("c1",), target="kfake", known=None) -> Row:
    r = Row(run_id="r", started_at="", case=case, case_title=case, target=target, client=client,
            target_version="v1", known_difference=known)
    r.verdict = verdict
    r.checks = [Check(name, False, f"{name} went wrong") for name in failed] + [Check("ok", True)]
    return r


EXPECTED = Expected([Verdict.FAIL], "known bug", "https://tracker/1", ["c1", "c2"])


@pytest.mark.parametrize("verdict, failed, expected, status", [
    (Verdict.FAIL, ["c1"], EXPECTED, Status.EXPECTED_FAIL),
    (Verdict.FAIL, ["c1", "c2"], EXPECTED, Status.EXPECTED_FAIL),
    (Verdict.FAIL, ["c1", "c3"], EXPECTED, Status.FAIL),             # another check fails too: new
    (Verdict.CRASH, [], EXPECTED, Status.FAIL),                       # crashes where it failed: new
    (Verdict.PASS, [], EXPECTED, Status.UNEXPECTED_PASS),
    (Verdict.PASS, [], Expected([Verdict.FAIL, Verdict.PASS], "flaky"), Status.PASS),
    (Verdict.ERROR, [], EXPECTED, Status.ERROR),                      # kconform's failure: never expected
    (Verdict.NOT_APPLICABLE, [], EXPECTED, Status.NOT_APPLICABLE),
    (Verdict.FAIL, ["anything"], Expected([Verdict.FAIL], "any check"), Status.EXPECTED_FAIL),
    (Verdict.FAIL, ["c1"], None, Status.FAIL),
    (Verdict.PASS, [], None, Status.PASS),
])
def test_status_against_the_baseline(verdict, failed, expected, status):
    assert judge_status(verdict, failed, expected)[0] is status


def test_the_reason_of_a_new_status_names_what_changed():
    assert "c3" in judge_status(Verdict.FAIL, ["c1", "c3"], EXPECTED)[1]
    assert judge_status(Verdict.CRASH, [], EXPECTED)[1] == "crashes; the baseline expects fail"
    assert "known bug" in judge_status(Verdict.PASS, [], EXPECTED)[1]


def test_status_and_expected_are_written_and_read_back():
    r = row()
    r.apply_baseline(EXPECTED)
    d = r.to_dict()
    assert d["status"] == "expected_fail" and d["expected"]["link"] == "https://tracker/1"
    back = Row.from_dict(d)
    assert back.status is Status.EXPECTED_FAIL and back.expected == EXPECTED
    assert status_of(d) == (Status.EXPECTED_FAIL, "known bug")
    assert list(d)[-2:] == ["expected", "status"]
    with pytest.raises(ValueError, match="status"):
        Row.from_dict({**d, "status": "great"})


BASELINE = """
target: kfake
version: v1
link: https://tracker
expected:
  txn/a:
    clients: [confluent]
    verdict: fail
    checks: [c1]
    reason: kfake lets it through
    link: https://tracker/7
  txn/b:
  - {clients: [java], verdict: crash, reason: panics}
  - {clients: [confluent], verdict: [fail, pass], reason: flaky under load}
  "wire/*": every wire case fails the same way
"""


def test_a_baseline_file_reads_and_matches_rows(tmp_path):
    (tmp_path / "kfake.yaml").write_text(BASELINE)
    b = bl.load([tmp_path])["kfake"]
    assert b.expected_for("txn/a", "confluent").checks == ["c1"]
    assert b.expected_for("txn/a", "java") is None
    assert b.expected_for("txn/b", "java").verdicts == [Verdict.CRASH]
    assert b.expected_for("txn/b", "confluent").verdicts == [Verdict.FAIL, Verdict.PASS]
    glob = b.expected_for("wire/x", "java")
    assert glob.reason == "every wire case fails the same way" and glob.link == "https://tracker"
    assert b.expected_for("txn/a", "confluent").source.endswith("kfake.yaml")
    rows = [row("txn/a"), row("txn/a", "java"), row("txn/b", "java", Verdict.CRASH, ()), row("wire/x", "java")]
    bl.apply(rows, {"kfake": b})
    assert [r.status for r in rows] == [Status.EXPECTED_FAIL, Status.FAIL, Status.EXPECTED_FAIL, Status.EXPECTED_FAIL]


@pytest.mark.parametrize("text, error", [
    ("expected: {}", "target"),
    ("target: k\nexpected: {txn/a: {verdict: error, reason: r}}", "never expected"),
    ("target: k\nexpected: {txn/a: {verdict: pass, reason: r}}", "pass only beside"),
    ("target: k\nexpected: {txn/a: {verdict: fail}}", "reason"),
    ("target: k\nexpected: {txn/a: {verdict: fail, reason: r, ticket: 1}}", "unknown key"),
    ("target: k\nversions: [1]", "unknown key"),
])
def test_a_baseline_kconform_cannot_use_is_refused_with_why(tmp_path, text, error):
    (tmp_path / "k.yaml").write_text(text)
    with pytest.raises(bl.BaselineError, match=error):
        bl.load([tmp_path / "k.yaml"])


def test_one_target_two_baselines_is_an_error(tmp_path):
    (tmp_path / "a.yaml").write_text("target: kfake\n")
    (tmp_path / "b.yaml").write_text("target: kfake\n")
    with pytest.raises(bl.BaselineError, match="already has a baseline"):
        bl.load([tmp_path])


def test_update_keeps_what_it_knew_and_changes_what_the_run_measured(tmp_path):
    (tmp_path / "kfake.yaml").write_text(BASELINE)
    old = bl.load([tmp_path])["kfake"]
    rows = [
        row("txn/a", "confluent", Verdict.FAIL, ("c1",)),          # as expected: entry unchanged
        row("txn/b", "java", Verdict.PASS, ()),                    # fixed: its entry goes
        row("txn/b", "confluent", Verdict.PASS, ()),               # flaky entry allows a pass: stays
        row("txn/c", "java", Verdict.FAIL, ("x",), known="documented in the case"),   # new
        row("txn/c", "confluent", Verdict.FAIL, ("x",), known="documented in the case"),
        row("txn/d", "java", Verdict.CRASH, (), ),                 # new crash
        row("wire/x", "java", Verdict.FAIL, ("w",)),               # the glob covers it
        row("other", "java", Verdict.FAIL, ("o",), target="tansu"),  # another target: not this file
    ]
    rows[5].reason = "the target died after step 2: node 0's process exited with code 2"
    new = bl.update(old, "kfake", rows)
    by = {(e.case, tuple(e.clients)): e for e in new.entries}
    assert by[("txn/a", ("confluent",))].link == "https://tracker/7"
    assert ("txn/b", ("java",)) not in by
    assert by[("txn/b", ("confluent",))].verdicts == [Verdict.FAIL, Verdict.PASS]
    c = by[("txn/c", ("confluent", "java"))]
    assert c.reason == "documented in the case" and c.checks == ["x"]
    assert by[("txn/d", ("java",))].verdicts == [Verdict.CRASH]
    assert "exited with code 2" in by[("txn/d", ("java",))].reason
    assert ("wire/*", ()) in by and not any(e.case == "wire/x" for e in new.entries)
    assert not any(e.case == "other" for e in new.entries)
    # Written and read back, it judges the same rows the same way.
    path = new.write(tmp_path / "out" / "kfake.yaml")
    again = bl.load([path])["kfake"]
    bl.apply(rows[:7], {"kfake": again})
    assert [r.status for r in rows[:7]] == [Status.EXPECTED_FAIL, Status.PASS, Status.PASS, Status.EXPECTED_FAIL,
                                           Status.EXPECTED_FAIL, Status.EXPECTED_FAIL, Status.EXPECTED_FAIL]


def test_a_new_entry_for_a_known_kafka_bug_names_the_bug_and_links_its_jira():
    kafka = row("regressions/KAFKA-12671", "java", target="apache-kafka@3.5.2", known="a documented difference")
    kafka.known_reference_bug = "KAFKA-12671"
    new = bl.update(None, "apache-kafka@3.5.2", [kafka])
    (entry,) = new.entries
    assert entry.reason == "known Kafka bug: KAFKA-12671"
    assert entry.link == "https://issues.apache.org/jira/browse/KAFKA-12671"


def test_an_entry_for_any_client_survives_a_run_that_confirms_it():
    old = bl.Baseline.from_data({"target": "kfake", "expected": {"txn/a": {"reason": "r", "checks": ["c1"]}}})
    confirmed = bl.update(old, "kfake", [row("txn/a", "java"), row("txn/a", "confluent")])
    assert [(e.case, e.clients) for e in confirmed.entries] == [("txn/a", [])]
    changed = bl.update(old, "kfake", [row("txn/a", "java"), row("txn/a", "confluent", failed=("c9",))])
    assert sorted((e.case, tuple(e.clients), tuple(e.checks)) for e in changed.entries) == [
        ("txn/a", ("confluent",), ("c9",)), ("txn/a", ("java",), ("c1",))]
    assert all(e.reason == "r" for e in changed.entries)


def test_the_shipped_baselines_load():
    shipped = bl.load([bl.BASELINES_ROOT])
    assert {"kfake"} <= set(shipped)
    for b in shipped.values():
        assert b.entries and all(e.reason and (e.link or b.link) for e in b.entries), b.path
