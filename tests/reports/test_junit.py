"""JUnit XML of runs (reports/junit.py): valid against the JUnit schema CI tools read
(tests/reports/junit.xsd), one testcase per row with what the row's status means to a CI --
a new failure or an unexpected pass fails, an expected failure is skipped with its reason and
link, kconform's own error errors -- the transcript as an attachment link, and a sentinel: a run
that did not finish, or a shard that is missing, is never a clean file."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conformance.results import Expected, Row, Verdict
from reports.junit import classname, write_junit, write_sentinel
from tests.reports.peerrows import write_peer_run

xmlschema = pytest.importorskip("xmlschema")
SCHEMA = xmlschema.XMLSchema(str(Path(__file__).with_name("junit.xsd")))


def _baseline(run_dir: Path, expected: dict[tuple[str, str, str], Expected]) -> None:
    """Judge the run's rows as `kconform run --baseline` does (Row.apply_baseline)."""
    path = run_dir / "results.jsonl"
    rows = [Row.from_dict(json.loads(line)) for line in path.read_text().splitlines()]
    for r in rows:
        r.apply_baseline(expected.get((r.case, r.target, r.client)))
    path.write_text("".join(r.to_json() + "\n" for r in rows))
    (run_dir / "run.json").write_text(json.dumps({"run_id": rows[0].run_id, "status": "finished",
                                                  "baselines": {"kfake": "baselines/kfake.yaml",
                                                                "apache-kafka": "baselines/apache-kafka.yaml",
                                                                "librdkafka-mock": "baselines/mock.yaml"},
                                                  "command": "kconform run --target kfake --results r",
                                                  "versions": {"kconform": "0.1.0 (git abc)"}}))


def _cases(path: Path) -> dict[tuple[str, str], ET.Element]:
    root = ET.parse(path).getroot()
    return {(tc.get("classname"), tc.get("name")): tc for tc in root.iter("testcase")}


@pytest.fixture
def run_dir(tmp_path) -> Path:
    d = write_peer_run(tmp_path)
    rows = [json.loads(line) for line in (d / "results.jsonl").read_text().splitlines()]
    failing = [(r["case"], r["target"], r["client"]) for r in rows if r["verdict"] in ("fail", "crash")]
    passing = next((r["case"], r["target"], r["client"]) for r in rows if r["verdict"] == "pass")
    # the first failing row is known; a passing row is listed as failing (a stale entry)
    _baseline(d, {failing[0]: Expected([Verdict(next(r["verdict"] for r in rows
                                                       if (r["case"], r["target"], r["client"]) == failing[0]))],
                                       "known: kfake issue 12", "https://tracker/12", [], "baselines/kfake.yaml"),
                  passing: Expected([Verdict.FAIL], "was broken", "https://tracker/3", [], "baselines/kfake.yaml")})
    return d


def test_junit_validates_and_says_what_each_row_is_to_a_ci(run_dir, tmp_path):
    out = write_junit([run_dir], tmp_path / "junit.xml")
    SCHEMA.validate(str(out))
    rows = [Row.from_dict(json.loads(line)) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    cases = _cases(out)
    assert len(cases) == len(rows)
    root = ET.parse(out).getroot()
    failures = sum(1 for r in rows if r.status.value in ("fail", "unexpected_pass"))
    assert int(root.get("failures")) == failures > 0
    assert int(root.get("errors")) == sum(1 for r in rows if r.verdict is Verdict.ERROR) > 0
    for r in rows:
        tc = cases[(classname(r.target, r.client), r.case)]
        kids = {k.tag: k for k in tc}
        assert float(tc.get("time")) == pytest.approx(r.duration_s, abs=0.001)
        if r.status.value == "expected_fail":
            assert kids["skipped"].get("type") == "expected_fail"
            assert "known: kfake issue 12 (https://tracker/12)" in kids["skipped"].get("message")
        elif r.status.value == "unexpected_pass":
            assert kids["failure"].get("type") == "unexpected_pass" and "was broken" in kids["failure"].get("message")
        elif r.status.value == "fail":
            f = kids["failure"]
            assert f.get("type") == ("crash" if r.verdict is Verdict.CRASH else "fail")
            assert f.get("message").startswith("newly ")     # the target had a baseline: a failure is new
            for c in r.failed_checks:
                assert c.name in f.text
        elif r.verdict is Verdict.NOT_APPLICABLE:
            assert kids["skipped"].get("type") == "not_applicable" and kids["skipped"].get("message") == r.reason
        elif r.verdict is Verdict.ERROR:
            assert kids["error"].get("type") == "error"
        else:
            assert not {"failure", "error", "skipped"} & set(kids)
        if r.artifacts.get("transcript"):
            assert f"[[ATTACHMENT|{run_dir / r.artifacts['transcript']}]]" in kids["system-out"].text
    kfake = next(s for s in root.iter("testsuite") if s.get("name") == "kfake")
    props = {p.get("name"): p.get("value") for p in kfake.iter("property")}
    assert props["baseline"] == "baselines/kfake.yaml" and props["command"].startswith("kconform run")


def test_the_sentinel_fails_until_the_run_has_written_its_results(tmp_path):
    out = write_sentinel(tmp_path / "j.xml", "kconform run did not finish", "Traceback ...")
    SCHEMA.validate(str(out))
    (tc,) = ET.parse(out).getroot().iter("testcase")
    assert tc.find("error").get("type") == "harness" and ET.parse(out).getroot().get("errors") == "1"


def test_a_run_that_did_not_finish_or_a_missing_shard_errors(run_dir, tmp_path):
    meta = json.loads((run_dir / "run.json").read_text())
    meta.update(status="failed", error="KeyboardInterrupt")
    (run_dir / "run.json").write_text(json.dumps(meta))
    out = write_junit([run_dir], tmp_path / "j.xml")
    SCHEMA.validate(str(out))
    harness = [tc for tc in ET.parse(out).getroot().iter("testcase") if tc.get("classname") == "kconform.harness"]
    assert len(harness) == 1 and "did not finish (status failed): KeyboardInterrupt" in \
        harness[0].find("error").get("message")
    # shard 2 of 2 of a run, without shard 1
    meta.update(status="finished", shard={"index": 2, "count": 2, "split": "abc"})
    (run_dir / "run.json").write_text(json.dumps(meta))
    out = write_junit([run_dir], tmp_path / "j2.xml")
    harness = [tc for tc in ET.parse(out).getroot().iter("testcase") if tc.get("classname") == "kconform.harness"]
    assert [tc.find("error").get("message") for tc in harness] == [
        f"run {meta['run_id']}: shard 1 of 2 is missing from these results"]


def test_without_a_baseline_a_failure_is_a_failure(tmp_path):
    d = write_peer_run(tmp_path)
    root = ET.parse(write_junit([d], tmp_path / "j.xml")).getroot()
    messages = [f.get("message") for f in root.iter("failure")]
    assert messages and not any(m.startswith("newly") for m in messages)
    assert all(m.startswith(("fails: ", "crashes: ")) for m in messages)
