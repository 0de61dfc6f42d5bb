"""The `answer` action in front of the embedded broker: the proxy answers a request in the
broker's place (S26), the broker never sees it, and the client reads its responses in order."""

from __future__ import annotations

import base64
import struct
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from broker_impl.codec import API, RESPONSE_HEADER

from ..broker.rawclient import RawConnection

pytestmark = pytest.mark.slow


def _decoded(line: dict):
    api = API[line["api_name"]]
    frame = base64.b64decode(line["data"])
    _, pos = RESPONSE_HEADER.decode(api.response_header_version(line["api_version"]), frame, 4)
    return api.response.decode(line["api_version"], frame, pos)[0]


def test_endtxn_answered_not_coordinator_client_retries_and_commits(proxied_broker):
    pb = proxied_broker
    rid = pb.proxy.add_rule({"api": "EndTxn", "action": "answer", "error": "NOT_COORDINATOR"})
    p = Producer({"bootstrap.servers": pb.bootstrap, "transactional.id": "answer-1", "log_level": 0})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("answered", value=b"v", partition=0)
    p.commit_transaction(30)   # the synthesized NOT_COORDINATOR is retriable: the retry commits
    assert pb.proxy.rules.counts(rid) == (2, 1)  # both EndTxn requests matched, the 1st answered

    lines = [ln for ln in pb.proxy.transcript.lines() if ln["api_name"] == "EndTxn"]
    swallowed = [ln for ln in lines if ln["dir"] == "c2b" and ln["action"] == "answer"]
    synthesized = [ln for ln in lines if ln["dir"] == "b2c" and ln["action"] == "answer"]
    forwarded = [ln for ln in lines if ln["action"] is None]
    assert len(swallowed) == len(synthesized) == 1
    assert synthesized[0]["correlation_id"] == swallowed[0]["correlation_id"]
    assert synthesized[0]["conn"] == swallowed[0]["conn"] and synthesized[0]["rule"] == rid
    assert _decoded(synthesized[0]).error_code == 16
    # the retry went to the broker and its answer came back: the broker saw one EndTxn only
    assert [ln["dir"] for ln in forwarded] == ["c2b", "b2c"]
    assert _decoded(forwarded[1]).error_code == 0

    c = Consumer({"bootstrap.servers": pb.broker.bootstrap, "group.id": "answer-reader",
                  "isolation.level": "read_committed", "log_level": 0})
    try:
        # the COMMIT marker is written after EndTxn is answered (as Kafka's markers are): until it
        # is, the read_committed end (the LSO) stays at the open transaction's first offset
        deadline = time.monotonic() + 20
        while True:
            low, high = c.get_watermark_offsets(TopicPartition("answered", 0), timeout=10)
            if (low, high) == (0, 2) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert (low, high) == (0, 2)  # the record and one COMMIT marker
    finally:
        c.close()


def test_answer_waits_behind_the_responses_before_it(proxied_broker):
    """Three pipelined requests, the middle one answered by the proxy: the client reads the
    answers in request order, the synthesized one in its place, and the broker never sees it."""
    pb = proxied_broker
    rid = pb.proxy.add_rule({"api": "InitProducerId", "action": "answer", "error": "COORDINATOR_LOAD_IN_PROGRESS"})
    md = API["Metadata"].Request(topics=None)
    init = API["InitProducerId"].Request(transactional_id="pipelined", transaction_timeout_ms=60000)
    with RawConnection(pb.bootstrap) as conn:
        frames = [conn.encode_request("Metadata", 12, md), conn.encode_request("InitProducerId", 4, init),
                  conn.encode_request("Metadata", 12, md)]
        conn.send_raw(b"".join(frames))
        answers = [conn.recv_frame() for _ in frames]
    assert all(a is not None for a in answers)
    assert [struct.unpack_from(">i", a)[0] for a in answers] == [1, 2, 3]
    hdr, pos = RESPONSE_HEADER.decode(1, answers[1], 0)
    resp, _ = API["InitProducerId"].response.decode(4, answers[1], pos)
    assert (hdr.correlation_id, resp.error_code, resp.producer_id) == (2, 14, -1)
    assert pb.proxy.rules.counts(rid) == (1, 1)
    b2c = [(ln["api_name"], ln["correlation_id"], ln["action"]) for ln in pb.proxy.transcript.lines()
           if ln["dir"] == "b2c"]
    assert b2c == [("Metadata", 1, None), ("InitProducerId", 2, "answer"), ("Metadata", 3, None)]


def test_answer_with_nothing_pending_goes_out_at_once(proxied_broker):
    pb = proxied_broker
    pb.proxy.add_rule({"api": "EndTxn", "action": "answer", "error": "PRODUCER_FENCED"})
    end = API["EndTxn"].Request(transactional_id="nobody", producer_id=5, producer_epoch=0, committed=True)
    with RawConnection(pb.bootstrap) as conn:
        resp = conn.request("EndTxn", 4, end)
    assert resp.error_code == 90
    assert not [ln for ln in pb.proxy.transcript.lines() if ln["api_name"] == "EndTxn" and ln["action"] is None]
