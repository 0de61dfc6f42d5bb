"""The case loader: every shipped case is valid, and invalid files say FILE, FIELD, WHAT."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from conformance.dsl import CaseError, discover, load_case, load_cases, validate_all
from conformance.dsl.model import Case

MINIMAL = """
title: t
topology: {topics: [t1]}
actors:
  p1: {role: producer, config: {transactional.id: x}}
steps:
  - p1: init_transactions
"""


def write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def error_of(tmp_path: Path, text: str) -> CaseError:
    path = write(tmp_path, text)
    with pytest.raises(CaseError) as info:
        load_case(path, tmp_path)
    return info.value


def test_every_shipped_case_is_valid():
    assert validate_all() == []
    cases = load_cases()
    assert len(cases) >= 30
    assert len({c.id for c in cases}) == len(cases)


def test_shipped_cases_cover_the_scenarios():
    covered = {s for c in load_cases() for s in c.scenario}
    for s in ("S01", "S02", "S03", "S04", "S05", "S06", "S07", "S08", "S09", "S10", "S17", "S28", "S29",
              "S32", "S33", "S34", "S35"):
        assert s in covered, s


def test_minimal_case_loads_with_defaults(tmp_path):
    case = load_case(write(tmp_path, MINIMAL, "txn/min.yaml"), tmp_path)
    assert isinstance(case, Case)
    assert case.id == "txn/min"
    assert case.topology.nodes == 1
    assert case.topology.topics[0].partitions == 1
    step = case.steps[0]
    assert (step.actor, step.op, step.expect.ok) == ("p1", "init_transactions", True)
    assert case.observe.isolation == ("read_committed", "read_uncommitted")


def test_config_values_become_kafka_strings(tmp_path):
    case = load_case(write(tmp_path, MINIMAL.replace("{transactional.id: x}",
                                                     "{transactional.id: x, enable.idempotence: true, linger.ms: 5}")),
                     tmp_path)
    assert case.actors["p1"].config == {"transactional.id": "x", "enable.idempotence": "true", "linger.ms": "5"}


def test_unknown_op_names_file_field_and_expectation(tmp_path):
    err = error_of(tmp_path, MINIMAL.replace("p1: init_transactions", "{actor: p1, op: init_txn}"))
    assert err.file.endswith("c.yaml")
    assert err.field == "steps[0].op"
    assert "init_transactions" in err.expected
    assert "c.yaml: steps[0].op: expected" in str(err)


def test_unknown_error_name_is_refused(tmp_path):
    err = error_of(tmp_path, MINIMAL.replace("p1: init_transactions",
                                             "{actor: p1, op: init_transactions, expect: FENCED}"))
    assert err.field == "steps[0].expect"
    assert "PRODUCER_FENCED" in err.expected


def test_undeclared_actor_and_unknown_topic(tmp_path):
    assert error_of(tmp_path, MINIMAL.replace("p1: init_transactions",
                                              "{actor: p9, op: flush}")).field == "steps[0].actor"
    err = error_of(tmp_path, MINIMAL.replace("p1: init_transactions", "{actor: p1, op: send, topic: nope}"))
    assert err.field == "steps[0].topic"


def test_argument_not_taken_by_the_op(tmp_path):
    err = error_of(tmp_path, MINIMAL.replace("p1: init_transactions", "{actor: p1, op: flush, topic: t1}"))
    assert err.field == "steps[0].topic"
    assert "argument of flush" in err.expected


def test_fault_validation(tmp_path):
    ok = MINIMAL + "  - fault: {crash: coordinator, of: x, at: after_prepare_durable}\n  - wait_fault: {}\n"
    case = load_case(write(tmp_path, ok), tmp_path)
    f = case.steps[1].fault
    assert (f.action, f.target.role, f.target.of, f.at) == ("crash", "coordinator", "x", "after_prepare_durable")
    assert case.needed_capabilities() == {"fault_points", "kill"}
    err = error_of(tmp_path, MINIMAL + "  - fault: {crash: coordinator, of: x, at: somewhere}\n")
    assert err.field == "steps[1].fault.at"
    err = error_of(tmp_path, MINIMAL + "  - fault: {restart: coordinator, of: x, at: after_complete}\n")
    assert err.field == "steps[1].fault.at"
    err = error_of(tmp_path, MINIMAL + "  - fault: {crash: leader, of: t1/5}\n")
    assert err.field == "steps[1].fault.of"
    err = error_of(tmp_path, MINIMAL + "  - fault: {crash: coordinator, pause: node}\n")
    assert err.field == "steps[1].fault"
    err = error_of(tmp_path, MINIMAL + "  - wait_fault: {}\n")
    assert err.field == "steps[1].wait_fault"


def test_proxy_fault(tmp_path):
    case = load_case(write(tmp_path, MINIMAL + "  - fault: {proxy: sever, api: Produce, direction: response}\n"),
                     tmp_path)
    assert case.needs_proxy()
    rule = case.steps[1].fault.proxy
    assert rule.to_dict() == {"action": "sever", "api": "Produce", "direction": "response", "nth": 1}
    err = error_of(tmp_path, MINIMAL + "  - fault: {proxy: sever, api: Prodce}\n")
    assert err.field == "steps[1].fault.api"


def test_background_needs_id_and_await(tmp_path):
    err = error_of(tmp_path, MINIMAL + "  - {actor: p1, op: commit_transaction, background: true}\n")
    assert err.field == "steps[1].id"
    err = error_of(tmp_path, MINIMAL + "  - {actor: p1, op: commit_transaction, background: true, id: c}\n")
    assert err.field == "steps"
    err = error_of(tmp_path, MINIMAL + "  - {await: nothing}\n")
    assert err.field == "steps[1].await"


def test_checks_validation(tmp_path):
    err = error_of(tmp_path, MINIMAL + "checks:\n  - {check: records, isolation: read_comitted, topic: t1, count: 1}\n")
    assert err.field == "checks[0].isolation"
    err = error_of(tmp_path, MINIMAL + "checks:\n  - {check: records, isolation: read_committed, topic: t1}\n")
    assert err.field == "checks[0]"
    err = error_of(tmp_path, MINIMAL + "checks:\n  - {check: sorted, topic: t1}\n")
    assert err.field == "checks[0].check"


def test_fault_configs_are_not_broker_configs(tmp_path):
    err = error_of(tmp_path, MINIMAL.replace("topology: {topics: [t1]}",
                                             "topology: {topics: [t1], broker_configs: {kconform.fault: x}}"))
    assert err.field == "topology.broker_configs.kconform.fault"


def test_yaml_syntax_error_names_the_line(tmp_path):
    err = error_of(tmp_path, "title: [unclosed\n")
    assert err.field.startswith("line ")


def test_id_must_match_path(tmp_path):
    err = error_of(tmp_path, "id: other\n" + MINIMAL)
    assert err.field == "id"


def test_glob_selection():
    ids = [c.id for c in load_cases(["zombie/*"])]
    assert ids and all(i.startswith("zombie/") for i in ids)
    assert discover()
