"""The proxy's pure parts: frame naming, rules, transcript bounds. No sockets here; the
integration tests (tests/integration/proxy) put the whole proxy between real clients and a
real broker."""

from __future__ import annotations

import base64
import json
import struct
import threading
import time

import pytest

from broker_impl.codec import API, request_info
from conformance.proxy.frames import PendingRequests
from conformance.proxy.rules import Rule, RuleBook, RuleError
from conformance.proxy.transcript import Transcript


def request_frame(api_name: str, version: int, corr: int, body, client_id: str | None = "cli") -> bytes:
    return API[api_name].request_frame(version, corr, client_id, body)


def response_frame(corr: int, body: bytes = b"\x00\x00") -> bytes:
    payload = struct.pack(">i", corr) + body
    return struct.pack(">i", len(payload)) + payload


def produce(version: int, acks: int, txn: str | None = None) -> bytes:
    R = API["Produce"].Request
    return request_frame("Produce", version, 11, R(transactional_id=txn, acks=acks, timeout_ms=1000, topic_data=[]))


# ----------------------------------------------------------------------------- frames
@pytest.mark.parametrize("version", [3, 8, 9, API["Produce"].max_version])
@pytest.mark.parametrize("txn", [None, "txn-a"])
@pytest.mark.parametrize("acks,expects", [(0, False), (1, True), (-1, True)])
def test_produce_acks_decides_whether_an_answer_comes(version, txn, acks, expects):
    info = request_info(produce(version, acks, txn))
    assert (info.api_name, info.api_version, info.correlation_id, info.client_id) == ("Produce", version, 11, "cli")
    assert info.expects_response is expects


def test_flexible_header_request_is_named():
    R = API["ApiVersions"].Request
    frame = request_frame("ApiVersions", 3, 5, R(client_software_name="x", client_software_version="1"), "rdkafka")
    info = request_info(frame)
    assert (info.api_key, info.api_name, info.api_version, info.correlation_id, info.client_id) == \
        (18, "ApiVersions", 3, 5, "rdkafka")
    assert info.size == len(frame)


def test_unknown_api_and_short_frames_are_described_not_raised():
    garbage = struct.pack(">ihhi", 8, 999, 0, 3)
    info = request_info(garbage)
    assert (info.api_key, info.api_name, info.correlation_id) == (999, None, 3)
    assert request_info(b"\x00\x00\x00\x02ab").api_key is None
    truncated = produce(9, 1)[:14]  # header cut in the middle of the client id
    assert request_info(truncated).api_name == "Produce"


def test_responses_are_named_by_their_request_in_order():
    pending = PendingRequests()
    pending.sent(request_info(produce(9, 0)))          # acks=0: never answered, not remembered
    R = API["Metadata"].Request
    pending.sent(request_info(request_frame("Metadata", 12, 1, R(topics=None))))
    pending.sent(request_info(request_frame("Metadata", 12, 2, R(topics=None))))
    pending.sent(request_info(request_frame("Metadata", 12, 3, R(topics=None))))
    assert len(pending) == 3
    unknown = pending.answer(response_frame(77))
    assert (unknown.api_name, unknown.correlation_id) == (None, 77) and len(pending) == 3
    r2 = pending.answer(response_frame(2))      # 1 was never answered: forgotten with it
    assert (r2.api_name, r2.api_version, r2.correlation_id, r2.client_id) == ("Metadata", 12, 2, "cli")
    assert len(pending) == 1
    assert pending.answer(response_frame(1)).api_name is None
    assert pending.answer(response_frame(3)).api_name == "Metadata" and len(pending) == 0


# ----------------------------------------------------------------------------- rules
def test_rule_from_case_data_accepts_names_and_aliases():
    r = Rule.from_dict({"api": "EndTxn", "direction": "request", "action": "hold"})
    assert (r.api, r.direction, r.nth, r.every) == (API["EndTxn"].key, "request", 1, False)
    assert Rule.from_dict({"api": "END_TXN", "action": "drop"}).api == API["EndTxn"].key
    assert Rule.from_dict({"api": 0, "action": "drop"}).api == 0
    assert Rule.from_dict({"api": "Produce", "direction": "response", "action": "sever", "when": "after"}).to_dict() == \
        {"action": "sever", "api": "Produce", "direction": "response", "nth": 1, "when": "after"}


@pytest.mark.parametrize("bad", [
    {"api": "Produce"},                                   # no action
    {"api": "Produce", "action": "explode"},
    {"api": "NoSuchApi", "action": "drop"},
    {"api": "Produce", "action": "delay"},                # delay without ms
    {"api": "Produce", "action": "drop", "nth": 0},
    {"api": "Produce", "action": "drop", "direction": "up"},
    {"api": "Produce", "action": "drop", "color": "red"},
    {"api": "Produce", "action": "corrupt", "mode": "melt"},
    {"api": "Produce", "action": "corrupt", "size_prefix": "tiny"},
])
def test_bad_rules_are_refused_with_a_reason(bad):
    with pytest.raises(RuleError):
        Rule.from_dict(bad)


def test_nth_and_every():
    one = Rule(action="drop", nth=2)
    assert [one.acts_on(i) for i in range(1, 5)] == [False, True, False, False]
    every = Rule(action="drop", nth=2, every=True)
    assert [every.acts_on(i) for i in range(1, 5)] == [False, True, True, True]


def test_corrupt_frame_variants():
    frame = produce(9, 1)
    flip = Rule(action="corrupt", offset=0, length=2).corrupt_frame(frame)
    assert flip[:4] == frame[:4] and flip[4:6] == b"\xff\xff" and flip[6:] == frame[6:]
    whole = Rule(action="corrupt").corrupt_frame(frame)
    assert bytes(b ^ 0xFF for b in whole[4:]) == frame[4:]
    rnd = Rule(action="corrupt", mode="random", seed=3, offset=8)
    assert rnd.corrupt_frame(frame) == rnd.corrupt_frame(frame) != frame
    assert rnd.corrupt_frame(frame)[:12] == frame[:12]
    huge = Rule(action="corrupt", length=0, size_prefix="huge").corrupt_frame(frame)
    assert huge[:4] == b"\x7f\xff\xff\xff" and huge[4:] == frame[4:]
    neg = Rule(action="corrupt", length=0, size_prefix="negative").corrupt_frame(frame)
    assert neg[:4] == b"\xff\xff\xff\xff"
    assert len(Rule(action="corrupt", offset=10_000).corrupt_frame(frame)) == len(frame)


def test_rulebook_one_action_per_frame_lowest_id_wins_and_everyone_counts():
    book = RuleBook()
    observe = book.add({"api": "Produce", "action": "pass", "every": True})
    first = book.add({"api": "Produce", "action": "delay", "delay_ms": 1})
    second = book.add({"api": "Produce", "action": "drop"})
    req = request_info(produce(9, 1))
    decided = book.decide(1, 7, req, 0.0)
    assert decided is not None and decided[0] == first
    assert book.counts(observe) == (1, 1) and book.counts(first) == (1, 1) and book.counts(second) == (1, 0)
    assert book.decide(1, 7, req, 0.1) is None  # nobody's nth any more; "pass" never acts
    assert book.counts(observe) == (2, 2)
    other = request_info(request_frame("Metadata", 12, 1, API["Metadata"].Request(topics=None)))
    assert book.decide(1, 7, other, 0.2) is None and book.counts(observe)[0] == 2


def test_rulebook_node_and_client_filters():
    book = RuleBook()
    rid = book.add({"api": "Produce", "action": "drop", "node": 2, "client_id": "p1"})
    assert book.decide(1, 1, request_info(produce(9, 1)), 0) is None         # node 1, client "cli"
    f = produce(9, 1)
    assert book.decide(2, 1, request_info(f), 0) is None                       # node 2, wrong client
    R = API["Produce"].Request
    mine = request_frame("Produce", 9, 4, R(transactional_id=None, acks=1, timeout_ms=1, topic_data=[]), "p1")
    assert book.decide(2, 1, request_info(mine), 0) == (rid, book.rule(rid), None)


def test_wait_for_match_from_another_thread():
    book = RuleBook()
    rid = book.add({"api": "Produce", "action": "hold"})
    assert book.wait_for_match(rid, timeout=0.05) is None
    threading.Timer(0.1, lambda: book.decide(3, 9, request_info(produce(9, 1)), 1.5)).start()
    m = book.wait_for_match(rid, timeout=10)
    assert m is not None and (m.node, m.conn, m.api_name, m.correlation_id, m.acted) == (3, 9, "Produce", 11, True)
    # The held frame is registered before the waiter wakes: a release right away finds it.
    assert [h.rule_id for h in book.take_holds(rid)] == [rid]
    gone = book.add({"api": "Fetch", "action": "drop"})
    threading.Timer(0.1, lambda: book.remove(gone)).start()
    assert book.wait_for_match(gone, timeout=10) is None  # removal ends the wait


# ----------------------------------------------------------------------------- transcript
def test_transcript_caps_each_frame_and_total_memory(tmp_path):
    t = Transcript(tmp_path / "t.jsonl", max_frame_bytes=100, max_memory_bytes=1000)
    big = produce(9, 1) + b"x" * 500
    info = request_info(big)
    for _ in range(10):
        t.record(conn=1, node=1, src="a:1", dst="b:2", info=info, data=big)
    lines = t.lines()
    assert all(ln["size"] == len(big) and ln["truncated"] for ln in lines)
    kept = [ln for ln in lines if ln["data"] is not None]
    assert 0 < len(kept) < 10 and all(len(base64.b64decode(ln["data"])) == 100 for ln in kept)
    assert all(ln.get("data_dropped") for ln in lines if ln["data"] is None)
    t.close()
    on_disk = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert len(on_disk) == 10 and all(ln["data"] is not None for ln in on_disk)  # the file is not budgeted
    assert set(on_disk[0]) >= {"t", "conn", "dir", "src", "dst", "api_key", "api_name", "api_version",
                               "correlation_id", "size", "data", "rule", "action"}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_transcript_never_keeps_a_sasl_token(version):
    """PLAIN's SaslAuthenticate carries the password itself: recorded as '*' of its length, the
    frame otherwise as sent (SaslHandshake and the broker's answer untouched)."""
    from kafka.protocol.sasl import SaslAuthenticateRequest

    token = b"\0alice\0s3cret-pw"
    request = SaslAuthenticateRequest(auth_bytes=token)
    request.with_header(correlation_id=4, client_id="c")
    frame = request.encode(version=version, header=True, framed=True)
    t = Transcript()
    line = t.record(conn=1, node=1, src="a", dst="b", info=request_info(frame), data=frame)
    kept = base64.b64decode(line["data"])
    assert line["redacted"] and b"s3cret" not in kept and len(kept) == len(frame)
    assert kept.replace(b"*" * len(token), token) == frame
    other = t.record(conn=1, node=1, src="a", dst="b", info=request_info(produce(9, 1)), data=produce(9, 1))
    assert "redacted" not in other and base64.b64decode(other["data"]) == produce(9, 1)


def test_transcript_restart_starts_a_new_case():
    t = Transcript()
    t.record(conn=1, node=1, src="a", dst="b", info=request_info(produce(9, 1)), data=produce(9, 1))
    time.sleep(0.01)
    t.restart()
    assert len(t) == 0 and t.now() < 5
