"""Idempotent produce, transactions, LSO, aborted-transaction index, snapshots, expiry."""

from __future__ import annotations

import os

import pytest
from log_helpers import NOW, append_marker, kp_batch

from broker_impl.log import AppendOrigin
from broker_impl.log import records as rec
from broker_impl.log.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from broker_impl.log.producer_state import read_snapshot

PID = 4000


def idem(seq, n=2, epoch=0, pid=PID, txn=False, ts=NOW):
    return kp_batch(n, pid=pid, epoch=epoch, seq=seq, transactional=txn, ts=ts)


def test_duplicate_of_each_of_last_five_batches_returns_original_offsets(open_log):
    log = open_log()
    infos = [log.append(idem(2 * i), now_ms=NOW) for i in range(6)]
    leo = log.log_end_offset
    for i in range(1, 6):  # batches 1..5 are the retained window
        dup = log.append(idem(2 * i), now_ms=NOW)
        assert dup.duplicate
        assert (dup.first_offset, dup.last_offset) == (infos[i].first_offset, infos[i].last_offset)
    assert log.log_end_offset == leo  # nothing written
    with pytest.raises(OutOfOrderSequenceError):  # batch 0 fell out of the window
        log.append(idem(0), now_ms=NOW)


def test_sequence_gap_is_out_of_order(open_log):
    log = open_log()
    log.append(idem(0), now_ms=NOW)
    with pytest.raises(OutOfOrderSequenceError) as ei:
        log.append(idem(3), now_ms=NOW)
    assert ei.value.error == 45
    assert log.append(idem(2), now_ms=NOW).first_offset == 2


def test_older_epoch_is_invalid_producer_epoch(open_log):
    log = open_log()
    log.append(idem(0, epoch=2), now_ms=NOW)
    with pytest.raises(InvalidProducerEpochError) as ei:
        log.append(idem(2, epoch=1), now_ms=NOW)
    assert ei.value.error == 47


def test_new_epoch_must_start_at_zero(open_log):
    log = open_log()
    log.append(idem(0, epoch=0), now_ms=NOW)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idem(5, epoch=1), now_ms=NOW)
    log.append(idem(0, epoch=1), now_ms=NOW)
    # the old epoch's batches no longer deduplicate
    with pytest.raises(InvalidProducerEpochError):
        log.append(idem(0, epoch=0), now_ms=NOW)


def test_unknown_producer_accepts_any_sequence_like_current_kafka(open_log):
    log = open_log()
    info = log.append(idem(17), now_ms=NOW)
    assert info.first_offset == 0 and not info.duplicate
    assert log.append(idem(19), now_ms=NOW).first_offset == 2


def test_sequence_wraps_from_int32_max_to_zero(open_log):
    log = open_log()
    log.append(idem(rec.INT32_MAX - 1, n=2), now_ms=NOW)  # seqs MAX-1, MAX
    assert log.append(idem(0, n=1), now_ms=NOW).first_offset == 2
    log2_batch = idem(rec.INT32_MAX, n=3)  # MAX, 0, 1 spans the wrap
    with pytest.raises(OutOfOrderSequenceError):
        log.append(log2_batch, now_ms=NOW)


def test_non_transactional_write_during_open_txn_is_invalid_txn_state(open_log):
    log = open_log()
    log.append(idem(0, txn=True), now_ms=NOW)
    with pytest.raises(InvalidTxnStateError) as ei:
        log.append(idem(2, txn=False), now_ms=NOW)
    assert ei.value.error == 48


def test_lso_and_commit_marker(open_log):
    log = open_log()
    log.append(kp_batch(2), now_ms=NOW)  # plain records 0-1
    log.append(idem(0, txn=True), now_ms=NOW)  # txn 2-3
    log.append(idem(0, pid=PID + 1), now_ms=NOW)  # non-txn producer 4-5
    assert log.last_stable_offset == 2 and log.high_watermark == 6
    r = log.read(0, 1 << 20, max_offset=log.last_stable_offset)
    assert [h.base_offset for h in rec.iter_batch_headers(r.records)] == [0]
    info = append_marker(log, True, producer_id=PID, producer_epoch=0,
                                     coordinator_epoch=0, now_ms=NOW)
    assert info.first_offset == 6
    assert log.last_stable_offset == 7 == log.high_watermark
    assert log.aborted_transactions(0, 7) == []
    (h,) = [h for h in rec.iter_batch_headers(log.read(6, 100).records)]
    assert h.is_control and rec.read_end_txn_marker(log.read(6, 100).records).control_type == 1


def test_abort_marker_fills_aborted_index_and_fetch_query(open_log, tmp_path):
    log = open_log()
    log.append(idem(0, txn=True, pid=1), now_ms=NOW)  # 0-1 pid 1
    log.append(idem(0, txn=True, pid=2), now_ms=NOW)  # 2-3 pid 2
    append_marker(log, False, producer_id=1, producer_epoch=0, coordinator_epoch=0,
                              now_ms=NOW)  # 4: abort pid 1
    assert log.last_stable_offset == 2  # pid 2 still open
    txn_index = log.active_segment.txn_index
    assert [tuple(t) for t in txn_index.entries] == [(1, 0, 4, 2)]  # LSO at abort = pid 2's start
    assert (tmp_path / "t-0" / "00000000000000000000.txnindex").stat().st_size == 34
    append_marker(log, False, producer_id=2, producer_epoch=0, coordinator_epoch=0,
                              now_ms=NOW)  # 5
    assert log.last_stable_offset == 6
    assert log.aborted_transactions(0, 6) == [(1, 0), (2, 2)]
    assert log.aborted_transactions(2, 6) == [(1, 0), (2, 2)]
    assert log.aborted_transactions(5, 6) == [(2, 2)]
    assert log.aborted_transactions(0, 1) == [(1, 0)]


def test_aborted_upper_bound_is_kafkas_index_bound_not_the_last_offset_read(open_log):
    """LocalLog.addAbortedTransactions: the bound is the offset index entry at or after the end
    of the read, else the next segment's base, else the log end -- so a one-batch read with no
    index entry after it lists an abort further on (measured on Kafka 4.3.1:
    cases/txn/fetch_aborted_list_upper_bound)."""
    log = open_log()
    log.append(kp_batch(1), now_ms=NOW)  # 0
    log.append(idem(0, n=1, txn=True, pid=1), now_ms=NOW)  # 1
    append_marker(log, False, producer_id=1, producer_epoch=0, coordinator_epoch=0,
                              now_ms=NOW)  # 2
    log.append(kp_batch(1), now_ms=NOW)  # 3
    info = log.read(0, 1, max_offset=log.last_stable_offset)
    assert (info.next_offset, info.aborted_upper_bound) == (1, 4)  # no index entry: the LEO
    assert log.aborted_transactions(0, info.aborted_upper_bound) == [(1, 1)]


def test_aborted_upper_bound_from_the_offset_index(open_log):
    indexed = open_log({"index.interval.bytes": 1})  # an entry for every append but the first
    for b in (kp_batch(1), idem(0, n=1, txn=True, pid=1)):
        indexed.append(b, now_ms=NOW)
    append_marker(indexed, False, producer_id=1, producer_epoch=0, coordinator_epoch=0,
                                  now_ms=NOW)
    indexed.append(kp_batch(1), now_ms=NOW)
    # entries (offset 1, x's end), (2, ..), (3, ..): the read of x ends exactly at the first
    # entry, and Kafka's search answers the second one there (AbstractIndex.binarySearch)
    assert indexed.read(0, 1).aborted_upper_bound == 2
    assert indexed.aborted_transactions(0, 2) == [(1, 1)]
    assert indexed.read(1, 1).aborted_upper_bound == 2  # found exactly by the search
    assert indexed.read(3, 1).aborted_upper_bound == 4  # past the last entry: the LEO


def test_offset_index_upper_bound_search_is_kafkas():
    from broker_impl.log.index import OffsetIndex
    idx = OffsetIndex("/nonexistent", 0)
    idx.offsets.extend([10, 20, 30, 40])
    idx.positions.extend([100, 200, 300, 400])
    assert idx.fetch_upper_bound_offset(50) == 10  # before every entry: the first
    assert idx.fetch_upper_bound_offset(100) == 20  # exactly the first: Kafka answers the next
    assert idx.fetch_upper_bound_offset(150) == 20
    assert idx.fetch_upper_bound_offset(300) == 30
    assert idx.fetch_upper_bound_offset(400) == 40
    assert idx.fetch_upper_bound_offset(401) is None
    assert OffsetIndex("/nonexistent", 0).fetch_upper_bound_offset(0) is None


def test_aborted_txn_spanning_segments_is_found_from_earlier_segment(open_log):
    batch = idem(0, n=5, txn=True, pid=9)
    log = open_log({"segment.bytes": len(batch) + 10})
    log.append(batch, now_ms=NOW)  # 0-4 in segment 0
    log.append(kp_batch(5), now_ms=NOW)  # rolls: 5-9 in segment 5
    append_marker(log, False, producer_id=9, producer_epoch=0, coordinator_epoch=0,
                              now_ms=NOW)
    assert len(log.segments) >= 2
    assert log.aborted_transactions(0, log.log_end_offset) == [(9, 0)]


def test_marker_with_older_coordinator_epoch_is_fenced(open_log):
    log = open_log()
    log.append(idem(0, txn=True), now_ms=NOW)
    append_marker(log, True, producer_id=PID, producer_epoch=0, coordinator_epoch=5,
                              now_ms=NOW)
    log.append(idem(2, txn=True), now_ms=NOW)
    with pytest.raises(TransactionCoordinatorFencedError) as ei:
        append_marker(log, False, producer_id=PID, producer_epoch=0,
                                  coordinator_epoch=4, now_ms=NOW)
    assert ei.value.error == 52
    assert log.last_stable_offset == 3  # still open


def test_marker_with_older_producer_epoch_is_invalid_epoch_and_tv2_rule(open_log):
    log = open_log()
    log.append(idem(0, epoch=3, txn=True), now_ms=NOW)
    with pytest.raises(InvalidProducerEpochError):
        append_marker(log, True, producer_id=PID, producer_epoch=2,
                                  coordinator_epoch=0, now_ms=NOW)
    with pytest.raises(InvalidProducerEpochError):  # TV2: marker epoch must exceed
        append_marker(log, True, producer_id=PID, producer_epoch=3,
                                  coordinator_epoch=0, transaction_version=2, now_ms=NOW)
    append_marker(log, True, producer_id=PID, producer_epoch=4, coordinator_epoch=0,
                              transaction_version=2, now_ms=NOW)
    # retried TV2 marker after the txn ended: written again, no error (KAFKA-19999)
    append_marker(log, True, producer_id=PID, producer_epoch=4, coordinator_epoch=0,
                              transaction_version=2, now_ms=NOW)
    assert log.last_stable_offset == log.high_watermark


def test_coordinator_origin_skips_sequence_checks(open_log):
    log = open_log()
    b = rec.build_batch([(b"k", b"v")], producer_id=PID, producer_epoch=0, base_sequence=-1,
                        is_transactional=True)
    log.append(b, origin=AppendOrigin.COORDINATOR, now_ms=NOW)
    log.append(b, origin=AppendOrigin.COORDINATOR, now_ms=NOW)
    assert log.log_end_offset == 2 and log.last_stable_offset == 0


def test_snapshot_written_at_roll_and_close_in_kafka_format(open_log, tmp_path):
    batch = idem(0, n=5, txn=True)
    log = open_log({"segment.bytes": len(batch) * 2})
    for i in range(3):
        log.append(idem(5 * i, n=5, txn=True), now_ms=NOW)
    assert (tmp_path / "t-0" / "00000000000000000010.snapshot").exists()
    log.close()
    (entry,) = read_snapshot(str(tmp_path / "t-0" / "00000000000000000015.snapshot"))
    assert (entry.producer_id, entry.producer_epoch, entry.last_seq) == (PID, 0, 14)
    assert entry.current_txn_first_offset == 0 and entry.last_data_offset == 14


def test_clean_restart_restores_state_from_snapshot(open_log):
    log = open_log()
    log.append(idem(0), now_ms=NOW)
    log.append(idem(2), now_ms=NOW)
    log.append(idem(0, txn=True, pid=PID + 1), now_ms=NOW)
    log.close()
    log = open_log()
    assert log.was_clean_shutdown
    assert log.last_stable_offset == 4  # open txn survived
    assert log.append(idem(2), now_ms=NOW).duplicate  # last batch dedups after restart
    with pytest.raises(OutOfOrderSequenceError):  # Kafka's snapshot keeps only the last batch
        log.append(idem(0), now_ms=NOW)
    assert log.append(idem(4), now_ms=NOW).first_offset == 6


def test_unclean_restart_rebuilds_state_and_txn_index_from_log(open_log, tmp_path):
    log = open_log()
    log.append(idem(0, txn=True, pid=1), now_ms=NOW)
    append_marker(log, False, producer_id=1, producer_epoch=0, coordinator_epoch=3,
                              now_ms=NOW)
    log.append(idem(0, txn=True, pid=2), now_ms=NOW)
    for i in range(5):
        log.append(idem(2 * i), now_ms=NOW)
    log.abandon()
    for name in os.listdir(tmp_path / "t-0"):
        if name.endswith(".snapshot") or name.endswith(".txnindex"):
            os.unlink(tmp_path / "t-0" / name)
    log = open_log()
    assert not log.was_clean_shutdown
    assert log.last_stable_offset == 3  # pid 2's txn still open
    assert log.aborted_transactions(0, log.log_end_offset) == [(1, 0)]
    for i in range(5):  # replay rebuilt the whole 5-batch window
        assert log.append(idem(2 * i), now_ms=NOW).duplicate
    log.append(idem(2, txn=True, pid=1), now_ms=NOW)
    with pytest.raises(TransactionCoordinatorFencedError):  # coordinator epoch 3 was replayed
        append_marker(log, False, producer_id=1, producer_epoch=0, coordinator_epoch=2,
                                  now_ms=NOW)


def test_producer_expiry(open_log):
    log = open_log({"producer.id.expiration.ms": 1000})
    log.append(idem(0, ts=NOW), now_ms=NOW)
    log.append(idem(0, pid=PID + 1, txn=True, ts=NOW), now_ms=NOW)
    # last timestamp = the batch's max timestamp (NOW + 1)
    assert log.remove_expired_producers(now_ms=NOW + 1000) == []
    assert log.remove_expired_producers(now_ms=NOW + 1001) == [PID]  # open txn keeps PID+1
    assert log.append(idem(40), now_ms=NOW).first_offset == 4  # forgotten: any seq accepted
    assert {p["producer_id"] for p in log.describe_producers()} == {PID, PID + 1}


# --------------------------------------------------------------- KIP-890 verification entries
def test_verified_tv2_batch_of_a_producer_new_here_must_start_at_zero(open_log):
    """Kafka 4.3.1 ProducerAppendInfo.checkSequence: a transactions-v2 producer with no state on
    the partition cannot write sequence 1 first -- its sequence 0 was refused with a retriable
    error and would never fit after it (seen live: Kafka Streams' smoke test, embedded only)."""
    log = open_log()
    log.start_transaction_verification(PID, 0, 0, True)   # seq 0: the coordinator said CONCURRENT_TRANSACTIONS
    log.start_transaction_verification(PID, 2, 0, True)   # seq 2, sent behind it, verified
    with pytest.raises(OutOfOrderSequenceError) as ei:
        log.append(idem(2, txn=True), now_ms=NOW)
    assert ei.value.error == 45 and log.log_end_offset == 0
    assert log.append(idem(0, txn=True), now_ms=NOW).first_offset == 0
    assert log.producer_state.verification_state_entry(PID) is None  # the transaction has begun
    assert log.append(idem(2, txn=True), now_ms=NOW).first_offset == 2


def test_verified_batch_above_the_lowest_sequence_seen_is_out_of_order(open_log):
    """The lowest sequence seen while verifying bars higher ones (any transaction version); a newer
    epoch starts the bar again."""
    log = open_log()
    log.append(idem(0, txn=True), now_ms=NOW)
    append_marker(log, True, producer_id=PID, producer_epoch=0, coordinator_epoch=0, now_ms=NOW)
    log.start_transaction_verification(PID, 4, 0, False)
    log.start_transaction_verification(PID, 2, 0, False)   # a lower one lowers the bar
    log.start_transaction_verification(PID, 6, 0, False)   # a higher one does not raise it
    assert log.producer_state.verification_state_entry(PID).lowest_sequence == 2
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idem(4, txn=True), now_ms=NOW)
    assert log.append(idem(2, txn=True), now_ms=NOW).first_offset == 3
    assert log.append(idem(4, txn=True), now_ms=NOW).first_offset == 5
    log.start_transaction_verification(PID, 9, 0, False)
    log.start_transaction_verification(PID, 0, 1, False)   # a new epoch: its sequences start again
    assert log.producer_state.verification_state_entry(PID).lowest_sequence == 0


def test_tv2_marker_of_the_verified_epoch_keeps_the_verification(open_log):
    """A TV2 marker carries the epoch the next transaction is verified at: it ended the previous
    transaction and leaves the new verification in place; any other marker ends it."""
    log = open_log()
    log.append(idem(0, txn=True), now_ms=NOW)
    log.start_transaction_verification(PID, 0, 1, True)
    append_marker(log, True, producer_id=PID, producer_epoch=1, coordinator_epoch=0, transaction_version=2,
                  now_ms=NOW)
    assert log.producer_state.verification_state_entry(PID) is not None
    append_marker(log, False, producer_id=PID, producer_epoch=2, coordinator_epoch=0, transaction_version=2,
                  now_ms=NOW)
    assert log.producer_state.verification_state_entry(PID) is None


def test_verification_entries_expire_with_producer_id_expiration(open_log):
    log = open_log({"producer.id.expiration.ms": 1000})
    log.producer_state.maybe_create_verification_state_entry(PID, 0, 0, True, NOW)
    log.remove_expired_producers(now_ms=NOW + 999)
    assert log.producer_state.verification_state_entry(PID) is not None
    log.remove_expired_producers(now_ms=NOW + 1000)
    assert log.producer_state.verification_state_entry(PID) is None
