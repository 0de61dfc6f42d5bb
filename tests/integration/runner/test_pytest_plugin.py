"""The pytest plugin, as a user runs it (`tox -e conformance` runs the same command): real pytest
processes, the embedded target, the confluent client.

Checked: case files pytest is pointed at become `case[target-client]` items, `-k` selects them,
a failing check fails the item with the check's message, and results.jsonl is written."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conformance.clients.registry import CLIENTS

REPO = Path(__file__).resolve().parents[3]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(autouse=True)
def _need_confluent():
    ok, why = CLIENTS["confluent"].availability()
    if not ok:
        pytest.skip(why)


def pytest_run(tmp_path: Path, *args: str) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args,
                           "--kconform-target", "embedded", "--kconform-client", "confluent",
                           "--kconform-results", str(tmp_path / "results")],
                          cwd=REPO, capture_output=True, text=True, timeout=540,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    return proc.returncode, proc.stdout + proc.stderr


def rows(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "results" / "results.jsonl").read_text().splitlines()]


def test_case_files_become_items_and_k_selects(tmp_path):
    code, out = pytest_run(tmp_path, "cases/txn", "-k", "basic_commit or basic_abort")
    assert code == 0, out
    assert "2 passed" in out and "deselected" in out, out
    assert sorted(r["case"] for r in rows(tmp_path)) == ["txn/basic_abort", "txn/basic_commit"]


def test_a_failing_check_fails_the_item_with_its_message(tmp_path):
    case = tmp_path / "wrong.yaml"
    case.write_text(textwrap.dedent("""\
        title: expects a record that was never sent
        topology: {topics: [t1]}
        actors: {p1: {role: producer}}
        steps:
          - {actor: p1, op: send, topic: t1, partition: 0, key: k, value: "sent"}
        checks:
          - {check: records, isolation: read_uncommitted, topic: t1, values: ["never sent"]}
        """))
    code, out = pytest_run(tmp_path, str(case), "--kconform-case", str(case))
    assert code == 1, out
    assert "1 failed" in out and "expected values ['never sent'], read ['sent']" in out, out
    [row] = rows(tmp_path)
    assert row["verdict"] == "fail"
