"""PartitionLog: offsets, reads, segments and indexes, ListOffsets, flush, recovery."""

from __future__ import annotations

import os
import struct

import pytest
from log_helpers import NOW, kp_batch

from broker_impl.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from broker_impl.log import records as rec
from broker_impl.log.errors import (
    CorruptRecordError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from broker_impl.log.index import OFFSET_ENTRY_SIZE, TIME_ENTRY_SIZE


def batches_in(data: bytes) -> list[rec.BatchHeader]:
    return rec.iter_batch_headers(data, verify_crc=True)


def test_offsets_are_consecutive_and_bytes_stored_as_sent(open_log):
    log = open_log()
    sent = [kp_batch(3), kp_batch(1), kp_batch(5)]
    infos = [log.append(b, now_ms=NOW) for b in sent]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(0, 2), (3, 3), (4, 8)]
    assert infos[0].log_append_time == -1 and infos[0].log_start_offset == 0
    assert log.log_end_offset == log.high_watermark == log.last_stable_offset == 9
    stored = log.read(0, 1 << 20).records
    assert len(stored) == sum(len(b) for b in sent)
    pos = 0
    for b, base in zip(sent, (0, 3, 4)):
        got = stored[pos:pos + len(b)]
        assert struct.unpack_from(">q", got, 0)[0] == base
        assert struct.unpack_from(">i", got, 12)[0] == 0  # leader epoch stamped
        assert got[16:] == b[16:]  # everything after the rewritten prefix as sent
        pos += len(b)


def test_file_is_written_before_append_returns(open_log, tmp_path):
    log = open_log()
    data = kp_batch(2)
    log.append(data, now_ms=NOW)
    with open(tmp_path / "t-0" / "00000000000000000000.log", "rb") as f:
        assert f.read()[16:] == data[16:]


def test_read_returns_whole_batch_containing_offset(open_log):
    log = open_log()
    for _ in range(4):
        log.append(kp_batch(10), now_ms=NOW)
    r = log.read(15, 1)  # mid-batch, tiny max_bytes: still one whole batch (KIP-74)
    hs = batches_in(r.records)
    assert [(h.base_offset, h.last_offset) for h in hs] == [(10, 19)]
    assert (r.first_offset, r.next_offset) == (10, 20)


def test_read_max_bytes_cuts_at_batch_boundary(open_log):
    log = open_log()
    size = len(kp_batch(10))
    for _ in range(4):
        log.append(kp_batch(10), now_ms=NOW)
    r = log.read(0, size * 2 + size // 2)
    assert [h.base_offset for h in batches_in(r.records)] == [0, 10]
    assert len(log.read(0, size * 4).records) == 4 * size
    assert log.read(0, 1, min_one_batch=False).records == b""


def test_read_stops_at_max_offset_and_at_log_end(open_log):
    log = open_log()
    for _ in range(3):
        log.append(kp_batch(10), now_ms=NOW)
    r = log.read(0, 1 << 20, max_offset=20)
    assert [h.base_offset for h in batches_in(r.records)] == [0, 10]
    assert log.read(20, 1 << 20, max_offset=20).records == b""
    assert log.read(30, 1 << 20).records == b""  # fetch at LEO: empty, no error


def test_read_out_of_range(open_log):
    log = open_log()
    log.append(kp_batch(2), now_ms=NOW)
    with pytest.raises(OffsetOutOfRangeError) as ei:
        log.read(3, 100)
    assert ei.value.error == 1


def test_segments_roll_at_segment_bytes_and_reads_span_them(open_log, tmp_path):
    batch = kp_batch(5, value=b"x" * 200)
    log = open_log({"log.segment.bytes": len(batch) * 3, "index.interval.bytes": 1})
    for _ in range(10):
        log.append(batch, now_ms=NOW)
    assert [s.base_offset for s in log.segments] == [0, 15, 30, 45]
    names = sorted(os.listdir(tmp_path / "t-0"))
    for base in (0, 15, 30, 45):
        assert f"{base:020d}.log" in names and f"{base:020d}.index" in names
        assert f"{base:020d}.timeindex" in names
    assert "00000000000000000015.snapshot" in names or "00000000000000000045.snapshot" in names
    off, seen = 0, []
    while off < log.log_end_offset:
        r = log.read(off, 1 << 20)
        seen += [h.base_offset for h in batches_in(r.records)]
        off = r.next_offset
    assert seen == list(range(0, 50, 5))


def test_record_list_larger_than_segment_is_refused(open_log):
    batch = kp_batch(5, value=b"x" * 200)
    log = open_log({"segment.bytes": len(batch) - 1})
    with pytest.raises(RecordListTooLargeError) as ei:
        log.append(batch, now_ms=NOW)
    assert ei.value.error == 18
    assert log.log_end_offset == 0


def test_roll_by_time_uses_batch_timestamps(open_log):
    log = open_log({"log.roll.ms": 1000})
    log.append(kp_batch(1, ts=NOW), now_ms=NOW)
    log.append(kp_batch(1, ts=NOW + 500), now_ms=NOW)
    assert len(log.segments) == 1
    log.append(kp_batch(1, ts=NOW + 1500), now_ms=NOW)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_offset_index_written_every_interval_and_lookup(open_log, tmp_path):
    batch = kp_batch(4, value=b"y" * 300)
    log = open_log({"log.index.interval.bytes": 4096})
    for _ in range(40):
        log.append(batch, now_ms=NOW)
    idx = log.segments[0].offset_index
    assert len(idx) > 0
    path = tmp_path / "t-0" / "00000000000000000000.index"
    raw = path.read_bytes()
    assert len(raw) == len(idx) * OFFSET_ENTRY_SIZE
    entries = list(struct.iter_unpack(">ii", raw))
    # every entry points at the batch whose LAST offset it names
    data = log.read(0, 1 << 24).records
    for rel, pos in entries:
        h = rec.BatchHeader.unpack(data, pos)
        assert h.last_offset == rel
    gaps = [b[1] - a[1] for a, b in zip(entries, entries[1:])]
    assert all(g > 4096 for g in gaps)
    off, pos = idx.lookup(entries[2][0] + 1)
    assert (off, pos) == (entries[2][0], entries[2][1])
    timeindex = (tmp_path / "t-0" / "00000000000000000000.timeindex").read_bytes()
    assert len(timeindex) % TIME_ENTRY_SIZE == 0 and len(timeindex) > 0


def test_offset_for_timestamp_and_special_timestamps(open_log):
    log = open_log({"segment.bytes": 600})
    for i in range(10):
        log.append(kp_batch(3, ts=NOW + 100 * i), now_ms=NOW)
    assert len(log.segments) > 2
    r = log.offset_for_timestamp(NOW + 101)  # batch 1 holds NOW+100..102
    assert (r.offset, r.timestamp) == (4, NOW + 101)
    r = log.offset_for_timestamp(NOW + 450)  # first record >= : batch 5's first
    assert (r.offset, r.timestamp) == (15, NOW + 500)
    assert log.offset_for_timestamp(NOW + 10_000) is None
    assert log.offset_for_timestamp(NOW + 450, max_offset=15) is None
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == 0
    assert log.offset_for_timestamp(LATEST_TIMESTAMP).offset == 30
    r = log.offset_for_timestamp(MAX_TIMESTAMP)
    assert (r.offset, r.timestamp) == (29, NOW + 902)


def test_log_append_time_topic(open_log):
    log = open_log({"message.timestamp.type": "LogAppendTime"})
    info = log.append(kp_batch(3, ts=1), now_ms=NOW + 5)
    assert info.log_append_time == NOW + 5
    (h,) = batches_in(log.read(0, 1 << 20).records)  # CRC recomputed
    assert h.timestamp_type == rec.LOG_APPEND_TIME and h.max_timestamp == NOW + 5
    assert log.offset_for_timestamp(NOW).offset == 0


def test_flush_interval_messages_fsyncs(open_log):
    log = open_log({"log.flush.interval.messages": 5})
    log.append(kp_batch(3), now_ms=NOW)
    assert log.segments[-1].unflushed
    log.append(kp_batch(3), now_ms=NOW)
    assert not log.segments[-1].unflushed


def test_flush_interval_ms(open_log):
    log = open_log({"log.flush.interval.ms": 1000})
    log.append(kp_batch(1), now_ms=NOW)
    assert log.segments[-1].unflushed
    assert log.maybe_flush(now_ms=NOW + 2000)
    assert not log.segments[-1].unflushed


def test_retention_bytes_deletes_oldest_segments(open_log):
    batch = kp_batch(5, value=b"x" * 200)
    log = open_log({"segment.bytes": len(batch) * 2, "retention.bytes": len(batch) * 3})
    for _ in range(8):
        log.append(batch, now_ms=NOW)
    assert log.delete_old_segments(now_ms=NOW) > 0
    assert log.log_start_offset > 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)


# ---------------------------------------------------------------------------- recovery

def _seg_path(tmp_path, base=0):
    return tmp_path / "t-0" / f"{base:020d}.log"


def test_clean_shutdown_marker_skips_recovery(open_log, tmp_path):
    log = open_log()
    for _ in range(3):
        log.append(kp_batch(2), now_ms=NOW)
    log.close()
    assert (tmp_path / "t-0" / ".kafka_cleanshutdown").exists()
    log = open_log()
    assert log.was_clean_shutdown and log.log_end_offset == 6
    assert not (tmp_path / "t-0" / ".kafka_cleanshutdown").exists()  # next crash is detected


def test_recovery_truncates_torn_tail(open_log, tmp_path):
    log = open_log()
    for _ in range(3):
        log.append(kp_batch(4), now_ms=NOW)
    log.abandon()  # crash
    path = _seg_path(tmp_path)
    size = path.stat().st_size
    os.truncate(path, size - 7)  # last batch torn
    log = open_log()
    assert not log.was_clean_shutdown
    assert log.log_end_offset == 8
    assert log.recovered_bytes_truncated == size // 3 - 7
    assert [h.base_offset for h in batches_in(log.read(0, 1 << 20).records)] == [0, 4]
    assert log.append(kp_batch(1), now_ms=NOW).first_offset == 8


def test_recovery_drops_garbage_appended_after_last_batch(open_log, tmp_path):
    log = open_log()
    for _ in range(2):
        log.append(kp_batch(2), now_ms=NOW)
    log.abandon()
    with open(_seg_path(tmp_path), "ab") as f:
        f.write(os.urandom(100))
    log = open_log()
    assert log.log_end_offset == 4 and log.recovered_bytes_truncated == 100


def test_recovery_truncates_at_batch_with_bad_crc(open_log, tmp_path):
    log = open_log()
    for _ in range(3):
        log.append(kp_batch(2), now_ms=NOW)
    log.abandon()
    path = _seg_path(tmp_path)
    data = bytearray(path.read_bytes())
    one = len(data) // 3
    data[one + 70] ^= 0xFF  # inside batch 2's records
    path.write_bytes(bytes(data))
    log = open_log()
    assert log.log_end_offset == 2
    with pytest.raises(CorruptRecordError):
        rec.iter_batch_headers(bytes(data))
    assert batches_in(log.read(0, 1 << 20).records)[0].last_offset == 1


def three_segment_log(open_log):
    """Six 5-record batches, two to a segment: segments at 0, 10 and 20, left open for the test
    to crash. Returns (log, batch, config) so the test can reopen it alike."""
    batch = kp_batch(5, value=b"x" * 200)
    cfg = {"segment.bytes": len(batch) * 2}
    log = open_log(cfg)
    for _ in range(6):
        log.append(batch, now_ms=NOW)
    return log, batch, cfg


def test_recovery_after_roll_scans_only_segments_since_last_snapshot(open_log, tmp_path):
    log, batch, cfg = three_segment_log(open_log)
    assert [s.base_offset for s in log.segments] == [0, 10, 20]
    log.abandon()  # crash; the roll to 20 fsynced segment 10 and wrote 20.snapshot
    os.truncate(_seg_path(tmp_path, 20), len(batch) + 3)  # active segment torn
    seg0 = bytearray(_seg_path(tmp_path, 0).read_bytes())
    seg0[100] ^= 0xFF  # damage inside a flushed segment: not rescanned, as in Kafka
    _seg_path(tmp_path, 0).write_bytes(bytes(seg0))
    log = open_log(cfg)
    assert log.log_end_offset == 25 and log.recovered_bytes_truncated == 3
    assert len(log.read(0, 1 << 20).records) == 2 * len(batch)  # segment 0 was trusted
    assert log.append(batch, now_ms=NOW).first_offset == 25


def test_recovery_truncation_in_middle_segment_drops_later_segments(open_log, tmp_path):
    log, batch, cfg = three_segment_log(open_log)
    log.abandon()
    for name in os.listdir(tmp_path / "t-0"):  # no snapshot: every segment is recovered
        if name.endswith(".snapshot"):
            os.unlink(tmp_path / "t-0" / name)
    os.truncate(_seg_path(tmp_path, 10), len(batch) + 3)
    log = open_log(cfg)
    assert log.log_end_offset == 15
    assert [s.base_offset for s in log.segments] == [0, 10]
    assert not _seg_path(tmp_path, 20).exists()


def test_missing_or_corrupt_indexes_are_rebuilt(open_log, tmp_path):
    batch = kp_batch(4, value=b"y" * 300)
    cfg = {"segment.bytes": len(batch) * 20, "index.interval.bytes": 1000}
    log = open_log(cfg)
    for _ in range(50):
        log.append(batch, now_ms=NOW)
    first_index = bytes(log.segments[0].offset_index.offsets)
    log.close()
    d = tmp_path / "t-0"
    (d / "00000000000000000000.index").unlink()
    with open(d / "00000000000000000080.timeindex", "ab") as f:
        f.write(b"\x01\x02\x03")  # size no longer a multiple of 12
    log = open_log(cfg)
    assert bytes(log.segments[0].offset_index.offsets) == first_index
    assert (d / "00000000000000000000.index").exists()
    assert len((d / "00000000000000000080.timeindex").read_bytes()) % TIME_ENTRY_SIZE == 0
    assert log.log_end_offset == 200
