"""Record batch v2: validation as Kafka does it, codecs, building, control records."""

from __future__ import annotations

import struct

import pytest
from kafka.record.default_records import DefaultRecordBatch
from log_helpers import NOW, kp_batch

from broker_impl.log import compression
from broker_impl.log import records as rec
from broker_impl.log.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
    UnsupportedCompressionTypeError,
)


def test_kafka_python_batch_is_accepted_and_header_parsed():
    data = kp_batch(5, pid=42, epoch=3, seq=10, transactional=True)
    h = rec.validate_produce_records(data, 9)
    assert (h.base_offset, h.magic, h.record_count, h.last_offset_delta) == (0, 2, 5, 4)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (42, 3, 10, 14)
    assert h.is_transactional and not h.is_control
    assert h.compression == compression.NONE and h.timestamp_type == rec.CREATE_TIME
    assert (h.base_timestamp, h.max_timestamp) == (NOW, NOW + 4)
    assert h.size == len(data)


def test_flipped_byte_inside_crc_range_is_corrupt_message():
    data = bytearray(kp_batch(3))
    data[-5] ^= 0x01
    with pytest.raises(CorruptRecordError) as ei:
        rec.validate_produce_records(bytes(data), 9)
    assert ei.value.error == 2


def test_flipped_byte_in_header_attributes_is_corrupt_message():
    data = bytearray(kp_batch(3))
    data[rec.ATTRIBUTES_OFFSET + 1] ^= 0x10  # transactional bit, covered by the CRC
    with pytest.raises(CorruptRecordError):
        rec.validate_produce_records(bytes(data), 9)


def test_truncated_batch_is_dropped_like_kafka_and_leaves_no_batch():
    data = kp_batch(3)
    # Kafka's batch iterator ignores a partial trailing batch: no batch -> INVALID_RECORD
    with pytest.raises(InvalidRecordError) as ei:
        rec.validate_produce_records(data[:-1], 9)
    assert ei.value.error == 87
    assert rec.iter_batch_headers(data + data[:30]) and len(rec.iter_batch_headers(
        data + data[:30])) == 1


def test_size_field_below_minimum_is_corrupt():
    data = bytearray(kp_batch(1))
    struct.pack_into(">i", data, 8, 10)
    with pytest.raises(CorruptRecordError):
        rec.iter_batch_headers(bytes(data))


def test_v2_batch_shorter_than_header_is_corrupt():
    data = bytearray(kp_batch(1))
    struct.pack_into(">i", data, 8, 30)
    with pytest.raises(CorruptRecordError):
        rec.validate_produce_records(bytes(data[:42]), 9)


def test_invalid_magic_is_corrupt_and_old_magic_is_invalid_record():
    data = bytearray(kp_batch(1))
    data[rec.MAGIC_OFFSET] = 7
    with pytest.raises(CorruptRecordError):
        rec.iter_batch_headers(bytes(data))
    data[rec.MAGIC_OFFSET] = 1
    with pytest.raises(InvalidRecordError, match="magic version 2"):
        rec.validate_produce_records(bytes(data), 9)


def test_more_than_one_batch_is_invalid_record():
    data = kp_batch(1)
    with pytest.raises(InvalidRecordError, match="exactly one record batch"):
        rec.validate_produce_records(data + data, 9)


def test_zstd_before_produce_v7_is_unsupported_compression_type():
    data = kp_batch(2, codec=compression.ZSTD)
    with pytest.raises(UnsupportedCompressionTypeError) as ei:
        rec.validate_produce_records(data, 6)
    assert ei.value.error == 76
    assert rec.validate_produce_records(data, 7).compression == compression.ZSTD


def _recrc(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, rec.CRC_OFFSET, rec.compute_crc(buf))
    return bytes(buf)


def test_nonzero_base_offset_from_client_is_invalid_record():
    data = bytearray(kp_batch(2))
    struct.pack_into(">q", data, 0, 5)
    with pytest.raises(InvalidRecordError, match="baseOffset"):
        rec.validate_produce_records(bytes(data), 9)


def test_count_inconsistent_with_offset_delta_is_invalid_record():
    data = bytearray(kp_batch(3))
    struct.pack_into(">i", data, 57, 4)  # recordCount
    with pytest.raises(InvalidRecordError, match="Inconsistent"):
        rec.validate_produce_records(_recrc(data), 9)
    data = bytearray(kp_batch(3))
    struct.pack_into(">i", data, 57, 0)
    with pytest.raises(InvalidRecordError):
        rec.validate_produce_records(_recrc(data), 9)


def test_control_batch_from_client_is_invalid_record():
    data = rec.build_control_batch(rec.COMMIT, producer_id=1, producer_epoch=0,
                                   coordinator_epoch=0, timestamp_ms=NOW)
    with pytest.raises(InvalidRecordError, match="control"):
        rec.validate_produce_records(data, 9)


def test_producer_id_without_sequence_is_invalid_record():
    data = rec.build_batch([(b"k", b"v")], producer_id=5, producer_epoch=0, base_sequence=-1)
    with pytest.raises(InvalidRecordError, match="sequence"):
        rec.validate_produce_records(data, 9)


def test_batch_over_max_message_bytes_is_message_too_large():
    data = kp_batch(3, value=b"x" * 1000)
    with pytest.raises(MessageTooLargeError) as ei:
        rec.validate_produce_records(data, 9, max_message_bytes=len(data) - 1)
    assert ei.value.error == 10


def test_timestamp_bounds():
    h = rec.BatchHeader.unpack(kp_batch(1, ts=NOW + 7_200_000))
    with pytest.raises(InvalidTimestampError):
        rec.check_timestamps(h, NOW, 2**63 - 1, 3_600_000)
    rec.check_timestamps(h, NOW + 7_000_000, 2**63 - 1, 3_600_000)


@pytest.mark.parametrize("codec", [compression.NONE, compression.GZIP, compression.SNAPPY,
                                   compression.LZ4, compression.ZSTD])
def test_every_codec_decodes_kafka_python_batches(codec):
    data = kp_batch(50, codec=codec, value=b"value-" * 30)
    h = rec.validate_produce_records(data, 9)
    assert h.compression == codec
    records = rec.decode_records(data)
    assert [r.offset for r in records] == list(range(50))
    assert records[7].key == b"k7" and records[7].value == b"value-" * 30
    assert records[7].timestamp == NOW + 7 and records[7].headers == (("h", b"x"),)


@pytest.mark.parametrize("codec", [compression.NONE, compression.GZIP, compression.SNAPPY,
                                   compression.LZ4, compression.ZSTD])
def test_built_batches_are_read_by_kafka_python(codec):
    data = rec.build_batch([(b"a", b"1", [("h", b"v")], NOW), (None, b"2", (), NOW + 5),
                            (b"c", None)], compression_codec=codec, base_offset=10,
                           producer_id=9, producer_epoch=1, base_sequence=4,
                           is_transactional=True)
    kb = DefaultRecordBatch(bytearray(data))
    assert kb.validate_crc()
    assert (kb.base_offset, kb.producer_id, kb.producer_epoch, kb.base_sequence) == (10, 9, 1, 4)
    assert kb.is_transactional
    got = [(r.offset, r.key, r.value, r.timestamp, list(r.headers)) for r in kb]
    assert got == [(10, b"a", b"1", NOW, [("h", b"v")]), (11, None, b"2", NOW + 5, []),
                   (12, b"c", None, NOW, [])]


def test_xerial_and_raw_snappy_both_decode():
    payload = b"abc" * 50_000  # several xerial blocks
    framed = compression.compress(compression.SNAPPY, payload)
    assert framed.startswith(b"\x82SNAPPY\x00")
    assert compression.decompress(compression.SNAPPY, framed) == payload
    import cramjam
    raw = bytes(cramjam.snappy.compress_raw(payload))
    assert compression.decompress(compression.SNAPPY, raw) == payload


def test_control_batch_roundtrip_with_kafka_python():
    data = rec.build_control_batch(rec.ABORT, producer_id=77, producer_epoch=4,
                                   coordinator_epoch=9, timestamp_ms=NOW)
    h = rec.BatchHeader.unpack(data)
    assert h.is_control and h.is_transactional and h.base_sequence == -1
    assert rec.read_end_txn_marker(data) == rec.EndTransactionMarker(rec.ABORT, 9)
    kb = DefaultRecordBatch(bytearray(data))
    assert kb.is_control_batch
    (r,) = list(kb)
    assert r.abort and r.type == rec.ABORT


def test_assign_offsets_and_log_append_time_keep_batch_valid():
    buf = bytearray(kp_batch(4))
    rec.assign_offsets(buf, 0, 1000, 3)
    h = rec.iter_batch_headers(bytes(buf))[0]  # CRC still valid: patched bytes are outside it
    assert (h.base_offset, h.partition_leader_epoch, h.last_offset) == (1000, 3, 1003)
    rec.set_log_append_time(buf, NOW + 99)
    h = rec.iter_batch_headers(bytes(buf))[0]
    assert h.timestamp_type == rec.LOG_APPEND_TIME and h.max_timestamp == NOW + 99
    assert all(r.timestamp == NOW + 99 for r in rec.decode_records(bytes(buf)))


def test_sequence_wraps_at_int32_max():
    assert rec.increment_sequence(rec.INT32_MAX, 1) == 0
    assert rec.increment_sequence(rec.INT32_MAX - 1, 3) == 1
    assert rec.decrement_sequence(1, 3) == rec.INT32_MAX - 1
    data = rec.build_batch([(b"k", b"v")] * 3, producer_id=1, producer_epoch=0,
                           base_sequence=rec.INT32_MAX - 1)
    assert rec.BatchHeader.unpack(data).last_sequence == 0  # MAX-1, MAX, 0


@pytest.mark.parametrize("codec", [compression.NONE, compression.GZIP])
def test_record_keys_values_reads_what_decode_records_reads(codec):
    batch = rec.build_batch([(b"k1", b"v1", [("h", b"x")]), (None, b"v2"), (b"k3", None), (b"k1", b"v4")],
                            compression_codec=codec)
    assert rec.record_keys_values(batch) == [(r.key, r.value) for r in rec.decode_records(batch)] == [
        (b"k1", b"v1"), (None, b"v2"), (b"k3", None), (b"k1", b"v4")]
