"""A client's protocol violations proved from the transcript (conformance/history/client_flaws.py):
the anomalies come from the real checker, the proof from real Produce frames, and what the
frames do not show stays unexplained."""
from __future__ import annotations

import base64

from broker_impl.codec import API
from conformance.dsl.model import WorkerDef
from conformance.history import History, check
from conformance.history.client_flaws import explain
from conformance.proxy.transcript import decode_line
from conformance.raw import build_request

WORKERS = {
    "i1": WorkerDef(name="i1", kind="idempotent", topics=("data",)),
    "t1": WorkerDef(name="t1", kind="transactional", topics=("data",)),
    "r1": WorkerDef(name="r1", kind="reader", topics=("data",)),
}
CLIENTS = {"i1": "sarama", "t1": "kafkajs"}


def produce(t: float, values: list[str], *, pid: int = 7, epoch: int = 3, seq: int = 0, tid: str | None = None,
            topic: str = "data-x1", corr: int = 1) -> dict:
    frame = build_request("Produce", 9, {"transactional_id": tid, "acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": {"batch": {
            "producer_id": pid, "producer_epoch": epoch, "base_sequence": seq, "transactional": tid is not None,
            "values": values}}}]}]}, correlation_id=corr)
    return {"t": t, "conn": 1, "node": 1, "dir": "c2b", "api_key": API["Produce"].key, "api_name": "Produce",
            "api_version": 9, "correlation_id": corr, "client_id": "i1", "size": len(frame),
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
