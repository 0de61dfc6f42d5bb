"""The case language's additions of issue 14: each one loads as documented in cases/README.md,
is refused with FILE/FIELD/WHAT when misused, and means what it says when evaluated."""
from __future__ import annotations

import base64
import textwrap
from pathlib import Path

import pytest

from broker_impl.codec import API, REQUEST_HEADER
from conformance.dsl import CaseError, load_case
from conformance.dsl.loader import MAX_REPEAT
from conformance.dsl.model import CLIENT_OPS
from conformance.raw import build_request, namespace_body
from conformance.refs import RefError, data_matches, resolve, step_lookup
from conformance.runner.checks import evaluate, expect_matches
from conformance.runner.transcript_check import decode_transcript

HEAD = """
title: t
topology: {topics: [t1]}
actors:
  p1: {role: producer, config: {transactional.id: x}}
  c1: {role: consumer, client: java, config: {group.id: g}, inputs: [t1]}
steps:
"""


def load(tmp_path: Path, steps: str, checks: str = ""):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(HEAD) + textwrap.dedent(steps) + textwrap.dedent(checks))
    return load_case(path, tmp_path)


def error_of(tmp_path: Path, steps: str, checks: str = "") -> CaseError:
    with pytest.raises(CaseError) as info:
        load(tmp_path, steps, checks)
    return info.value


# ----------------------------------------------------------------------------- references
JOIN_SYNC = """
  - {actor: raw, op: request, id: join, api: JoinGroup, version: 5,
     body: {group_id: g, session_timeout_ms: 10000, rebalance_timeout_ms: 10000, member_id: "", protocol_type: consumer,
            protocols: [{name: range, metadata: ""}]}}
  - {actor: raw, op: request, api: SyncGroup, version: 3,
     body: {group_id: g, generation_id: "${join.generation_id}", member_id: "${join.member_id}", assignments: []}}
"""


def test_a_reference_in_a_string_field_loads_and_builds(tmp_path):
    """member_id is a string: the load-time check stands a string in for the reference (it
    used to stand 0 in, and `kconform run` died on 'int' has no 'encode')."""
    case = load(tmp_path, JOIN_SYNC)
    body = case.steps[1].args["body"]
    resolved = resolve(body, step_lookup({"join": {"generation_id": 3, "member_id": "m-1"}}.get))
    frame = build_request("SyncGroup", 3, resolved)
    api = API["SyncGroup"]
    _, pos = REQUEST_HEADER.decode(api.request_header_version(3), frame, 4)
    req, _ = api.request.decode(3, frame, pos)
    assert (req.member_id, req.generation_id) == ("m-1", 3)


def test_a_reference_must_name_an_earlier_step_or_capture(tmp_path):
    err = error_of(tmp_path, """
      - {actor: raw, op: request, api: SyncGroup, version: 3,
         body: {group_id: g, generation_id: 1, member_id: "${join.member_id}", assignments: []}}
    """)
    assert err.field == "steps[0]" and "earlier step id" in err.expected
    err = error_of(tmp_path, """
      - {p1: init_transactions}
      - {actor: raw, op: request, api: EndTxn, version: 4,
         body: {transactional_id: x, producer_id: "${pid}", producer_epoch: 0, committed: true}}
    """)
    assert "captured" in err.expected


# ----------------------------------------------------------------------------- per-client expect
def test_a_lone_default_is_an_expectation_for_every_client(tmp_path):
    case = load(tmp_path, "  - {p1: init_transactions}\n  - {actor: p1, op: begin_transaction, expect: {default: ok}}\n")
    expect = case.steps[1].expect
    assert expect.for_client("confluent").ok and expect.for_client("java").ok


def test_a_per_client_map_mixed_with_expectation_keys_says_why(tmp_path):
    err = error_of(tmp_path, "  - {actor: p1, op: init_transactions, expect: {java: ok, error: PRODUCER_FENCED}}\n")
    assert "per-client map" in err.expected and "error" in err.expected


def test_a_client_the_map_does_not_name_is_unspecified(tmp_path):
    case = load(tmp_path, "  - {actor: p1, op: init_transactions, expect: {java: ok}}\n")
    assert case.steps[0].expect.for_client("confluent") is None


def test_a_pinned_actors_step_takes_the_branch_of_the_runs_client():
    """c1 is pinned to java; in the confluent row the map's confluent branch applies (the row's
    client is what varies between rows), never always java's."""
    from conformance.dsl.model import Expect

    expect = Expect(per_client={"java": Expect(ok=False, errors=("PRODUCER_FENCED",)), "confluent": Expect()})
    rec = {"ok": True, "client": "java"}
    assert expect_matches(expect, rec, "confluent")[0]
    assert not expect_matches(expect, rec, "java")[0]


# ----------------------------------------------------------------------------- message match
def test_error_message_substring_and_regex(tmp_path):
    case = load(tmp_path, """
      - {actor: p1, op: init_transactions, expect: {error: INVALID_CONFIG, message: session.timeout.ms}}
      - {actor: p1, op: init_transactions, expect: {error: any, message_regex: "must be >= `?session"}}
    """)
    rec = {"ok": False, "error": {"name": "INVALID_CONFIG",
                                  "message": "`max.poll.interval.ms`must be >= `session.timeout.ms`"}}
    assert expect_matches(case.steps[0].expect, rec)[0]
    assert expect_matches(case.steps[1].expect, rec)[0]
    other = {"ok": False, "error": {"name": "INVALID_CONFIG", "message": "bootstrap.servers is empty"}}
    ok, why = expect_matches(case.steps[0].expect, other)
    assert not ok and "session.timeout.ms" in why
    err = error_of(tmp_path, "  - {actor: p1, op: init_transactions, expect: {error: any, message_regex: '('}}\n")
    assert err.field.endswith("message_regex")


# ----------------------------------------------------------------------------- capture + compare
def test_captures_and_comparisons(tmp_path):
    case = load(tmp_path, """
      - {actor: raw, op: request, id: first, api: InitProducerId, version: 4,
         body: {transactional_id: x, transaction_timeout_ms: 60000}, capture: {pid: producer_id, epoch: producer_epoch}}
      - {actor: raw, op: request, api: InitProducerId, version: 4,
         body: {transactional_id: x, transaction_timeout_ms: 60000},
         expect: {data: {producer_id: {equals: "${pid}"}, producer_epoch: {greater_than: "${epoch}"}}}}
    """)
    assert case.steps[0].capture == {"pid": "producer_id", "epoch": "producer_epoch"}
    lookup = {"pid": 7, "epoch": 2}
    res = lambda v: resolve(v, lambda name, path: lookup[name])  # noqa: E731
    assert expect_matches(case.steps[1].expect, {"ok": True, "data": {"producer_id": 7, "producer_epoch": 3}},
                          None, res)[0]
    ok, why = expect_matches(case.steps[1].expect, {"ok": True, "data": {"producer_id": 7, "producer_epoch": 2}},
                             None, res)
    assert not ok and "greater than 2" in why
    assert data_matches([1, 2, 3], {"at_least": 3}) and not data_matches("abc", {"matches": "^b"})
    err = error_of(tmp_path, "  - {actor: p1, op: init_transactions, expect: {data: {x: {equals: 1, y: 2}}}}\n")
    assert "comparison" in err.expected


def test_a_capture_from_a_missing_field_is_a_failed_check_not_a_crash():
    with pytest.raises(RefError):
        resolve("${init.nope}", step_lookup({"init": {"producer_id": 1}}.get))


# ----------------------------------------------------------------------------- clients: and repeat:
def test_clients_on_a_step(tmp_path):
    case = load(tmp_path, "  - {actor: p1, op: init_transactions, clients: [confluent]}\n")
    assert case.steps[0].runs_for("confluent") and not case.steps[0].runs_for("java")
    err = error_of(tmp_path, "  - {actor: p1, op: init_transactions, clients: [rdkafka]}\n")
    assert err.field == "steps[0].clients[0]"


def test_repeat_with_a_bound(tmp_path):
    case = load(tmp_path, """
      - repeat: 5
        until: {step: bump, expect: {data: {producer_epoch: {at_least: 3}}}}
        steps:
          - {actor: raw, op: request, id: bump, api: InitProducerId, version: 4,
             body: {transactional_id: x, transaction_timeout_ms: 60000}}
    """)
    rep = case.steps[0]
    assert (rep.kind, rep.times, rep.until.step, rep.body[0].label) == ("repeat", 5, "bump", "0.0")
    assert "at most 5 times" in rep.describe()
    assert error_of(tmp_path, f"  - {{repeat: {MAX_REPEAT + 1}, steps: [{{p1: init_transactions}}]}}\n").field \
        == "steps[0].repeat"
    err = error_of(tmp_path, "  - {repeat: 2, until: {step: nope, expect: ok}, steps: [{p1: init_transactions}]}\n")
    assert err.field == "steps[0].until.step"
    err = error_of(tmp_path, "  - {repeat: 2, steps: [{repeat: 2, steps: [{p1: init_transactions}]}]}\n")
    assert "repeat" in err.expected


# ----------------------------------------------------------------------------- raw by role, name lists
def test_raw_request_addressed_by_role(tmp_path):
    case = load(tmp_path, """
      - {actor: raw, op: request, api: DescribeTransactions, version: 0, broker: {coordinator: txn-1},
         body: {transactional_ids: [txn-1]}}
      - {actor: raw, op: request, api: DescribeProducers, version: 0, broker: {leader: t1/0},
         body: {topics: [{name: t1, partition_indexes: [0]}]}}
    """)
    assert case.steps[0].broker.role == "coordinator" and case.steps[0].broker.of == "txn-1"
    assert case.steps[1].broker.role == "leader"
    err = error_of(tmp_path, """
      - {actor: raw, op: request, api: EndTxn, version: 4, broker: {coordinator: txn-1, leader: t1/0},
         body: {transactional_id: x, producer_id: 1, producer_epoch: 0, committed: true}}
    """)
    assert err.field == "steps[0].broker"


def test_names_inside_string_lists_are_made_unique():
    body = {"transactional_ids": ["txn-1", "txn-2"], "groups": ["g"], "group_id": "g",
            "topics": [{"name": "t1", "partition_indexes": [0]}]}
    out = namespace_body(body, lambda n: f"{n}-zz")
    assert out == {"transactional_ids": ["txn-1-zz", "txn-2-zz"], "groups": ["g-zz"], "group_id": "g-zz",
                   "topics": [{"name": "t1-zz", "partition_indexes": [0]}]}
    cursor = namespace_body({"topics": [{"name": "t1"}], "cursor": {"topic_name": "t1", "partition_index": 2}},
                            lambda n: f"{n}-zz")
    assert cursor["cursor"] == {"topic_name": "t1-zz", "partition_index": 2}   # DescribeTopicPartitions'


# ----------------------------------------------------------------------------- ops, faults
def test_describe_ops_are_step_ops(tmp_path):
    assert {"partitions"} <= CLIENT_OPS["describe_producers"] and "ids" in CLIENT_OPS["describe_transactions"]
    case = load(tmp_path, """
      - {p1: init_transactions}
      - {actor: p1, op: describe_producers, partitions: [{topic: t1, partition: 0}]}
    """)
    assert case.steps[1].op == "describe_producers"


def test_hold_exists_only_at_a_protocol_point(tmp_path):
    case = load(tmp_path, """
      - {fault: {hold: coordinator, of: x, at: after_prepare_durable}}
      - {p1: init_transactions}
      - {wait_fault: {}}
      - {fault: {release: coordinator, of: x}}
    """)
    assert [s.fault.action for s in case.steps if s.kind == "fault"] == ["hold", "release"]
    err = error_of(tmp_path, "  - {fault: {hold: coordinator, of: x}}\n")
    assert err.field == "steps[0].fault.at"


def test_start_creates_the_clients_at_that_step(tmp_path):
    case = load(tmp_path, "  - {actor: c1, op: start, expect: {error: any, message: session.timeout.ms}}\n")
    assert case.steps[0].op == "start"


# ----------------------------------------------------------------------------- transcript
def _line(api: str, version: int, body: dict, client_id: str = "rdkafka") -> dict:
    frame = build_request(api, version, body)
    return {"dir": "c2b", "api_key": API[api].key, "api_version": version, "client_id": client_id,
            "data": base64.b64encode(frame).decode(), "truncated": False}


def test_transcript_check_counts_and_orders_frames(tmp_path):
    case = load(tmp_path, """
      - {actor: raw, op: request, id: init, api: InitProducerId, version: 4,
         body: {transactional_id: x, transaction_timeout_ms: 60000}}
    """, """
    checks:
      - check: transcript
        frame: {api: InitProducerId, fields: {producer_id: "${init.producer_id}", transactional_id: x}}
        count: 1
      - check: transcript
        sequence: [{api: InitProducerId}, {api: EndTxn, fields: {committed: true}}]
    """)
    assert case.needs_proxy()
    lines = [_line("InitProducerId", 4, {"transactional_id": "x-zz", "transaction_timeout_ms": 60000,
                                         "producer_id": 42, "producer_epoch": 0}),
             _line("EndTxn", 4, {"transactional_id": "x-zz", "producer_id": 42, "producer_epoch": 0,
                                 "committed": True})]
    frames = decode_transcript(lines, lambda v: resolve_names(v))
    res = lambda v: resolve(v, step_lookup({"init": {"producer_id": 42}}.get))  # noqa: E731
    results = evaluate(case, {"steps": []}, "confluent", res, frames)
    assert [r.passed for r in results] == [True, True], results
    res_other = lambda v: resolve(v, step_lookup({"init": {"producer_id": 43}}.get))  # noqa: E731
    wrong = evaluate(case, {"steps": []}, "confluent", res_other, frames[::-1])
    assert [r.passed for r in wrong] == [False, False]
    assert "InitProducerId" in wrong[0].message
    none = evaluate(case, {"steps": []}, "confluent", res, None)
    assert not none[0].passed and "no transcript" in none[0].message


def resolve_names(value):
    """The namespace's unmap for the test: the row suffix taken off."""
    if isinstance(value, str):
        return value.removesuffix("-zz")
    if isinstance(value, list):
        return [resolve_names(v) for v in value]
    if isinstance(value, dict):
        return {k: resolve_names(v) for k, v in value.items()}
    return value


def test_transcript_check_is_validated(tmp_path):
    err = error_of(tmp_path, "  - {p1: init_transactions}\n", "checks:\n  - {check: transcript}\n")
    assert "frame" in err.expected
    err = error_of(tmp_path, "  - {p1: init_transactions}\n",
                   "checks:\n  - {check: transcript, frame: {api: InitProducerIds}}\n")
    assert err.field == "checks[0].frame.api"
