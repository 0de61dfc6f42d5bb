"""The shards of one run (`kconform run --shard I/N --run-id ID`) read as one run by every report:
the compatibility page, the Allure results and the JUnit XML of three shards are those of the
same rows in one directory, the page names the run once (as shards, with the command line and
no machine path), and a missing shard is said -- never a complete-looking page."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from reports.allure_report import stage_results
from reports.junit import write_junit
from reports.matrix import build
from reports.matrix_page import render_markdown
from reports.results import read_runs
from tests.reports.peerrows import write_peer_run

COMMAND = "kconform run --target apache-kafka --target kfake --client confluent --client java --results shard{i}"


def _shard(whole: Path, root: Path, n: int) -> list[Path]:
    """The whole run's rows split into n shard directories the way the runner splits: whole
    (case, client) units on every target, each shard with its run.json."""
    rows = [json.loads(line) for line in (whole / "results.jsonl").read_text().splitlines()]
    units = list(dict.fromkeys((r["case"], r["client"]) for r in rows))
    meta = json.loads((whole / "run.json").read_text()) if (whole / "run.json").exists() else {}
    dirs = []
    for i in range(1, n + 1):
        mine = {u for k, u in enumerate(units) if k % n == i - 1}
        d = root / f"shard{i}"
        (d / "artifacts").mkdir(parents=True)
        with open(d / "results.jsonl", "w") as fh:
            for r in rows:
                if (r["case"], r["client"]) in mine:
                    fh.write(json.dumps(r) + "\n")
                    for rel in [r["artifacts"].get("transcript"), r["artifacts"].get("crash")]:
                        if rel and (whole / rel).is_file():
                            (d / rel).parent.mkdir(parents=True, exist_ok=True)
                            (d / rel).write_bytes((whole / rel).read_bytes())
        started = f"2026-11-24T08:0{i}:00Z"
        (d / "run.json").write_text(json.dumps({
            **meta, "run_id": rows[0]["run_id"], "status": "finished", "started_at": started,
            "finished_at": f"2026-11-24T08:1{i}:00Z", "targets": ["apache-kafka", "kfake", "librdkafka-mock"],
            "clients": ["confluent", "java"], "command": COMMAND.format(i=i) + f" --shard {i}/{n} --run-id R",
            "versions": {"kconform": "0.1.0 (git abc)", "python": "3.11.7"},
            "shard": {"index": i, "count": n, "split": "s1", "rows": 0, "planned_rows": len(rows)}}))
        dirs.append(d)
    return dirs


@pytest.fixture
def runs(tmp_path):
    whole = write_peer_run(tmp_path / "whole")
    (whole / "run.json").write_text(json.dumps({"run_id": "x", "targets": ["apache-kafka", "kfake", "librdkafka-mock"],
                                                "clients": ["confluent", "java"]}))
    return whole, _shard(whole, tmp_path / "sharded", 3)


def _body(md: str) -> str:
    return md[md.index("## Targets and clients"):]


def test_the_page_of_three_shards_is_the_page_of_the_run(runs):
    whole, shards = runs
    one, three = build([whole]), build(shards)
    assert _body(render_markdown(one)) == _body(render_markdown(three))
    assert len(three.runs) == 1
    page = render_markdown(three)
    line = next(ln for ln in page.splitlines() if ln.startswith("- `kconform run"))
    assert "--shard I/3 --run-id R" in line and "as 3 shards (wall times 10 min 00 s" in line
    assert "kconform 0.1.0 (git abc), Python 3.11.7" in line and str(shards[0].parent) not in page


def test_a_missing_shard_is_said(runs):
    _, shards = runs
    m = build([shards[0], shards[2]])
    assert m.runs[0]["missing_shards"] == [2]
    assert "MISSING shard(s) 2" in render_markdown(m)


def test_allure_and_junit_of_the_shards_are_those_of_the_run(runs, tmp_path):
    whole, shards = runs

    def allure(dirs, name):
        out = stage_results(dirs, tmp_path / name)
        return sorted((r["fullName"], r["status"], r["statusDetails"].get("message", ""), len(r["attachments"]))
                      for r in map(json.loads, (p.read_text() for p in out.glob("*-result.json"))))

    assert allure([whole], "a1") == allure(shards, "a3")

    def junit(dirs, name):
        root = ET.parse(write_junit(dirs, tmp_path / name)).getroot()
        return sorted((tc.get("classname"), tc.get("name"), tc.get("time"),
                       tuple((k.tag, k.get("type"), k.get("message")) for k in tc if k.tag != "system-out"))
                      for tc in root.iter("testcase"))

    assert junit([whole], "j1.xml") == junit(shards, "j3.xml")
    assert len(read_runs(shards).rows) == len(read_runs([whole]).rows)
