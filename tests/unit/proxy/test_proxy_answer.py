"""The `answer` action's pure parts: the synthesized response is what Kafka's codec reads back,
rules refuse what cannot be answered, and synthesized responses wait their turn in the
connection's response order. The proxy in action is in tests/integration/proxy/test_proxy_answer.py."""

from __future__ import annotations

import struct

import pytest

from broker_impl.codec import API, RESPONSE_HEADER, request_info
from conformance.proxy.answer import AnswerError, answerable_versions, can_answer, error_code_of, synthesize_response
from conformance.proxy.frames import PendingRequests
from conformance.proxy.rules import Rule, RuleBook, RuleError


def request_frame(api_name: str, version: int, corr: int, body) -> bytes:
    return API[api_name].request_frame(version, corr, "cli", body)


def response_frame(corr: int, body: bytes = b"\x00\x00") -> bytes:
    payload = struct.pack(">i", corr) + body
    return struct.pack(">i", len(payload)) + payload


def decode(api_name: str, version: int, frame: bytes):
    api = API[api_name]
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    header, pos = RESPONSE_HEADER.decode(api.response_header_version(version), frame, 4)
    body, end = api.response.decode(version, frame, pos)
    assert end == len(frame)
    return header, body


@pytest.mark.parametrize("version", range(0, API["EndTxn"].max_version + 1))
def test_endtxn_answer_reads_back_as_kafka_would_send_it(version):
    frame = synthesize_response(API["EndTxn"].key, version, 77, "NOT_COORDINATOR")
    header, body = decode("EndTxn", version, frame)
    assert header.correlation_id == 77
    assert (body.error_code, body.throttle_time_ms) == (16, 0)
    if version >= 5:  # TV2: no next producer id / epoch on an error
        assert (body.producer_id, body.producer_epoch) == (-1, -1)


def test_flexible_versions_get_response_header_v1():
    flexible = synthesize_response(API["InitProducerId"].key, 4, 5, 15)
    classic = synthesize_response(API["InitProducerId"].key, 1, 5, 15)
    assert decode("InitProducerId", 4, flexible)[1].error_code == 15
    assert decode("InitProducerId", 1, classic)[1].error_code == 15
    # header v1 carries an (empty) tagged-field section after the correlation id
    assert flexible[8] == 0 and len(flexible) > len(classic)


def test_which_versions_can_be_answered():
    assert answerable_versions(API["EndTxn"].key) == frozenset(range(0, API["EndTxn"].max_version + 1))
    assert answerable_versions(API["FindCoordinator"].key) == frozenset(range(0, 4))
    assert answerable_versions(API["ListOffsets"].key) == frozenset()  # no error the proxy can place
    # per-partition errors: answerable by mirroring the request, which must then be given
    assert answerable_versions(API["Produce"].key) == frozenset(range(API["Produce"].min_version,
                                                                      API["Produce"].max_version + 1))
    add = API["AddPartitionsToTxn"].key
    assert can_answer(add, 3) and can_answer(add, 4)
    with pytest.raises(AnswerError):
        synthesize_response(add, 3, 1, "NOT_COORDINATOR")


def test_per_partition_errors_mirror_the_request():
    """Produce / TxnOffsetCommit / AddPartitionsToTxn v0-3 carry errors per partition: the answer
    names every partition the request named, each with the error (Produce: base offset -1)."""
    from conformance.raw import build_request

    produce = build_request("Produce", 9, {"transactional_id": "x", "acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": "t1", "partition_data": [{"index": 0, "records": {"batch": {"values": ["a"]}}},
                                          {"index": 2, "records": {"batch": {"values": ["b"]}}}]}]}, correlation_id=5)
    _, body = decode("Produce", 9, synthesize_response(API["Produce"].key, 9, 5, "INVALID_PRODUCER_EPOCH", produce))
    [topic] = body.responses
    assert topic.name == "t1"
    assert [(p.index, p.error_code, p.base_offset) for p in topic.partition_responses] == [(0, 47, -1), (2, 47, -1)]
    add = build_request("AddPartitionsToTxn", 3, {"v3_and_below_transactional_id": "x",
                                                  "v3_and_below_topics": [{"name": "t1", "partitions": [1, 0]}]})
    _, body = decode("AddPartitionsToTxn", 3, synthesize_response(API["AddPartitionsToTxn"].key, 3, 1,
                                                                  "PRODUCER_FENCED", add))
    [topic] = body.results_by_topic_v3_and_below
    assert [(p.partition_index, p.partition_error_code) for p in topic.results_by_partition] == [(1, 90), (0, 90)]
    txn = build_request("TxnOffsetCommit", 3, {"transactional_id": "x", "group_id": "g", "topics": [
        {"name": "t1", "partitions": [{"partition_index": 0, "committed_offset": 3}]}]})
    _, body = decode("TxnOffsetCommit", 3, synthesize_response(API["TxnOffsetCommit"].key, 3, 1,
                                                               "UNKNOWN_MEMBER_ID", txn))
    assert [(p.partition_index, p.error_code) for p in body.topics[0].partitions] == [(0, 25)]
    with pytest.raises(AnswerError):
        synthesize_response(API["Produce"].key, 9, 5, "INVALID_PRODUCER_EPOCH", b"\x00\x00\x00\x02xx")


def test_error_names_and_codes():
    assert error_code_of("PRODUCER_FENCED") == 90 == error_code_of(90) == error_code_of("90")
    assert error_code_of("not_coordinator") == 16
    for bad in ("FENCED", 9999, True):
        with pytest.raises(AnswerError):
            error_code_of(bad)


def test_answer_rules_are_validated():
    r = Rule.from_dict({"api": "EndTxn", "action": "answer", "error": "CONCURRENT_TRANSACTIONS"})
    assert (r.error, r.direction) == (51, "request")
    assert r.to_dict()["error"] == "CONCURRENT_TRANSACTIONS"
    for bad in ({"api": "EndTxn", "action": "answer"},                                  # no error
                {"api": "EndTxn", "action": "answer", "error": "NOPE"},
                {"api": "EndTxn", "action": "answer", "error": 16, "direction": "response"},
                {"action": "answer", "error": 16},                                       # any API
                {"api": "ListOffsets", "action": "answer", "error": 16},                 # no error to place
                {"api": "EndTxn", "action": "drop", "error": 16}):                       # error without answer
        with pytest.raises(RuleError):
            Rule.from_dict(bad)


def test_answer_rule_selects_only_answerable_versions():
    book = RuleBook()
    rid = book.add({"api": "FindCoordinator", "action": "answer", "error": "NOT_COORDINATOR"})
    R = API["FindCoordinator"].Request
    v4 = request_info(request_frame("FindCoordinator", 4, 1, R(key_type=1, coordinator_keys=["t"])))
    v3 = request_info(request_frame("FindCoordinator", 3, 2, R(key="t", key_type=1)))
    assert book.decide(1, 1, v4, 0) is None and book.counts(rid) == (0, 0)  # errors per coordinator key
    decided = book.decide(1, 1, v3, 0)
    assert decided is not None and decided[0] == rid
    frame = decided[1].answer_frame(v3)
    assert decode("FindCoordinator", 3, frame)[1].error_code == 16


def _endtxn(corr: int) -> bytes:
    return request_frame("EndTxn", 3, corr, API["EndTxn"].Request(transactional_id="t"))


def test_injected_responses_wait_for_the_responses_before_them():
    pending = PendingRequests()
    first, second, third = (request_info(_endtxn(c)) for c in (1, 2, 3))
    pending.sent(first)
    pending.inject(second, b"synth-2", "rule")        # request 2 answered by the proxy
    pending.sent(third)
    assert pending.take_ready() == []                 # response 1 has not come: 2 must wait
    assert pending.answer(response_frame(1)).correlation_id == 1
    assert pending.take_passed() == []                # nothing was skipped over
    assert pending.take_ready() == [(second, b"synth-2", "rule")]  # its turn, before response 3
    assert pending.take_ready() == []
    assert pending.answer(response_frame(3)).correlation_id == 3 and len(pending) == 0


def test_injected_response_passed_over_goes_before_the_later_response():
    pending = PendingRequests()
    first, second, third = (request_info(_endtxn(c)) for c in (1, 2, 3))
    pending.sent(first)
    pending.inject(second, b"synth-2")
    pending.sent(third)
    # 1 is never answered (the broker dropped it); 3's response comes: 2's synthesized one first
    assert pending.answer(response_frame(3)).correlation_id == 3
    assert [frame for _, frame, _ in pending.take_passed()] == [b"synth-2"]
    assert pending.take_ready() == [] and len(pending) == 0


def test_injected_response_with_nothing_pending_is_ready_at_once():
    pending = PendingRequests()
    info = request_info(_endtxn(9))
    pending.inject(info, b"x")
    assert pending.take_ready() == [(info, b"x", None)] and len(pending) == 0
