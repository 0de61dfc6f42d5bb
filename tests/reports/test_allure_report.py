"""The Allure report made from results.jsonl rows, opened in a real (headless) browser.

Needs npm (to install the pinned allure-commandline into the cache), Java
and Debian's chromium; each test skips with the reason when one is missing.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

from reports import allure_results
from reports.allure_report import stage_results
from reports.cli import report
from reports.results import read_results
from tests.reports import browser
from tests.reports.rowgen import CASES, run_id_for, write_run

REPO = Path(__file__).resolve().parents[2]

# In CI (CI=true) nothing may be skipped for a missing tool: .ci/run installs them.
_IN_CI = os.environ.get("CI") == "true"
needs_allure = pytest.mark.skipif(not _IN_CI and (shutil.which("npm") is None or shutil.which("java") is None),
                                  reason="the Allure CLI needs npm (to install it) and Java 17")
needs_chromium = pytest.mark.skipif(not _IN_CI and browser.chromium() is None,
                                    reason="chromium is not installed: run reports/allure/ensure_chromium.sh")


# one case of each kind: pass, fail + divergence, pass + divergence, not applicable, error
SELECTED = [c for c in CASES if c[0] in (
    "txn/basic_commit", "txn/basic_abort", "txn/abort_then_commit", "txn/timeout_expiry", "txn/zombie_produce",
    "txn/coordinator_crash_after_prepare", "txn/transactional_id_authorization", "txn/open_txn_lso")]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    rid, t = run_id_for(0)
    return write_run(tmp_path_factory.mktemp("runs"), rid, t, cases=SELECTED)


def _embedded(single_html: str, prefix: str) -> dict[str, dict]:
    """The JSON files the single-file report carries inline, by path."""
    return {m.group(1): json.loads(base64.b64decode(m.group(2)))
            for m in re.finditer(r"d\('(" + re.escape(prefix) + r"[^']*)','([^']*)'", single_html)}


def _text(dom: str) -> str:
    dom = re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom))


def test_rows_become_one_allure_result_per_case_target_client(run_dir, tmp_path):
    rows = read_results(run_dir)
    out = stage_results(run_dir, tmp_path / "staged")
    results = [json.loads(p.read_text()) for p in out.glob("*-result.json")]
    assert len(results) == len(rows) == 8 * 3 * 3
    by_name = {r["fullName"]: r for r in results}
    tansu_abort = by_name["txn/basic_abort::tansu::confluent"]
    assert tansu_abort["status"] == "failed"
    assert tansu_abort["statusDetails"]["message"].startswith("INVARIANT FAILED")
    assert "DIVERGES from apache-kafka" in tansu_abort["statusDetails"]["message"]
    assert "reads.read_uncommitted.topic-0" in tansu_abort["statusDetails"]["trace"]
    labels = {(lab["name"], lab["value"]) for lab in tansu_abort["labels"]}
    assert {("target", "tansu"), ("client", "confluent"), ("target_version", "0.1.2"),
            ("client_version", "2.16.1"), ("suite", "txn/basic_abort"), ("parentSuite", "txn"),
            ("tag", "abort")} <= labels
    names = [a["name"] for a in tansu_abort["attachments"]]
    assert names[:3] == ["side by side (all targets)", "outcome", "diff vs apache-kafka"]
    assert "transcript" in names and any(n.startswith("log ") for n in names)
    for a in tansu_abort["attachments"]:
        assert (out / a["source"]).is_file(), a
    sbs = (out / tansu_abort["attachments"][0]["source"]).read_text()
    assert "class='diverges'" in sbs and "apache-kafka" in sbs and "@4 a0=x0" in sbs
    # the reference itself is not a divergence; a pass with a diff is
    ref = by_name["txn/basic_abort::apache-kafka::java"]
    assert ref["status"] == "passed" and not ref["statusDetails"]
    embedded_timeout = by_name["txn/timeout_expiry::embedded::java"]
    assert embedded_timeout["status"] == "passed"
    assert embedded_timeout["statusDetails"]["message"].startswith("DIVERGES from apache-kafka")
    na = by_name["txn/coordinator_crash_after_prepare::tansu::java"]
    assert na["status"] == "skipped" and na["statusDetails"]["message"].startswith("NOT APPLICABLE")
    steps = tansu_abort["steps"]
    assert steps[0]["name"] == "0. p1: init_transactions" and steps[-1]["name"] == "checks"
    assert [s["status"] for s in steps[-1]["steps"]] == ["passed", "failed"]
    cats = json.loads((out / "categories.json").read_text())
    assert cats == allure_results.categories(rows)
    assert cats[0] == allure_results.HARNESS_CATEGORY
    assert [c["name"] for c in cats][1:7] == [
        "apache-kafka · crashes", "apache-kafka · fails a check (the reference: the case or kconform is wrong)",
        "apache-kafka · newly passes (its baseline entry is stale)", "apache-kafka · fails as its baseline expects",
        "apache-kafka · not applicable", "apache-kafka · kconform error"]
    assert "tansu · passes, outcome differs from apache-kafka" in [c["name"] for c in cats]
    env = (out / "environment.properties").read_text()
    assert "target.tansu=0.1.2" in env and "client.kafka-python=3.0.12" in env


@needs_allure
@needs_chromium
def test_single_file_report_opens_in_chromium_and_shows_a_diff(run_dir, tmp_path):
    served, single = report(run_dir, tmp_path / "report")
    assert (served / "index.html").is_file() and (served / "data" / "test-cases").is_dir()
    html = single.read_text(encoding="utf-8")
    # Allure's own categorisation of our results, as the report carries it
    cats = _embedded(html, "data/categories.json")["data/categories.json"]
    counts = {c["name"]: sum(len(g.get("children", [])) for g in c["children"]) for c in cats["children"]}
    assert counts == {"tansu · fails a check": 2 * 3, "embedded · passes, outcome differs from apache-kafka": 3,
                      "tansu · not applicable": 3, "apache-kafka · kconform error": 1,
                      "embedded · kconform error": 1, "tansu · kconform error": 1}
    suites = _embedded(html, "data/suites.json")["data/suites.json"]
    theme = suites["children"][0]
    case = next(c for c in theme["children"] if c["name"] == "txn/basic_abort")
    tansu = next(c for c in case["children"] if c["name"] == "tansu")
    test = next(t for t in tansu["children"] if t["name"].endswith("confluent]"))
    url = f"{single.as_uri()}#suites/{theme['uid']}/{test['uid']}"

    text = _text(browser.dump_dom(url, tmp_path / "profile-dom"))
    for case_id, _, _ in SELECTED:
        assert case_id in text, f"case {case_id} not visible in the suites tree"
    assert "txn/basic_abort [tansu · confluent]" in text
    assert "DIVERGES from apache-kafka on tansu: 1 difference at reads.read_uncommitted.topic-0" in text
    assert "reference: [" in text and "actual: [" in text          # the diff itself, values included
    png = browser.screenshot(url, tmp_path / "allure-report.png", tmp_path / "profile-shot")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    if os.environ.get("KCONFORM_UPDATE_SCREENSHOT") == "1":     # refresh the picture in the docs
        (REPO / "docs" / "img").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(png, REPO / "docs" / "img" / "allure-report.png")


@needs_allure
def test_report_uses_the_plugin_results_when_present(run_dir, tmp_path):
    """allure-results written by the pytest plugin are kept; the side-by-side page is added."""
    plugin = tmp_path / "allure-results"
    plugin.mkdir()
    res = {"uuid": "0b0e6c2e-0000-4000-8000-000000000001", "name": "test_case[txn/basic_abort-tansu-java]",
           "fullName": "conformance.test_cases#txn/basic_abort", "status": "failed", "stage": "finished",
           "start": 1, "stop": 2, "labels": [{"name": "case", "value": "txn/basic_abort"}]}
    (plugin / f"{res['uuid']}-result.json").write_text(json.dumps(res))
    served, single = report(run_dir, tmp_path / "report", allure_results=plugin)
    staged = json.loads((tmp_path / "report" / "allure-results" / f"{res['uuid']}-result.json").read_text())
    assert staged["name"] == res["name"]
    assert staged["attachments"][0]["name"] == "side by side (all targets)"
    assert len(list((tmp_path / "report" / "allure-results").glob("*-result.json"))) == 1
    assert single.is_file()


def _png(path: Path) -> Path:
    """A valid 1x1 PNG, written by hand so this test needs no imaging library."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b""))
    return path


@needs_allure
def test_analytics_charts_are_linked_from_the_report(run_dir, tmp_path):
    analytics = tmp_path / "analytics"
    analytics.mkdir()
    _png(analytics / "matrix.png")
    (analytics / "summary.txt").write_text("kconform analytics over 3 run(s)\nFlaky: 1 <basic_commit>\n")
    report(run_dir, tmp_path / "report", analytics_dir=analytics)
    staged = tmp_path / "report" / "allure-results"
    entry = next(r for r in (json.loads(p.read_text()) for p in staged.glob("*-result.json"))
                 if r["name"] == "Analytics over all runs")
    assert [a["name"] for a in entry["attachments"]] == ["summary", "matrix"]
    assert (staged / entry["attachments"][1]["source"]).read_bytes()[:4] == b"\x89PNG"
    assert "&lt;basic_commit&gt;" in entry["descriptionHtml"]
    served = tmp_path / "report" / "html"
    cases = [json.loads(p.read_text()) for p in (served / "data" / "test-cases").glob("*.json")]
    analytics_case = next(c for c in cases if c["name"] == "Analytics over all runs")
    assert any(a["name"] == "matrix" for a in analytics_case["testStage"]["attachments"])


@needs_allure
def test_each_target_gets_its_own_categories(tmp_path):
    """Allure's Categories tab groups a peer run per target and kind, as the compatibility page
    does: kfake's crashes, its failed checks, its passes whose outcome differs, ..."""
    from tests.reports.peerrows import write_peer_run

    run = write_peer_run(tmp_path / "runs")
    served, _ = report(run, tmp_path / "report")
    cats = json.loads((served / "data" / "categories.json").read_text())
    counts = {c["name"]: sum(len(g.get("children", [])) for g in c["children"]) for c in cats["children"]}
    assert counts == {"kfake · crashes": 2, "kfake · fails a check": 4,
                      "kfake · passes, outcome differs from apache-kafka": 2, "kfake · not applicable": 2,
                      "librdkafka-mock · not applicable": 4, "librdkafka-mock · kconform error": 1}
    crashes = next(c for c in cats["children"] if c["name"] == "kfake · crashes")
    assert [g["name"] for g in crashes["children"]] == [
        "CRASH on kfake: the target died after step 0: node 0's process 31802 exited with code 2"]
    staged = [json.loads(p.read_text()) for p in (tmp_path / "report" / "allure-results").glob("*-result.json")]
    crash = next(r for r in staged if r["fullName"] == "wire/unknown_api_key::kfake::java")
    assert crash["status"] == "failed"


def _rejudged(run_dir: Path, expected: dict) -> Path:
    """The run's rows judged against a baseline, as `kconform run --baseline` writes them."""
    from conformance.results import Row

    path = run_dir / "results.jsonl"
    rows = [Row.from_dict(json.loads(line)) for line in path.read_text().splitlines()]
    for r in rows:
        r.apply_baseline(expected.get((r.case, r.target, r.client)))
    path.write_text("".join(r.to_json() + "\n" for r in rows))
    return run_dir


@needs_allure
def test_trend_history_retries_and_executor_carry_across_runs(tmp_path):
    """Two runs, the second's report made with the first's (`--previous`): the Trend has both
    builds, each test its history, the Executors panel names the build; a cell in two result
    directories of one report is a retry. Against a baseline, a known failure is its own
    category (skipped, EXPECTED FAIL) and links its issue; a stale entry fails (UNEXPECTED PASS)."""
    from conformance.results import Expected, Verdict
    from tests.reports.peerrows import write_peer_run

    first = write_peer_run(tmp_path / "runs", "20261124T080000Z-peer01")
    served1, _ = report(first, tmp_path / "report1")
    assert json.loads((served1 / "widgets" / "executors.json").read_text())[0]["buildName"] == "kconform run #1"
    second = write_peer_run(tmp_path / "runs", "20261125T080000Z-peer02",
                            datetime(2026, 11, 25, 8, 0, tzinfo=timezone.utc))
    _rejudged(second, {
        ("txn/empty_transactional_id", "kfake", "java"): Expected([Verdict.FAIL], "kfake issue 12",
                                                                  "https://tracker/12", [], "baselines/kfake.yaml"),
        ("txn/empty_transactional_id", "apache-kafka", "java"): Expected([Verdict.FAIL], "was broken", "",
                                                                         [], "baselines/apache-kafka.yaml")})
    served2, single = report(second, tmp_path / "report2", previous=tmp_path / "report1")
    trend = json.loads((served2 / "widgets" / "history-trend.json").read_text())
    assert [t.get("buildOrder") for t in trend] == [2, 1]
    assert sum(trend[0]["data"].values()) == sum(trend[1]["data"].values()) > 0
    (executor,) = json.loads((served2 / "widgets" / "executors.json").read_text())
    assert executor["buildName"] == "kconform run #2" and executor["buildOrder"] == 2
    history = json.loads((served2 / "history" / "history.json").read_text())
    assert history and all(len(h["items"]) == 2 for h in history.values())
    cases = [json.loads(p.read_text()) for p in (served2 / "data" / "test-cases").glob("*.json")]
    known = next(c for c in cases if c["fullName"] == "txn/empty_transactional_id::kfake::java")
    assert known["status"] == "skipped" and known["statusMessage"].startswith("EXPECTED FAIL on kfake: kfake issue 12")
    assert {"name": "baseline: baselines/kfake.yaml", "url": "https://tracker/12", "type": "issue"} in known["links"]
    stale = next(c for c in cases if c["fullName"] == "txn/empty_transactional_id::apache-kafka::java")
    assert stale["status"] == "failed" and stale["statusMessage"].startswith("UNEXPECTED PASS on apache-kafka")
    cats = json.loads((served2 / "data" / "categories.json").read_text())
    names = {c["name"]: len(c["children"]) for c in cats["children"]}
    assert names["kfake · fails as its baseline expects"] == 1
    assert names["apache-kafka · newly passes (its baseline entry is stale)"] == 1
    # both runs in one report: every cell ran twice, the earlier run is its retry
    served3, _ = report([first, second], tmp_path / "report3")
    retried = [json.loads(p.read_text()) for p in (served3 / "data" / "test-cases").glob("*.json")]
    latest = [c for c in retried if not c.get("hidden")]
    assert latest and all(c["retriesCount"] == 1 for c in latest)
    assert len(retried) == 2 * len(latest)
