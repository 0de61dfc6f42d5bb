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
    assert answerable_versions(API["Produce"].key) == frozenset()  # errors live per partition
    add = API["AddPartitionsToTxn"].key
    assert not can_answer(add, 3) and can_answer(add, 4)
    with pytest.raises(AnswerError):
        synthesize_response(add, 3, 1, "NOT_COORDINATOR")


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
                {"api": "Produce", "action": "answer", "error": 16},                     # no top-level error
                {"api": "EndTxn", "action": "drop", "error": 16}):                       # error without answer
        with pytest.raises(RuleError):
            Rule.from_dict(bad)


def test_answer_rule_selects_only_answerable_versions():
    book = RuleBook()
    rid = book.add({"api": "AddPartitionsToTxn", "action": "answer", "error": "NOT_COORDINATOR"})
    R = API["AddPartitionsToTxn"].Request
    v3 = request_info(request_frame("AddPartitionsToTxn", 3, 1, R(v3_and_below_transactional_id="t")))
    v4 = request_info(request_frame("AddPartitionsToTxn", 4, 2, R(transactions=[])))
    assert book.decide(1, 1, v3, 0) is None and book.counts(rid) == (0, 0)
    decided = book.decide(1, 1, v4, 0)
    assert decided is not None and decided[0] == rid
    frame = decided[1].answer_frame(v4)
    assert decode("AddPartitionsToTxn", 4, frame)[1].error_code == 16


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
