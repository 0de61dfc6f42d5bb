"""How the run hands out rows (runner.WorkQueue): the heavy-row limit.

Why: four three-node Apache Kafka rows starting at once on a 2-core machine (12 JVMs) drove
the load to 16 and a cluster missed its registration timeout; the queue now keeps at most
`heavy_limit` such rows running and gives the other workers light rows meanwhile. No target
starts here: the queue only decides the order.
"""
from __future__ import annotations

import textwrap
import threading
from pathlib import Path

from conformance.dsl import load_case
from conformance.runner.row import row_plan
from conformance.runner.runner import PlannedRow, WorkQueue, heavy

CASE = """
title: queue order
topology: {topics: [orders]%s}
steps:
  - {wait_ms: 1}
"""


def case(tmp_path: Path, name: str, extra: str = ""):
    path = tmp_path / "txn" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(CASE % extra))
    return load_case(path, tmp_path)


def rows(tmp_path: Path) -> list[PlannedRow]:
    cluster = case(tmp_path, "cluster", ", nodes: 3")
    single = case(tmp_path, "single")
    plan = [("apache-kafka", cluster, "c1"), ("apache-kafka", cluster, "c2"), ("embedded", cluster, "c1"),
            ("apache-kafka", single, "c1"), ("embedded", single, "c1")]
    return [PlannedRow(i, t, c, cl, row_plan(c, t, "off")) for i, (t, c, cl) in enumerate(plan)]


def test_only_multi_node_rows_of_a_heavy_target_are_heavy(tmp_path):
    r = rows(tmp_path)
    assert [heavy(x) for x in r] == [True, True, False, False, False]


def test_a_second_heavy_row_waits_while_light_rows_are_handed_out(tmp_path):
    q = WorkQueue(rows(tmp_path), heavy_limit=1)
    first = q.take({})
    assert heavy(first)
    others = [q.take({}) for _ in range(3)]
    assert not any(heavy(x) for x in others), "light rows go first while the heavy limit is reached"
    # Only the held-back heavy row is left: the next take waits until the running one is done.
    got: list[PlannedRow | None] = []
    t = threading.Thread(target=lambda: got.append(q.take({})), daemon=True)
    t.start()
    t.join(timeout=1.5)
    assert t.is_alive() and not got
    q.done(first)
    t.join(timeout=5)
    assert got and heavy(got[0]) and got[0] is not first
    assert q.take({}) is None


def test_a_waiting_worker_leaves_when_the_run_stops(tmp_path):
    q = WorkQueue(rows(tmp_path), heavy_limit=1)
    q.take({})
    for _ in range(3):
        q.take({})
    assert q.take({}, stop=lambda: True) is None


def test_default_jobs_follow_the_targets_and_the_security(monkeypatch):
    """Three rows per core on a plaintext run whose targets have no JVM nodes; two per core as
    soon as one target has (Apache Kafka), over TLS/SASL, or when the targets are not known."""
    from conformance.runner import runner
    from conformance.security import Security

    monkeypatch.setattr(runner.os, "cpu_count", lambda: 2)
    assert runner.default_jobs(["embedded"]) == 6
    assert runner.default_jobs(["embedded", "kfake"], Security()) == 6
    assert runner.default_jobs(["embedded", "apache-kafka"]) == 4
    assert runner.default_jobs(["apache-kafka@3.9.1"]) == 4
    assert runner.default_jobs(["embedded"], Security.generate("sasl_ssl")) == 4
    assert runner.default_jobs() == 4
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 16)
    assert runner.default_jobs(["embedded"]) == runner.MAX_DEFAULT_JOBS
