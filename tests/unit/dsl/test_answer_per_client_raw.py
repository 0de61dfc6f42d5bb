"""Case-language additions: the proxy `answer` rule, per-client expectations and checks, and
the raw actor's structured `request` (built with the project's codec)."""
from __future__ import annotations

import struct
import textwrap
from pathlib import Path

import pytest

from broker_impl.codec import API, REQUEST_HEADER
from conformance.dsl import CaseError, load_case
from conformance.dsl.model import Expect
from conformance.runner.checks import data_matches, evaluate, expect_matches, unspecified_check
from conformance.raw import build_request, namespace_body
from conformance.refs import RefError, resolve, step_lookup

BASE = """
title: t
topology: {topics: [t1]}
actors:
  p1: {role: producer, config: {transactional.id: x}}
steps:
  - p1: init_transactions
"""


def load(tmp_path: Path, extra: str, checks: str = ""):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(BASE) + extra + textwrap.dedent(checks))
    return load_case(path, tmp_path)


def error_of(tmp_path: Path, extra: str, checks: str = "") -> CaseError:
    with pytest.raises(CaseError) as info:
        load(tmp_path, extra, checks)
    return info.value


# ----------------------------------------------------------------------------- answer
def test_answer_rule_defaults_to_requests_and_carries_the_error(tmp_path):
    case = load(tmp_path, "  - fault: {proxy: answer, api: EndTxn, error: NOT_COORDINATOR}\n")
    rule = case.steps[1].fault.proxy
    assert rule.to_dict() == {"action": "answer", "api": "EndTxn", "direction": "request", "nth": 1,
                              "error": "NOT_COORDINATOR"}
    assert case.needs_proxy()
    assert "NOT_COORDINATOR" in case.steps[1].describe()


@pytest.mark.parametrize("fault,field", [
    ("{proxy: answer, api: EndTxn}", "steps[1].fault.error"),
    ("{proxy: answer, api: EndTxn, error: FENCED}", "steps[1].fault.error"),
    ("{proxy: answer, api: EndTxn, error: ILLEGAL_STATE}", "steps[1].fault.error"),   # a local name
    ("{proxy: answer, api: EndTxn, error: NOT_COORDINATOR, direction: response}", "steps[1].fault.direction"),
    ("{proxy: answer, api: ListOffsets, error: NOT_COORDINATOR}", "steps[1].fault.api"),
    ("{proxy: drop, api: EndTxn, error: NOT_COORDINATOR}", "steps[1].fault.error"),
])
def test_bad_answer_rules(tmp_path, fault, field):
    assert error_of(tmp_path, f"  - fault: {fault}\n").field == field


def test_the_runner_hands_the_error_to_the_proxy(tmp_path):
    from conformance.runner.proxying import ProxyFront

    case = load(tmp_path, "  - fault: {proxy: answer, api: EndTxn, nth: 2, error: PRODUCER_FENCED}\n")
    front = ProxyFront()
    try:
        rid = front.add_rule(case.steps[1].fault.proxy)
        rule = front.server.rules.rule(rid)
        assert (rule.action, rule.direction, rule.nth, rule.error) == ("answer", "request", 2, 90)
        [check] = front.fault_checks()
        assert not check.passed and "answer PRODUCER_FENCED" in check.name
    finally:
        front.stop()


# ----------------------------------------------------------------------------- per client
PER_CLIENT = """\
  - actor: p1
    op: commit_transaction
    expect:
      confluent: {error: UNKNOWN_PRODUCER_ID, abortable: true}
      java: ok
      default: {error: any, fatal: true}
"""


def test_per_client_expectation(tmp_path):
    expect = load(tmp_path, PER_CLIENT).steps[1].expect
    assert set(expect.per_client) == {"confluent", "java", "default"}
    fatal = {"ok": False, "error": {"name": "CLIENT_ERROR", "fatal": True}}
    abortable = {"ok": False, "error": {"name": "UNKNOWN_PRODUCER_ID", "abortable": True}}
    assert expect_matches(expect, abortable, "confluent")[0]
    assert not expect_matches(expect, fatal, "confluent")[0]
    assert expect_matches(expect, {"ok": True}, "java")[0]
    assert not expect_matches(expect, abortable, "java")[0]
    assert expect_matches(expect, fatal, "kafka-python")[0]          # the default
    assert "confluent:" in expect.describe()


def test_a_client_the_per_client_expectation_does_not_name_is_unspecified_not_a_load_error(tmp_path):
    """Issue 11: adding a client must never break loading a case. A client that the map names
    neither itself nor by `default` is not specified: the step is recorded, its check holds and
    says so. A key that is no client is still refused (a typo must not silently specify nothing)."""
    case = load(tmp_path, "  - {actor: p1, op: commit_transaction, expect: {confluent: ok, java: ok}}\n")
    expect = case.steps[1].expect
    assert expect.for_client("kafka-python") is None and expect.for_client("java") is not None
    fenced = {"step": 1, "ok": False, "error": {"name": "PRODUCER_FENCED"}}
    check = unspecified_check("step[1]", fenced, "kafka-python")
    assert check.passed and check.unspecified and "PRODUCER_FENCED" in check.message
    assert not expect_matches(expect, fenced, "java")[0]
    only_default = load(tmp_path, "  - {actor: p1, op: commit_transaction, expect: {default: PRODUCER_FENCED}}\n")
    assert only_default.steps[1].expect.for_client("any-client").errors == ("PRODUCER_FENCED",)
    err = error_of(tmp_path, "  - {actor: p1, op: commit_transaction, expect: {confluent: ok, nobody: ok}}\n")
    assert err.field == "steps[1].expect.nobody"


def test_checks_limited_to_clients(tmp_path):
    case = load(tmp_path, "", """\
        checks:
          - {check: records, isolation: read_committed, topic: t1, count: 1, clients: [confluent]}
          - {check: records, isolation: read_committed, topic: t1, count: 0}
        """)
    outcome = {"reads": {"read_committed": {"t1-0": [{"value": "v"}]}}}
    assert [c.passed for c in evaluate(case, outcome, "confluent")] == [True, False]
    assert [c.passed for c in evaluate(case, outcome, "java")] == [False]
    err = error_of(tmp_path, "", "checks:\n  - {check: records, isolation: read_committed, topic: t1, count: 0, "
                                 "clients: [rust]}\n")
    assert err.field == "checks[0].clients[0]"


def test_data_matching_goes_into_lists_and_mappings():
    assert data_matches([1, 2], 2) and not data_matches([1], 2)
    assert data_matches([{"offset": 0, "topic": "t"}], [{"offset": 0}])
    assert not data_matches([{"offset": 1}], [{"offset": 0}])
    assert not data_matches([{"offset": 0}, {"offset": 0}], [{"offset": 0}])
    assert data_matches({"a": {"b": 1, "c": 2}}, {"a": {"b": 1}}) and not data_matches({"a": 1}, {"a": {"b": 1}})
    assert expect_matches(Expect(data={"offsets": [{"offset": 0}]}),
                          {"ok": True, "data": {"offsets": [{"offset": 0, "partition": 0}]}})[0]


# ----------------------------------------------------------------------------- raw request
RAW = """\
  - {actor: raw, op: request, id: init, api: InitProducerId, version: 4,
     body: {transactional_id: x, transaction_timeout_ms: 1000}}
  - actor: raw
    op: request
    api: Produce
    version: 9
    body:
      transactional_id: x
      acks: -1
      topic_data: [{name: t1, partition_data: [{index: 0, records: {batch: {producer_id: "${init.producer_id}",
                    producer_epoch: "${init.producer_epoch}", transactional: true, values: [a, b]}}}]}]
    expect: {data: {error: INVALID_TXN_STATE}}
"""


def test_raw_request_steps_load_and_build(tmp_path):
    case = load(tmp_path, RAW)
    step = case.steps[2]
    assert (step.actor, step.op, step.args["api"], step.args["version"]) == ("raw", "request", "Produce", 9)
    data = {"init": {"producer_id": 4000, "producer_epoch": 3}}
    body = namespace_body(resolve(step.args["body"], step_lookup(data.get)), lambda n: f"{n}-zz")
    assert body["transactional_id"] == "x-zz" and body["topic_data"][0]["name"] == "t1-zz"
    frame = build_request("Produce", 9, body, correlation_id=7)
    api = API["Produce"]
    header, pos = REQUEST_HEADER.decode(api.request_header_version(9), frame, 4)
    req, _ = api.request.decode(9, frame, pos)
    assert (header.request_api_key, header.request_api_version, header.correlation_id) == (0, 9, 7)
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    records = req.topic_data[0].partition_data[0].records
    from broker_impl.log.records import BatchHeader, decode_records

    h = BatchHeader.unpack(records)
    assert (h.producer_id, h.producer_epoch, h.is_transactional) == (4000, 3, True)
    assert [r.value for r in decode_records(records)] == [b"a", b"b"]


def test_raw_request_errors(tmp_path):
    err = error_of(tmp_path, "  - {actor: raw, op: request, api: EndTxn, version: 4, body: {transactional: x}}\n")
    assert err.field == "steps[1].body" and "transactional_id" in err.expected
    err = error_of(tmp_path, "  - {actor: raw, op: request, api: EndTxn, version: 99, body: {}}\n")
    assert err.field == "steps[1].body"
    err = error_of(tmp_path, "  - {actor: raw, op: request, api: EndTransaction, version: 1, body: {}}\n")
    assert err.field == "steps[1].api"
    with pytest.raises(RefError):
        resolve({"producer_id": "${nope.producer_id}"}, step_lookup({}.get))
    with pytest.raises(RefError):
        resolve("${init.missing}", step_lookup({"init": {"producer_id": 1}}.get))
    assert namespace_body({"transactional_id": ""}, lambda n: n + "-zz") == {"transactional_id": ""}


def test_library_covers_the_error_injection_and_raw_scenarios():
    from conformance.dsl import load_cases

    cases = load_cases()
    covered = {s for c in cases for s in c.scenario}
    for s in ("S11", "S12", "S14", "S15", "S16", "S18", "S19", "S21", "S22", "S25", "S26"):
        assert s in covered, s
    endtxn = [c for c in cases if c.id.startswith("endtxn/")]
    errors = {f.proxy.to_dict()["error"] for c in endtxn for f in c.faults()
              if f.proxy is not None and f.proxy.to_dict()["action"] == "answer"}
    assert errors == {"COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS",
                      "CONCURRENT_TRANSACTIONS", "UNKNOWN_PRODUCER_ID", "INVALID_PRODUCER_ID_MAPPING",
                      "INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"}


def test_raw_outcome_sees_partition_error_codes():
    """AddPartitionsToTxn v0-3 puts its errors in PartitionErrorCode: a raw step's `error` must
    name them (a CONCURRENT_TRANSACTIONS there once passed for NONE)."""
    from conformance.raw import _errors

    response = {"throttle_time_ms": 0, "results": [
        {"name": "t1", "results": [{"partition_index": 0, "partition_error_code": 51}]}]}
    assert _errors(response) == ["CONCURRENT_TRANSACTIONS"]
    assert _errors({"error_code": 0, "topics": [{"topic_error_code": 0}]}) == []


def test_acl_resource_names_are_case_names_but_the_wildcard_and_the_cluster():
    """CreateAcls / DescribeAcls / DeleteAcls name a case's transactional id, group or topic in
    resource_name(_filter): made unique like the others; `*` and `kafka-cluster` are Kafka's."""
    body = {"creations": [{"resource_type": 5, "resource_name": "txn-1", "principal": "User:*", "host": "*"},
                          {"resource_type": 2, "resource_name": "*"},
                          {"resource_type": 4, "resource_name": "kafka-cluster"}],
            "resource_name_filter": "app"}
    out = namespace_body(body, lambda n: f"{n}-zz")
    assert [c["resource_name"] for c in out["creations"]] == ["txn-1-zz", "*", "kafka-cluster"]
    assert out["creations"][0]["principal"] == "User:*" and out["creations"][0]["host"] == "*"
    assert out["resource_name_filter"] == "app-zz"
    frame = build_request("CreateAcls", 3, {"creations": out["creations"][:1]}, correlation_id=1)
    assert b"txn-1-zz" in frame
