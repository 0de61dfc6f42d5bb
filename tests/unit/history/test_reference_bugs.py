"""A reference row's anomalies are a known Kafka bug only when the broker's log proves it."""
from __future__ import annotations

from broker_impl.codec import Errors
from conformance.history.checker import Anomaly
from conformance.history.reference_bugs import KAFKA_20357, KAFKA_20734, explain, explain_on_wire, skipped_markers
from conformance.proxy.transcript import decode_line

from tests.unit.history.test_client_flaws import frame_line, unmap

LINE = ("[2026-11-27 06:19:47,268] INFO [Transaction Marker Channel Manager 1]: Couldn't find leader endpoint "
        "for partitions Set(in-2, data-2) while trying to send transaction markers for txn-t1, these partitions "
        "are likely deleted already and hence can be skipped (kafka.coordinator.transaction."
        "TransactionMarkerChannelManager)\n")
INIT = "[2026-11-27 06:16:53,570] INFO [TransactionCoordinator id=1] Initialized transactionalId txn-t1 with producerId 4 and producer epoch 0 on partition __transaction_state-4\n"
EVENTS = [{"process": "t1#2", "worker": "t1", "type": "invoke", "f": "init", "value": {"tid": "txn-t1"}},
          {"process": "t2#1", "worker": "t2", "type": "invoke", "f": "init", "value": {"tid": "txn-t2"}}]


def lost(value: str, partition: str, process: str = "t1#2", answer: str = "ok") -> dict:
    return {"value": value, "partition": partition, "offset": 7,
            "commit": {"process": process, "type": answer, "f": "txn", "time": 167.0}}


def test_the_log_lines_name_transactional_id_and_partitions() -> None:
    pairs, lines = skipped_markers(["noise\n", LINE, "likely deleted already, but another sentence\n"])
    assert pairs == {("txn-t1", "in-2"), ("txn-t1", "data-2")}
    assert lines == [LINE.rstrip("\n")]


def test_lost_commits_on_the_skipped_partitions_are_kafka_20734() -> None:
    a = Anomaly("lost_write", "2 x ...", [lost("t1-1170", "data-2"), lost("t1-1171", "in-2")], 167.0, 2)
    found = explain([a], EVENTS, [LINE])
    assert found is not None and found.key == KAFKA_20734
    assert found.to_dict()["skipped_markers"] == [{"transactional_id": "txn-t1", "partition": "data-2"},
                                                  {"transactional_id": "txn-t1", "partition": "in-2"}]


def hanging(partition: str, holder: int) -> Anomaly:
    return Anomaly("hanging_transaction", f"{partition}: ...", [{
        "partition": partition, "last_stable": 3, "high_watermark": 9,
        "producers": [{"producer_id": 9, "producer_epoch": 1, "current_txn_start_offset": -1},
                      {"producer_id": holder, "producer_epoch": 2, "current_txn_start_offset": 3}]}])


def test_a_hanging_partition_held_by_the_producer_whose_markers_were_skipped_is_explained() -> None:
    assert explain([hanging("in-2", 4)], EVENTS, [INIT, LINE]).key == KAFKA_20734
    # held by another producer, or by one the log never names, or the partition not skipped
    assert explain([hanging("in-2", 5)], EVENTS, [INIT, LINE]) is None
    assert explain([hanging("in-2", 4)], EVENTS, [LINE]) is None
    assert explain([hanging("in-0", 4)], EVENTS, [INIT, LINE]) is None


def test_what_the_log_does_not_prove_stays_unexplained() -> None:
    # another partition, another producer's commit, a plain send, a commit not answered ok
    for ev in (lost("t1-1", "data-0"), lost("t2-1", "data-2", process="t2#1"),
               {"value": "p1-1", "partition": "data-2", "offset": 3}, lost("t1-2", "data-2", answer="info")):
        assert explain([Anomaly("lost_write", "x", [ev])], EVENTS, [LINE]) is None
    # any other kind beside it
    both = [Anomaly("lost_write", "x", [lost("t1-1170", "data-2")]), Anomaly("duplicate", "y", [{"value": "a"}])]
    assert explain(both, EVENTS, [LINE]) is None
    # seen more often than its evidence shows: the unseen ones are not proved
    assert explain([Anomaly("lost_write", "x", [lost("t1-1170", "data-2")], count=25)], EVENTS, [LINE]) is None
    # no such line in the log, or no anomaly at all
    assert explain([Anomaly("lost_write", "x", [lost("t1-1170", "data-2")])], EVENTS, ["INFO all fine\n"]) is None
    assert explain([], EVENTS, [LINE]) is None


def test_a_copiers_skipped_offsets_marker_explains_its_groups_missing_offsets() -> None:
    """Kafka 4.3.1, workloads/mixed seed 504: the markers of copier c1's commits on
    __consumer_offsets-0 were skipped (a HashSet when more than four partitions are named); the
    group showed no committed offset at the end while its output was there."""
    line = LINE.replace("Set(in-2, data-2)", "HashSet(__consumer_offsets-0, out-0, in-1, in-2, out-2)").replace(
        "txn-t1", "txn-c1")
    events = EVENTS + [{"process": "c1#1", "worker": "c1", "type": "invoke", "f": "init", "value": {"tid": "txn-c1"}},
                       {"process": "c1#1", "worker": "c1", "type": "invoke", "f": "subscribe", "value": {"topics": ["in"]}}]
    missing = Anomaly("output_without_offsets", "...", [{"group": "etl", "partition": "in-0", "committed": None}], 1.0)
    stalled = Anomaly("stalled", "...", [{"group": "etl", "partition": "in-0", "committed": None}], 1.0)
    found = explain([missing, stalled], events, [line])
    assert found is not None and ("txn-c1", "__consumer_offsets-0") in found.skipped
    # a producer's skipped marker on a data partition proves nothing about a group's offsets
    assert explain([missing], events, [LINE]) is None


# ---------------------------------------------------------------- KAFKA-20357, proved on the wire
def _fenced(process: str = "t2#3", at: float = 419.9) -> Anomaly:
    return Anomaly("unexpected_fencing", "1 x ...", [{"what": "...", "event": {
        "process": process, "type": "fail", "f": "txn", "time": at,
        "error": {"name": "PRODUCER_FENCED", "message": "..."}}}], at, 1)


def _end_txn(t: float, epoch: int, answered: str | None, corr: int, version: int = 5) -> list[dict]:
    out = [frame_line("EndTxn", version, "c2b", t, {"transactional_id": "txn-t2-x1", "producer_id": 0,
                                                    "producer_epoch": epoch, "committed": True}, corr)]
    if answered is not None:
        out.append(frame_line("EndTxn", version, "b2c", t + 0.05, {"error_code": Errors[answered], "producer_id": 0,
                                                                   "producer_epoch": epoch + 1}, corr))
    return out


def _init_retry(t: float, epoch: int, answer: str, corr: int) -> list[dict]:
    return [frame_line("InitProducerId", 5, "c2b", t, {"transactional_id": "txn-t2-x1", "transaction_timeout_ms": 20000,
                                                       "producer_id": 0, "producer_epoch": epoch}, corr, conn=3),
            frame_line("InitProducerId", 5, "b2c", t + 0.02, {"error_code": Errors[answer], "producer_id": -1,
                                                              "producer_epoch": -1}, corr, conn=3)]


def test_a_retry_fenced_after_an_unanswered_tv2_end_txn_is_kafka_20357() -> None:
    lines = _end_txn(404.7, 139, "NONE", 1) + _end_txn(414.7, 141, None, 2) + _init_retry(419.7, 141, "PRODUCER_FENCED", 3)
    found = explain_on_wire([_fenced()], EVENTS, lines, decode_line, unmap)
    assert found is not None and found.key == KAFKA_20357
    (proof,) = found.to_dict()["fenced_retries"]
    assert proof["process"] == "t2#3" and proof["transactional_id"] == "txn-t2" and proof["epoch"] == 141
    assert proof["end_txn"]["answer"] is None and proof["init_producer_id"]["answer"] == "PRODUCER_FENCED"


def test_an_answered_end_txn_a_tv1_end_txn_or_another_epoch_proves_nothing() -> None:
    retry = _init_retry(419.7, 141, "PRODUCER_FENCED", 3)
    for lines in (_end_txn(414.7, 141, "NONE", 2) + retry,           # the producer learnt the new epoch
                  _end_txn(414.7, 141, "NOT_COORDINATOR", 2) + retry,  # refused: nothing written
                  _end_txn(414.7, 141, None, 2, version=4) + retry,  # TV1: EndTxn bumps no epoch
                  _end_txn(414.7, 140, None, 2) + retry,             # another epoch
                  _end_txn(414.7, 141, None, 2)):                    # no fenced retry on the wire
        assert explain_on_wire([_fenced()], EVENTS, lines, decode_line, unmap) is None
    lines = _end_txn(414.7, 141, None, 2) + retry
    other = Anomaly("lost_write", "...", [lost("t1-1", "data-2")], 1.0, 1)
    assert explain_on_wire([_fenced(), other], EVENTS, lines, decode_line, unmap) is None
    assert explain_on_wire([_fenced(at=400.0)], EVENTS, lines, decode_line, unmap) is None   # fenced before the retry
