"""The `workload:` section (conformance/dsl/workload.py, workload_gen.py): a bad spec names its
field, a seed expands to the same plan every time, and a plan written out reads back the same."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from conformance.dsl import CaseError, load_case, parse_case
from conformance.dsl.workload import workload_to_yaml
from conformance.vocabulary import NODE_ACTIONS
from conformance.workload.shrink import _groups, case_to_yaml


def load(tmp_path: Path, text: str):
    path = tmp_path / "w.yaml"
    path.write_text(textwrap.dedent(text))
    return load_case(path, tmp_path)


def error(tmp_path: Path, text: str) -> CaseError:
    with pytest.raises(CaseError) as info:
        load(tmp_path, text)
    return info.value


GEN = """
title: w
topology: {nodes: 3}
workload:
  seed: SEED
  time_limit_s: 40
  generate: {faults: [kill, pause, stop, proxy, client]}
"""


def test_the_same_seed_expands_to_the_same_plan_and_another_seed_to_another(tmp_path):
    a = load(tmp_path, GEN.replace("SEED", "7")).workload
    b = load(tmp_path, GEN.replace("SEED", "7")).workload
    c = load(tmp_path, GEN.replace("SEED", "8")).workload
    assert a == b
    assert (a.workers, a.schedule) != (c.workers, c.schedule)
    assert a.schedule, "the faults asked for were scheduled"
    assert all(3.0 <= s.at_s <= 40 for s in a.schedule)


def test_default_topics_and_their_replication(tmp_path):
    case = load(tmp_path, GEN.replace("SEED", "1"))
    assert {t.name for t in case.topology.topics} == {"data", "in", "out"}
    assert all(t.configs.get("min.insync.replicas") == "2" for t in case.topology.topics)
    assert case.needs_proxy()
    used = {NODE_ACTIONS[f.action] for f in case.workload.faults() if f.proxy is None}
    assert used and used | {"multi_node"} <= case.needed_capabilities()


def test_a_plan_written_out_reads_back_the_same(tmp_path):
    case = load(tmp_path, GEN.replace("SEED", "3"))
    data = case_to_yaml(case)
    again = parse_case(yaml.safe_load(yaml.safe_dump(data)), "again.yaml", "again")
    assert again.workload.workers == case.workload.workers
    assert again.workload.schedule == case.workload.schedule
    assert again.topology == case.topology
    assert "generate" not in workload_to_yaml(case.workload)


def test_mixed_clients_pin_every_worker(tmp_path):
    case = load(tmp_path, """
        title: w
        workload:
          seed: 1
          generate: {clients: [confluent, java, franz-go], copiers: 0}
    """)
    assert {w.client for w in case.workload.workers} == {"confluent", "java", "franz-go"}
    assert case.pinned_clients() == {"confluent", "java", "franz-go"}


@pytest.mark.parametrize("text, field, expected", [
    ("generate: {producerz: 1}", "workload.generate.producerz", "one of the knobs"),
    ("generate: {faults: [explode]}", "workload.generate.faults[0]", "one of ['kill'"),
    ("generate: {clients: [nosuch]}", "workload.generate.clients[0]", "one of"),
    ("op_limit: 5000000\n  generate: {}", "workload.op_limit", "at most"),
    ("workers: [{name: a, kind: copier, topics: [in]}]", "workload.workers[0].to", "a non-empty string"),
    ("workers: [{name: a, kind: juggler, topics: [in]}]", "workload.workers[0].kind", "one of"),
    ("workers: [{name: a, kind: producer, topics: [nope]}]", "workload.workers[0].topics[0]", "a topic of"),
    ("workers: [{name: a, kind: producer, topics: [data]}]\n  schedule: [{at_s: 1, crash: b}]",
     "workload.schedule[0].crash", "a worker name"),
    ("workers: [{name: a, kind: producer, topics: [data]}]\n  schedule: [{at_s: 1, fault: {crash: node, node: 1}, "
     "for_s: 3}]", "workload.schedule[0].for_s", "for_s only on proxy faults"),
    ("workers: [{name: a, kind: producer, topics: [data]}]\n  schedule: [{at_s: 1, fault: {crash: leader, of: x/0}}]",
     "workload.schedule[0].fault.of", "topic/partition of a topology topic"),
])
def test_an_invalid_spec_names_the_field(tmp_path, text, field, expected):
    exc = error(tmp_path, f"""
title: w
workload:
  seed: 1
  {text}
""")
    assert exc.field == field, str(exc)
    assert expected in exc.expected, str(exc)


def test_steps_have_no_place_in_a_workload(tmp_path):
    exc = error(tmp_path, """
title: w
steps: [{p1: init_transactions}]
workload: {seed: 1, generate: {}}
""")
    assert "steps" in str(exc)


def test_shrinking_keeps_a_fault_with_the_entry_undoing_it():
    schedule = [{"at_s": 1, "fault": {"crash": "leader", "of": "data/0"}},
                {"at_s": 2, "fault": {"proxy": "delay", "api": "Produce", "delay_ms": 100}, "for_s": 2},
                {"at_s": 3, "fault": {"restart": "leader", "of": "data/0"}},
                {"at_s": 4, "crash": "t1"}]
    assert _groups(schedule) == [[0, 2], [1], [3]]
