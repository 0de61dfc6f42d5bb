"""Error codes on the wire (conformance/history/profile.py): counted from real frames, the
OUT_OF_ORDER_SEQUENCE_NUMBER cascade told apart, and held against fault windows."""
from __future__ import annotations

import base64

from broker_impl.codec import API
from conformance.history import History
from conformance.history.profile import (Window, WireError, node_downtime, profile, stall_windows, timeout_windows,
                                         unexpected, windows,
                                         wire_errors)
from conformance.raw import build_request, build_struct
from conformance.proxy.transcript import decode_line


def line(direction: str, api: str, version: int, corr: int, frame: bytes, t: float, conn: int = 1) -> dict:
    return {"t": t, "conn": conn, "node": 1, "dir": direction, "api_key": API[api].key, "api_name": api,
            "api_version": version, "correlation_id": corr, "client_id": "t1", "size": len(frame),
            "data": base64.b64encode(frame).decode(), "captured": len(frame), "truncated": False}


def produce(corr: int, seq: int, t: float, error: str) -> list[dict]:
    req = build_request("Produce", 9, {"transactional_id": "x", "acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": "data", "partition_data": [{"index": 0, "records": {"batch": {
            "producer_id": 7, "producer_epoch": 1, "base_sequence": seq, "transactional": True, "values": ["v"]}}}]}]},
        correlation_id=corr)
    codes = {"NONE": 0, "NOT_ENOUGH_REPLICAS": 19, "OUT_OF_ORDER_SEQUENCE_NUMBER": 45, "CONCURRENT_TRANSACTIONS": 51}
    api = API["Produce"]
    body = build_struct(api.response, api.response.spec.root, {"responses": [
        {"name": "data", "partition_responses": [{"index": 0, "error_code": codes[error], "base_offset": -1}]}]})
    return [line("c2b", "Produce", 9, corr, req, t), line("b2c", "Produce", 9, corr, api.response_frame(9, corr, body),
                                                              t + 0.01)]


def test_a_refused_first_batch_explains_the_out_of_order_ones_after_it():
    lines = produce(1, 0, 1.0, "CONCURRENT_TRANSACTIONS") + produce(2, 3, 1.1, "OUT_OF_ORDER_SEQUENCE_NUMBER")
    errors = wire_errors(lines, decode_line)
    assert [(e.api, e.error, e.explained is not None) for e in errors] == [
        ("Produce", "CONCURRENT_TRANSACTIONS", False), ("Produce", "OUT_OF_ORDER_SEQUENCE_NUMBER", True)]
    assert profile(errors) == {"client": {"Produce": {"CONCURRENT_TRANSACTIONS": 1, "OUT_OF_ORDER_SEQUENCE_NUMBER": 1}}}
    assert unexpected(errors, []) == []


def test_an_out_of_order_batch_alone_is_unexpected_outside_a_fault():
    errors = wire_errors(produce(1, 5, 20.0, "OUT_OF_ORDER_SEQUENCE_NUMBER"), decode_line)
    [a] = unexpected(errors, [])
    assert a.kind == "unexpected_error" and a.count == 1
    assert unexpected(errors, [Window("node", 15.0, 25.0, "crash node 1")]) == []


def test_not_enough_replicas_on_a_healthy_node_but_not_during_a_fault():
    """Kafka 4.3.1 answers a Produce NOT_ENOUGH_REPLICAS on one node when its transaction
    verification cannot reach a coordinator that is still loading after a restart (measured in a
    workload): a fault window covers it; outside one, nothing does."""
    errors = wire_errors(produce(1, 0, 30.0, "NOT_ENOUGH_REPLICAS"), decode_line)
    [a] = unexpected(errors, [])
    assert "outside every fault window" in a.message
    assert unexpected(errors, [Window("node", 20.0, 40.0, "restart node 1")]) == []


def test_windows_from_the_nemesis_events():
    h = History()
    h.event("nemesis", "fault", {"kind": "node", "action": "crash", "role": "leader of data/0"})
    h.event("nemesis", "fault", {"kind": "proxy", "action": "delay", "rule": 4, "fault": "proxy delay"})
    h.event("nemesis", "fault", {"kind": "node", "action": "restart", "role": "leader of data/0"})
    h.event("nemesis", "fault", {"kind": "proxy", "action": "remove", "rule": 4})
    got = windows(h.events(), end=10.0)
    assert sorted(w.kind for w in got) == ["node", "proxy"]
    assert all(w.end > w.start for w in got)


def test_a_transaction_past_its_timeout_explains_that_producers_fencing_only():
    """Measured on Apache Kafka 4.3.1 (workloads/mixed seed 104): aiokafka's flush waited on a
    dropped Produce response, its abort then hung past transaction.timeout.ms, the coordinator
    aborted the transaction with an epoch bump, and the producer's next Produce was answered
    INVALID_PRODUCER_EPOCH 30 s after every fault had ended."""
    h = History()
    h.complete(h.invoke("t2#1", "init"), "ok")
    h.complete(h.invoke("t2#1", "txn", {"txn": "t2/5"}), "fail", error={"name": "DEADLINE_EXCEEDED"})
    h.complete(h.invoke("t2#2", "init"), "ok")
    h.complete(h.invoke("t1#1", "txn", {"txn": "t1/1"}), "ok")
    events = h.events()
    for e, t in zip(events, [0.0, 0.5, 10.0, 40.0, 50.0, 51.0, 52.0, 53.0]):
        e["time"] = t
    [w] = timeout_windows(events, {"t1": 20.0, "t2": 20.0}, end=60.0)
    assert (w.kind, w.start, w.end, w.client_id) == ("timeout", 30.0, 55.0, "t2")

    def answer(client: str, error: str) -> WireError:
        return WireError(46.8, "Produce", error, "client", client, 1, 7)
    assert unexpected([answer("t2", "INVALID_PRODUCER_EPOCH")], [w]) == []
    assert unexpected([answer("t1", "INVALID_PRODUCER_EPOCH")], [w])[0].count == 1, "another producer's answer"
    assert unexpected([answer("t2", "NOT_ENOUGH_REPLICAS")], [w])[0].count == 1, "not a fencing code"
    assert timeout_windows(events, {"t2": 60.0}, end=60.0) == [], "within its timeout"


def test_a_node_window_opens_when_the_stop_began():
    """A clean stop (controlled shutdown) moves the node's leaderships before it completes: a
    three-node workload saw Produce NOT_LEADER_OR_FOLLOWER 0.5 s before the stop's completion."""
    h = History()
    i = h.invoke("nemesis", "fault", {"kind": "node", "action": "stop", "role": "coordinator of txn-c1"})
    h.complete(i, "ok", {"kind": "node", "action": "stop", "role": "coordinator of txn-c1"})
    h.event("nemesis", "fault", {"kind": "node", "action": "restart", "role": "coordinator of txn-c1"})
    events = h.events()
    for e, t in zip(events, [119.5, 120.17, 127.3, 127.3]):
        e["time"] = t
    [w] = windows(events, end=200.0)
    assert w.start == 119.5
    assert unexpected([WireError(119.661, "Produce", "NOT_LEADER_OR_FOLLOWER", "client", "i2", 2, 9)], [w]) == []


def test_a_brokers_dropped_fetch_response_stalls_it_until_it_asks_again():
    """A follower whose replica Fetch response the proxy dropped asks again only after its
    request timeout: the window lasts until then, for every client (acks=all waits on it);
    a client's own dropped frame opens none (its retries are its own)."""
    def frame(t, direction, client_id, action=None, node=2):
        return {"t": t, "conn": 5, "node": node, "dir": direction, "api_key": API["Fetch"].key, "api_name": "Fetch",
                "api_version": 12, "correlation_id": 1, "client_id": client_id, "action": action}
    lines = [frame(150.0, "c2b", "broker-3-fetcher-0"), frame(150.4, "b2c", "broker-3-fetcher-0", "drop"),
             frame(160.0, "c2b", "broker-3-fetcher-0", node=1),        # to another node: still waiting on node 2
             frame(161.0, "b2c", "c1", "drop"),
             frame(189.3, "c2b", "broker-3-fetcher-0"), frame(190.0, "c2b", "broker-3-fetcher-0")]
    decode = lambda ln: {"api": "Fetch", "from": "broker" if ln["client_id"].startswith("broker-") else "client"}
    [w] = stall_windows(lines, decode, end=300.0)
    assert (w.kind, w.start, w.end) == ("proxy", 150.4, 189.3 + 4.0)
    assert "broker-3-fetcher-0's Fetch response to node 2 dropped" in w.what
    timed_out = WireError(171.0, "Produce", "REQUEST_TIMED_OUT", "client", "i2", 2, 10)
    assert unexpected([timed_out], [w]) == []
    # never asked again before the end: the window runs to the end
    [w] = stall_windows(lines[:2], decode, end=300.0)
    assert w.end == 304.0


def test_node_downtime_sums_the_nodes_away_and_the_median_restart():
    h = History()
    h.event("nemesis", "fault", {"kind": "node", "action": "crash", "role": "leader of data/0"})
    i = h.invoke("nemesis", "fault", {"kind": "node", "action": "restart", "role": "leader of data/0"})
    h.complete(i, "ok", {"kind": "node", "action": "restart", "role": "leader of data/0"})
    got = node_downtime(h.events())
    assert set(got) == {"node_down_s", "restart_s"} and got["node_down_s"] >= got["restart_s"] >= 0.0
    assert node_downtime([]) == {"node_down_s": 0.0, "restart_s": 0.0}
