"""PartitionLog.maybe_increment_log_start_offset (DeleteRecords): the start inside a segment, the
segments below it, the checkpoint across restarts, and what it leaves alone -- producer state
(KAFKA-7190) and the last stable offset's floor."""

from __future__ import annotations

import pytest
from log_helpers import NOW, kp_batch

from broker_impl.log import EARLIEST_TIMESTAMP
from broker_impl.log.errors import OffsetOutOfRangeError, OutOfOrderSequenceError


def test_start_moves_inside_a_segment_and_reads_below_it_are_out_of_range(open_log):
    log = open_log()
    for _ in range(3):
        log.append(kp_batch(2), now_ms=NOW)
    assert log.maybe_increment_log_start_offset(3) is True
    assert log.log_start_offset == 3 and len(log.segments) == 1
    with pytest.raises(OffsetOutOfRangeError, match="range 3 to 6"):
        log.read(2, 1 << 20)
    r = log.read(3, 1 << 20)
    assert r.first_offset == 2   # the whole batch holding offset 3, as Kafka returns it
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == 3
    assert log.maybe_increment_log_start_offset(3) is False
    assert log.maybe_increment_log_start_offset(1) is False
    assert log.log_start_offset == 3


def test_start_above_the_high_watermark_is_refused(open_log):
    log = open_log()
    log.append(kp_batch(4), now_ms=NOW)
    log.update_high_watermark(2)
    with pytest.raises(OffsetOutOfRangeError, match="larger than the high watermark 2"):
        log.maybe_increment_log_start_offset(3)
    assert log.log_start_offset == 0
    assert log.maybe_increment_log_start_offset(2) is True


def test_segments_wholly_below_the_start_are_deleted_never_the_active_one(open_log, tmp_path):
    log = open_log()
    for _ in range(3):
        log.append(kp_batch(2), now_ms=NOW)
        log.roll(NOW)
    assert [s.base_offset for s in log.segments] == [0, 2, 4, 6]
    log.maybe_increment_log_start_offset(5)
    assert [s.base_offset for s in log.segments] == [4, 6]
    assert not (tmp_path / "t-0" / "00000000000000000000.log").exists()
    log.maybe_increment_log_start_offset(6)
    assert [s.base_offset for s in log.segments] == [6]
    assert log.log_start_offset == 6 == log.log_end_offset


@pytest.mark.parametrize("clean", [True, False])
def test_the_start_survives_a_restart(open_log, clean):
    log = open_log()
    log.append(kp_batch(5), now_ms=NOW)
    log.maybe_increment_log_start_offset(3)
    if clean:
        log.close()
    else:
        log.abandon()
    again = open_log()
    assert again.log_start_offset == 3 and again.log_end_offset == 5
    with pytest.raises(OffsetOutOfRangeError):
        again.read(0, 1 << 20)


def test_producer_state_outlives_the_records_kafka_7190(open_log):
    """Since 2.4 a producer whose records were all deleted keeps its sequence (KIP-360)."""
    log = open_log()
    log.append(kp_batch(2, pid=7, epoch=0, seq=0), now_ms=NOW)
    log.maybe_increment_log_start_offset(2)
    assert log.producer_state.last_entry(7).last_seq == 1
    info = log.append(kp_batch(1, pid=7, epoch=0, seq=2), now_ms=NOW)
    assert info.first_offset == 2
    with pytest.raises(OutOfOrderSequenceError):
        log.append(kp_batch(1, pid=7, epoch=0, seq=5), now_ms=NOW)


def test_the_last_stable_offset_never_falls_below_the_start(open_log):
    log = open_log()
    log.append(kp_batch(2, pid=9, epoch=0, seq=0, transactional=True), now_ms=NOW)
    log.append(kp_batch(2), now_ms=NOW)
    assert log.last_stable_offset == 0   # the open transaction at 0
    log.maybe_increment_log_start_offset(3)
    assert log.last_stable_offset == 3


def test_a_follower_starting_over_below_a_checkpointed_start_lowers_it(open_log):
    log = open_log()
    log.append(kp_batch(5), now_ms=NOW)
    log.maybe_increment_log_start_offset(4)
    log.truncate_fully_and_start_at(2)
    assert log.log_start_offset == 2
    log.close()
    assert open_log().log_start_offset == 2


def test_the_leader_epoch_cache_starts_at_the_new_start(open_log):
    log = open_log()
    for epoch in range(3):   # epochs 0, 1, 2 start at 0, 3, 6
        log.leader_epoch = epoch
        log.append(kp_batch(3), now_ms=NOW)
    assert log.leader_epoch_cache.entries() == [(0, 0), (1, 3), (2, 6)]
    log.maybe_increment_log_start_offset(4)
    assert log.leader_epoch_cache.entries() == [(1, 4), (2, 6)]
    log.maybe_increment_log_start_offset(6)
    assert log.leader_epoch_cache.entries() == [(2, 6)]
