"""Sharding (conformance/runner/shard.py, runner.select_shard): N CI machines run one matrix.

What must hold for the N results to be one run: every planned row is in exactly one shard, every
shard computes the same split on its own (same plan, same durations: no coordination), the rows
of one case and client on every target are in the same shard (a target's row is diffed against
the reference's), and the shards take about as long -- balanced by the measured durations."""
from __future__ import annotations

import json

import pytest

from conformance.dsl import load_cases
from conformance.runner.runner import cost_class, plan, select_shard
from conformance.runner.shard import GUESS_SECONDS, Durations, assign, parse_shard, split


def test_parse_shard():
    assert parse_shard("2/3") == (2, 3)
    assert parse_shard(" 1 / 1 ") == (1, 1)
    for bad in ("0/3", "4/3", "3", "a/b", "1/0", ""):
        with pytest.raises(ValueError):
            parse_shard(bad)


def test_lpt_split_is_deterministic_and_balanced():
    units = {(f"c{i}", "confluent"): float((i * 37) % 23 + 1) for i in range(60)}
    a = assign(units, 3)
    assert a == assign(dict(reversed(list(units.items()))), 3)       # the order given does not matter
    assert sorted(a.shard_of) == sorted(units) and set(a.shard_of.values()) == {1, 2, 3}
    total = sum(units.values())
    assert abs(sum(a.seconds) - total) < 0.5
    assert max(a.seconds) - min(a.seconds) <= max(units.values())     # within one unit of each other
    assert a.digest() == assign(units, 3).digest() != assign(units, 2).digest()


def test_estimates_fall_back_from_the_row_to_the_case_to_its_shape(tmp_path):
    d = Durations({("apache-kafka", "txn/a", "java"): 9.0, ("apache-kafka", "txn/a", "confluent"): 5.0,
                   ("embedded", "txn/b", "java"): 2.0})
    assert d.estimate("apache-kafka", "txn/a", "java", 0) == 9.0
    assert d.estimate("apache-kafka@3.9.1", "txn/a", "java", 0) == 9.0      # the release's base target
    assert d.estimate("apache-kafka", "txn/a", "sarama", 0) == 7.0          # the case's other clients
    assert d.estimate("embedded", "txn/zzz", "java", 2) == GUESS_SECONDS[2]
    (tmp_path / "d.json").write_text(d.to_json())
    assert Durations.load([tmp_path / "d.json"]).seconds == d.seconds


def _plan(cases, clients=("confluent", "java"), targets=("apache-kafka", "embedded")):
    return plan(list(targets), cases, list(clients), "apache-kafka", "auto", False)


def test_shards_partition_the_plan_and_keep_a_case_and_client_together():
    cases = load_cases(["txn/*", "cluster/*", "eos/*"])
    rows = _plan(cases)
    durations = Durations({("embedded", c.id, "java"): 3.0 + i % 7 for i, c in enumerate(cases)})
    shards = [select_shard(rows, (i, 3), durations) for i in (1, 2, 3)]
    indexes = [r.index for mine, _ in shards for r in mine]
    assert sorted(indexes) == [r.index for r in rows]                       # each row exactly once
    for mine, _ in shards:
        units = {(r.case.id, r.client) for r in mine}
        assert {(r.case.id, r.client, r.target) for r in rows if (r.case.id, r.client) in units} == \
            {(r.case.id, r.client, r.target) for r in mine}                  # every target of a unit
        assert [r.index for r in mine] == sorted(r.index for r in mine)     # plan order kept
    metas = [meta for _, meta in shards]
    assert len({m["split"] for m in metas}) == 1
    assert [m["index"] for m in metas] == [1, 2, 3] and {m["count"] for m in metas} == {3}
    assert sum(m["rows"] for m in metas) == len(rows) == metas[0]["planned_rows"]
    est = metas[0]["estimated_s"]
    assert max(est) - min(est) < 0.1 * sum(est)


def test_the_library_durations_file_is_measured_and_covers_the_library():
    from conformance.runner.shard import DEFAULT_DURATIONS

    data = json.loads(DEFAULT_DURATIONS.read_text())
    d = Durations.load([DEFAULT_DURATIONS])
    assert data["seconds"] and all(s >= 0 for s in d.seconds.values())
    ids = {c.id for c in load_cases(["txn/*", "eos/*", "cluster/*"])}
    measured = {case for (_t, case, _c) in d.seconds}
    assert len(ids & measured) >= 0.9 * len(ids)


def test_a_split_uses_the_cost_class_of_cases_never_measured():
    cases = load_cases(["cluster/*", "basic/*"])
    rows = _plan(cases, clients=("confluent",), targets=("embedded",))
    a = split(rows, 2, Durations(), cost_class)
    assert abs(sum(a.seconds) - sum(GUESS_SECONDS[cost_class(r.case)] if r.how.not_applicable is None else 0.05
                                    for r in rows)) < 0.5
