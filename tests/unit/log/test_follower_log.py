"""The log as a replica uses it: copying the leader's batches (offsets and epochs kept), the
leader epoch cache and OffsetForLeaderEpoch answers, truncation (indexes, producer state,
aborted transactions), and an explicit high watermark."""

from __future__ import annotations

from log_helpers import NOW, append_marker, kp_batch

from broker_impl.log import records as rec
from broker_impl.log.leader_epoch import UNDEFINED_EPOCH, LeaderEpochFileCache
from broker_impl.log.partition_log import PartitionLog


def _leader(tmp_path, name="leader"):
    return PartitionLog(str(tmp_path / name), {}, now_ms=NOW)


def _copy(leader: PartitionLog, follower: PartitionLog) -> None:
    """What a follower's fetch does: read from its log end and append as follower."""
    while follower.log_end_offset < leader.log_end_offset:
        data = leader.read(follower.log_end_offset, 1 << 20)
        follower.append_as_follower(data.records, now_ms=NOW)


def test_follower_copies_offsets_epochs_and_producer_state(tmp_path):
    leader = _leader(tmp_path)
    leader.append(kp_batch(2), now_ms=NOW)
    leader.leader_epoch = 3
    leader.append(kp_batch(3, pid=7, epoch=0, seq=0, transactional=True), now_ms=NOW)
    append_marker(leader, False, producer_id=7, producer_epoch=0, coordinator_epoch=2, now_ms=NOW)
    follower = _leader(tmp_path, "follower")
    _copy(leader, follower)
    assert follower.log_end_offset == leader.log_end_offset == 6
    assert follower.leader_epoch_cache.entries() == [(0, 0), (3, 2)]
    assert follower.read(0, 1 << 20).records == leader.read(0, 1 << 20).records
    # the aborted transaction and the producer's state came along: read_committed is right there
    assert follower.aborted_transactions(0, 6) == [(7, 2)]
    entry = follower.producer_state.last_entry(7)
    assert (entry.producer_epoch, entry.coordinator_epoch, entry.last_seq) == (0, 2, 2)
    # a duplicate of the leader's batch is recognised on the copy as on the leader
    dup = follower.append(kp_batch(3, pid=7, epoch=0, seq=0, transactional=True), now_ms=NOW)
    assert dup.duplicate and dup.first_offset == 2


def test_one_append_of_several_producers_keeps_open_transactions_in_offset_order(tmp_path):
    """P's marker comes first in the copied batches, Q's transaction begins next, then P's
    second: the follower's LSO is Q's first offset, and it aborts to P's (the offset order
    Kafka's ongoingTxns TreeMap keeps), whatever order the producers were applied in."""
    leader = _leader(tmp_path)
    leader.append(kp_batch(1, pid=7, epoch=0, seq=0, transactional=True), now_ms=NOW)   # 0: P
    follower = _leader(tmp_path, "follower")
    _copy(leader, follower)
    append_marker(leader, True, producer_id=7, producer_epoch=0, coordinator_epoch=0, now_ms=NOW)  # 1
    leader.append(kp_batch(1, pid=8, epoch=0, seq=0, transactional=True), now_ms=NOW)   # 2: Q
    leader.append(kp_batch(1, pid=7, epoch=0, seq=1, transactional=True), now_ms=NOW)   # 3: P again
    follower.append_as_follower(leader.read(1, 1 << 20).records, now_ms=NOW)          # 1-3 in one go
    assert leader.last_stable_offset == follower.last_stable_offset == 2
    append_marker(leader, False, producer_id=8, producer_epoch=0, coordinator_epoch=0, now_ms=NOW)  # 4
    leader.append(kp_batch(1, pid=9, epoch=0, seq=0, transactional=True), now_ms=NOW)   # 5: R
    follower.append_as_follower(leader.read(4, 1 << 20).records, now_ms=NOW)
    assert leader.last_stable_offset == follower.last_stable_offset == 3
    # the aborted transaction's index entry names the LSO after it: P's open one at 3
    assert [t.last_stable_offset for t in follower.active_segment.txn_index.entries] == \
        [t.last_stable_offset for t in leader.active_segment.txn_index.entries] == [3]


def test_follower_refuses_batches_not_at_its_log_end(tmp_path):
    leader = _leader(tmp_path)
    leader.append(kp_batch(2), now_ms=NOW)
    leader.append(kp_batch(2), now_ms=NOW)
    follower = _leader(tmp_path, "follower")
    second = leader.read(2, 1 << 20).records
    try:
        follower.append_as_follower(second, now_ms=NOW)
    except Exception as exc:  # noqa: BLE001
        assert "expected 0" in str(exc)
    else:
        raise AssertionError("a gap was accepted")
    assert follower.log_end_offset == 0


def test_epoch_cache_answers_offset_for_leader_epoch(tmp_path):
    cache = LeaderEpochFileCache(str(tmp_path))
    cache.assign(0, 0)
    cache.assign(2, 10)
    cache.assign(2, 12)    # same epoch, later start: nothing
    cache.assign(5, 30)
    assert cache.end_offset_for(0, 40) == (0, 10)
    assert cache.end_offset_for(1, 40) == (0, 10)      # the largest epoch below, ending where 2 starts
    assert cache.end_offset_for(2, 40) == (2, 30)
    assert cache.end_offset_for(5, 40) == (5, 40)      # the latest epoch ends at the log end
    assert cache.end_offset_for(6, 40) == (UNDEFINED_EPOCH, -1)
    assert LeaderEpochFileCache(str(tmp_path)).entries() == [(0, 0), (2, 10), (5, 30)]   # durable
    cache.truncate_from_end(30)
    assert cache.entries() == [(0, 0), (2, 10)]


def test_truncate_drops_batches_txn_state_and_epochs(tmp_path):
    log = _leader(tmp_path)
    log.append(kp_batch(2), now_ms=NOW)                                          # 0-1
    log.leader_epoch = 1
    log.append(kp_batch(2, pid=9, epoch=0, seq=0, transactional=True), now_ms=NOW)   # 2-3, open txn
    append_marker(log, False, producer_id=9, producer_epoch=0, coordinator_epoch=0, now_ms=NOW)  # 4
    log.append(kp_batch(1), now_ms=NOW)                                          # 5
    log.update_high_watermark(6)
    assert log.aborted_transactions(0, 6) == [(9, 2)]
    assert log.truncate_to(4, now_ms=NOW) == 4
    # the marker is gone: the transaction is open again, the LSO is held at its first offset
    assert log.aborted_transactions(0, 4) == []
    assert log.producer_state.first_undecided_offset() == 2
    assert log.high_watermark == 4 and log.last_stable_offset == 2
    assert log.leader_epoch_cache.entries() == [(0, 0), (1, 2)]
    # the producer's next sequence continues from the state the truncation left
    info = log.append(kp_batch(1, pid=9, epoch=0, seq=2, transactional=True), now_ms=NOW)
    assert info.first_offset == 4
    log.close()
    again = PartitionLog(str(tmp_path / "leader"), {}, now_ms=NOW)
    assert again.log_end_offset == 5
    assert again.leader_epoch_cache.entries() == [(0, 0), (1, 2)]
    again.close()


def test_truncate_to_the_end_forgets_an_epoch_led_without_appending(tmp_path):
    """A replica led epoch 1 and wrote nothing in it (its cache says epoch 1 starts at 2); as a
    follower it is told epoch 0 ends at 2: nothing to cut, but epoch 1 must go (UnifiedLog.truncateTo),
    else every fetch names epoch 1 again -- and it must stay gone after a restart."""
    log = _leader(tmp_path)
    log.append(kp_batch(2), now_ms=NOW)                                          # 0-1, epoch 0
    log.leader_epoch_cache.assign(1, log.log_end_offset)                         # led epoch 1: nothing written
    assert log.leader_epoch_cache.entries() == [(0, 0), (1, 2)]
    assert log.truncate_to(2, now_ms=NOW) == 2 and log.log_end_offset == 2
    assert log.leader_epoch_cache.entries() == [(0, 0)]
    assert log.truncate_to(7, now_ms=NOW) == 2                                   # past the end: nothing
    log.close()
    again = PartitionLog(str(tmp_path / "leader"), {}, now_ms=NOW)
    assert again.leader_epoch_cache.entries() == [(0, 0)]
    again.close()


def test_truncate_inside_a_batch_drops_it_whole_and_segments_after(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), {"segment.bytes": "400"}, now_ms=NOW)
    for _ in range(6):
        log.append(kp_batch(3), now_ms=NOW)
    assert len(log.segments) > 2
    assert log.truncate_to(7, now_ms=NOW) == 6
    assert log.segments[-1].next_offset == 6
    assert [r.offset for r in rec.decode_records(log.read(3, 1 << 20).records)] == [3, 4, 5]
    log.append(kp_batch(1), now_ms=NOW)
    assert log.log_end_offset == 7


def test_truncate_fully_and_start_at(tmp_path):
    log = _leader(tmp_path)
    log.append(kp_batch(3), now_ms=NOW)
    log.truncate_fully_and_start_at(100, now_ms=NOW)
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert log.leader_epoch_cache.entries() == []
    assert log.append(kp_batch(1), now_ms=NOW).first_offset == 100


def test_high_watermark_bounds_reads_of_committed_data(tmp_path):
    log = _leader(tmp_path)
    log.append(kp_batch(3), now_ms=NOW)
    assert log.high_watermark == 3             # nobody replicates it: HW follows the log end
    log.update_high_watermark(1)
    log.append(kp_batch(3), now_ms=NOW)
    assert log.high_watermark == 1 and log.last_stable_offset == 1
    assert log.update_high_watermark(99) == 6  # never past the log end
