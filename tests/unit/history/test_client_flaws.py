"""A client's protocol violations proved from the transcript (conformance/history/client_flaws.py):
the anomalies come from the real checker, the proof from real Produce frames, and what the
frames do not show stays unexplained."""
from __future__ import annotations

import base64
import time

from broker_impl.codec import API
from conformance.dsl.model import WorkerDef
from conformance.history import History, check
from conformance.history.client_flaws import explain
from conformance.proxy.transcript import decode_line
from conformance.raw import build_request, build_struct

WORKERS = {
    "c1": WorkerDef(name="c1", kind="copier", topics=("in",), to="out", group="etl"),
    "i1": WorkerDef(name="i1", kind="idempotent", topics=("data",)),
    "t1": WorkerDef(name="t1", kind="transactional", topics=("data",)),
    "r1": WorkerDef(name="r1", kind="reader", topics=("data",)),
}
CLIENTS = {"i1": "sarama", "t1": "kafkajs", "c1": "sarama"}


def produce(t: float, values: list[str], *, pid: int = 7, epoch: int = 3, seq: int = 0, tid: str | None = None,
            topic: str = "data-x1", corr: int = 1) -> dict:
    frame = build_request("Produce", 9, {"transactional_id": tid, "acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": {"batch": {
            "producer_id": pid, "producer_epoch": epoch, "base_sequence": seq, "transactional": tid is not None,
            "values": values}}}]}]}, correlation_id=corr)
    return {"t": t, "conn": 1, "node": 1, "dir": "c2b", "api_key": API["Produce"].key, "api_name": "Produce",
            "api_version": 9, "correlation_id": corr, "client_id": "i1", "size": len(frame),
            "data": base64.b64encode(frame).decode(), "captured": len(frame), "truncated": False}


def frame_line(api: str, version: int, direction: str, t: float, body: dict, corr: int, conn: int = 2) -> dict:
    """A transcript line holding a real request (c2b) or response (b2c) frame of `api`."""
    a = API[api]
    if direction == "c2b":
        frame = build_request(api, version, body, correlation_id=corr)
    else:
        frame = a.response_frame(version, corr, build_struct(a.response, a.response.spec.root, body))
    return {"t": t, "conn": conn, "node": 1, "dir": direction, "api_key": a.key, "api_name": api,
            "api_version": version, "correlation_id": corr, "client_id": "c1", "size": len(frame),
            "data": base64.b64encode(frame).decode(), "captured": len(frame), "truncated": False}


def reads(committed: dict) -> dict:
    one = {tp: [{"offset": o, "key": None, "value": v} for o, v in recs] for tp, recs in committed.items()}
    return {"reads": {"read_committed": one, "read_uncommitted": one}, "offsets": {}, "group_offsets": {}}


def unmap(name: str) -> str:
    return name.replace("-x1", "")


def misattributed() -> list:
    h = History()
    for value, offset in (("i1-1", 0), ("i1-2", 0)):
        i = h.invoke("i1#1", "send", {"v": value, "topic": "data", "partition": 0})
        h.complete(i, "ok", {"offset": offset, "partition": 0})
    anomalies = check(h.events(), WORKERS, reads({"data-0": [(0, "i1-1")]}))
    assert [a.kind for a in anomalies] == ["misattributed_ack"]
    return anomalies


def test_new_records_under_a_written_batchs_sequence_are_the_clients_reused_sequence() -> None:
    lines = [produce(1.0, ["i1-1"], seq=0), produce(1.5, ["i1-2"], seq=0, corr=2)]
    found = explain(misattributed(), lines, decode_line, CLIENTS, unmap)
    assert found is not None and found.complete
    assert found.reason() == "sarama reused_sequence"
    [flaw] = found.flaws
    [proof] = flaw.evidence
    assert (proof["producer_id"], proof["epoch"], proof["base_sequence"]) == (7, 3, 0)
    assert proof["written"]["values"] == ["i1-1"] and proof["reused"]["values"] == ["i1-2"]


def test_a_next_sequence_or_a_new_epoch_proves_nothing() -> None:
    """The broker answering the second batch with the first one's offset although their
    sequences differ is the broker's bug: no client flaw is proved."""
    for second in (produce(1.5, ["i1-2"], seq=1, corr=2), produce(1.5, ["i1-2"], epoch=4, corr=2)):
        assert explain(misattributed(), [produce(1.0, ["i1-1"]), second], decode_line, CLIENTS, unmap) is None
    # the "reuse" came first: the written batch reused the other's numbers, not the reverse
    assert explain(misattributed(), [produce(1.5, ["i1-1"]), produce(1.0, ["i1-2"], corr=2)], decode_line,
                   CLIENTS, unmap) is None


def aborted_and_read() -> tuple[History, list]:
    h = History()
    i = h.invoke("t1#1", "txn", {"txn": "t1/1", "tid": "txn-t1", "records": [["t1-1", "data", 0]]})
    e = h.invoke("t1#1", "end_txn", {"txn": "t1/1", "commit": False})
    h.complete(e, "ok")
    h.complete(i, "ok", {"end": "abort", "records": [["t1-1", "data", 0, None]]})
    p = h.invoke("r1#1", "poll", {})
    h.complete(p, "ok", {"records": [["data", 0, 0, "t1-1"]]})
    anomalies = check(h.events(), WORKERS, reads({"data-0": [(0, "t1-1")]}))
    assert {a.kind: a.count for a in anomalies} == {"aborted_read": 2}
    return h, anomalies


def test_records_first_sent_after_the_abort_was_reported_are_the_clients() -> None:
    h, anomalies = aborted_and_read()
    after = h.events()[-1]["time"] + 5.0
    found = explain(anomalies, [produce(after, ["t1-1"], tid="txn-t1")], decode_line, CLIENTS, unmap)
    assert found is not None and found.complete and found.reason() == "kafkajs sent_after_end"
    assert found.flaws[0].evidence[0]["txn"] == "t1/1"


def test_a_record_on_the_wire_before_the_abort_stays_unexplained() -> None:
    """Sent before the abort was answered: the broker should have aborted it (the broker's
    bug, or the abort's); nothing the client did explains the read."""
    _, anomalies = aborted_and_read()
    assert explain(anomalies, [produce(-1.0, ["t1-1"], tid="txn-t1")], decode_line, CLIENTS, unmap) is None
    assert explain(anomalies, [], decode_line, CLIENTS, unmap) is None


def test_a_row_with_another_anomaly_is_not_explained_whole() -> None:
    h, anomalies = aborted_and_read()
    lost = check(h.events(), WORKERS, reads({}))     # nothing in the log: no aborted_read at all
    assert explain(lost, [], decode_line, CLIENTS, unmap) is None
    mixed = anomalies + misattributed()
    after = h.events()[-1]["time"] + 5.0
    found = explain(mixed, [produce(after, ["t1-1"], tid="txn-t1")], decode_line, CLIENTS, unmap)
    assert found is not None and not found.complete


def copied_twice(join_after: float) -> tuple[list, list[dict], float]:
    """A copier's transaction c1/1 copies in-0@5 and commits 0.2 s after it began; c1/2 copies
    it again. The group's generation 8 began (JoinGroup answered) `join_after` seconds after
    c1/1 began; c1/1's offsets went in generation 8, 0.1 s after it began."""
    h = History()
    started = None
    for name, out_offset in (("c1/1", 0), ("c1/2", 1)):
        i = h.invoke("c1#1", "txn", {"txn": name, "tid": "txn-c1", "records": [["i1-1@0:5", "out", 0]],
                                     "consumed": [["in", 0, 5, "i1-1"]]})
        started = h.events()[-1]["time"] if started is None else started
        time.sleep(0.2)
        e = h.invoke("c1#1", "end_txn", {"txn": name, "commit": True})
        h.complete(e, "ok")
        h.complete(i, "ok", {"end": "commit", "records": [["i1-1@0:5", "out", 0, out_offset]]})
    final = reads({"in-0": [(5, "i1-1")], "out-0": [(0, "i1-1@0:5"), (1, "i1-1@0:5")]})
    anomalies = [a for a in check(h.events(), WORKERS, final, copier_groups={"etl": (["in"], "out")})
                 if a.kind == "duplicate"]
    assert anomalies and anomalies[0].evidence[0]["writers"] == ["c1"]
    lines = [
        frame_line("JoinGroup", 7, "c2b", started + join_after - 0.01, {
            "group_id": "etl-x1", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "m",
            "protocol_type": "consumer", "protocols": []}, 1),
        frame_line("JoinGroup", 7, "b2c", started + join_after, {
            "error_code": 0, "generation_id": 8, "member_id": "m", "leader": "m", "protocol_name": "range",
            "members": []}, 1),
        frame_line("TxnOffsetCommit", 3, "c2b", started + 0.1, {
            "transactional_id": "txn-c1-x1", "group_id": "etl-x1", "producer_id": 1, "producer_epoch": 0,
            "generation_id": 8, "member_id": "m", "topics": [{"name": "in-x1", "partitions": [
                {"partition_index": 0, "committed_offset": 6}]}]}, 2, conn=3),
    ]
    return anomalies, lines, h


def test_a_transaction_begun_before_a_rebalance_and_committed_in_the_new_generation() -> None:
    """The copy's first transaction began, then the group moved to generation 8, then the
    transaction's offsets were committed in generation 8: the client's (KIP-447: abort it)."""
    anomalies, lines, h = copied_twice(join_after=0.05)
    found = explain(anomalies, lines, decode_line, CLIENTS, unmap, h.events())
    assert found is not None and found.complete and found.reason() == "sarama commit_across_rebalance"
    proof = found.flaws[0].evidence[0]
    assert (proof["txn"], proof["generation"], proof["copied_again_by"]) == ("c1/1", 8, "c1/2")


def test_a_generation_that_began_before_the_transaction_proves_nothing() -> None:
    anomalies, lines, h = copied_twice(join_after=-1.0)
    assert explain(anomalies, lines, decode_line, CLIENTS, unmap, h.events()) is None


def test_a_record_sent_after_the_broker_answered_the_abort_is_the_clients() -> None:
    """The worker's own report of the abort can lag the wire: the broker's answer to the
    producer's EndTxn(abort) is the earlier bound (KafkaJS sent the record 2 ms after it)."""
    h = History()
    i = h.invoke("t1#1", "txn", {"txn": "t1/1", "tid": "txn-t1", "records": [["t1-1", "data", 0]]})
    began = h.events()[-1]["time"]
    time.sleep(0.3)
    e = h.invoke("t1#1", "end_txn", {"txn": "t1/1", "commit": False})
    h.complete(e, "ok")
    h.complete(i, "ok", {"end": "abort", "records": [["t1-1", "data", 0, None]]})
    anomalies = check(h.events(), WORKERS, reads({"data-0": [(0, "t1-1")]}))
    end_req = {"transactional_id": "txn-t1-x1", "producer_id": 7, "producer_epoch": 3, "committed": False}
    lines = [frame_line("EndTxn", 3, "c2b", began + 0.05, end_req, 9),
             frame_line("EndTxn", 3, "b2c", began + 0.1, {"error_code": 0}, 9),
             produce(began + 0.2, ["t1-1"], tid="txn-t1")]
    found = explain(anomalies, lines, decode_line, CLIENTS, unmap, h.events())
    assert found is not None and found.complete
    assert found.flaws[0].evidence[0]["abort_done_at"] == began + 0.1
    lines[1]["t"] = began + 0.25           # answered after the send, reported later still: nothing proved
    assert explain(anomalies, lines, decode_line, CLIENTS, unmap, h.events()) is None


def test_resuming_from_offsets_fetched_without_require_stable_is_the_clients() -> None:
    """c1/1 committed offset 6 for in-0 (its EndTxn answered); the copier then fetched its
    group's offsets without RequireStable, was answered 5 (the markers not yet written) and c1/2
    copied in-0@5 again. With RequireStable the same fetch proves nothing."""
    h = History()
    times = {}
    for name, out_offset in (("c1/1", 0), ("c1/2", 1)):
        i = h.invoke("c1#1", "txn", {"txn": name, "tid": "txn-c1", "records": [["i1-1@0:5", "out", 0]],
                                     "consumed": [["in", 0, 5, "i1-1"]]})
        times[name] = h.events()[-1]["time"]
        time.sleep(0.2)
        e = h.invoke("c1#1", "end_txn", {"txn": name, "commit": True})
        h.complete(e, "ok")
        h.complete(i, "ok", {"end": "commit", "records": [["i1-1@0:5", "out", 0, out_offset]]})
        time.sleep(0.2)
    final = reads({"in-0": [(5, "i1-1")], "out-0": [(0, "i1-1@0:5"), (1, "i1-1@0:5")]})
    anomalies = [a for a in check(h.events(), WORKERS, final, copier_groups={"etl": (["in"], "out")})
                 if a.kind == "duplicate"]
    t = times["c1/1"]

    def lines(require_stable: bool) -> list[dict]:
        return [
            frame_line("TxnOffsetCommit", 3, "c2b", t + 0.05, {
                "transactional_id": "txn-c1-x1", "group_id": "etl-x1", "producer_id": 1, "producer_epoch": 0,
                "generation_id": 8, "member_id": "m", "topics": [{"name": "in-x1", "partitions": [
                    {"partition_index": 0, "committed_offset": 6}]}]}, 1),
            frame_line("EndTxn", 3, "c2b", t + 0.1, {"transactional_id": "txn-c1-x1", "producer_id": 1,
                                                     "producer_epoch": 0, "committed": True}, 2),
            frame_line("EndTxn", 3, "b2c", t + 0.15, {"error_code": 0}, 2),
            frame_line("OffsetFetch", 8, "c2b", t + 0.3, {"groups": [{"group_id": "etl-x1", "topics": [
                {"name": "in-x1", "partition_indexes": [0]}]}], "require_stable": require_stable}, 3),
            frame_line("OffsetFetch", 8, "b2c", t + 0.31, {"groups": [{"group_id": "etl-x1", "topics": [
                {"name": "in-x1", "partitions": [{"partition_index": 0, "committed_offset": 5}]}]}]}, 3),
        ]

    found = explain(anomalies, lines(False), decode_line, CLIENTS, unmap, h.events())
    assert found is not None and found.complete and found.reason() == "sarama unstable_offsets_read"
    assert found.flaws[0].evidence[0]["answered"] == 5
    assert explain(anomalies, lines(True), decode_line, CLIENTS, unmap, h.events()) is None
