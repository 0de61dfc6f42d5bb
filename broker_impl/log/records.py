"""Kafka record batch format v2 (magic 2): header parsing, validation as Kafka does it, record
decoding and batch building.

Layout of a batch (all big-endian; byte positions)::

    0  baseOffset int64          <- patched by the broker (outside the CRC)
    8  batchLength int32         (bytes after this field)
    12 partitionLeaderEpoch int32 <- stamped by the leader (outside the CRC)
    16 magic int8
    17 crc uint32                CRC32C of bytes 21..end
    21 attributes int16          bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control
    23 lastOffsetDelta int32
    27 baseTimestamp int64
    35 maxTimestamp int64
    43 producerId int64
    51 producerEpoch int16
    53 baseSequence int32
    57 recordCount int32
    61 records...

Hot-path rule: parsing a Produce request's records costs one ``struct.unpack_from`` and one C
CRC32C per batch; the records inside are never walked there. Decoding records (internal topics,
ListOffsets by timestamp, tests, tools) is in ``decode_records``.
"""

from __future__ import annotations

import struct
from typing import Iterable, NamedTuple, Sequence

from crc32c import crc32c

from . import compression
from .errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidRequestRecordsError,
    InvalidTimestampError,
    LogError,
    MessageTooLargeError,
    UnsupportedCompressionTypeError,
)

# --- layout constants (Kafka's DefaultRecordBatch names) ---
BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
LOG_OVERHEAD = 12  # baseOffset + batchLength
RECORD_BATCH_OVERHEAD = 61  # the whole v2 header
LEGACY_RECORD_OVERHEAD_V0 = 14  # smallest size field Kafka's batch iterator accepts
CURRENT_MAGIC = 2

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
NO_PARTITION_LEADER_EPOCH = -1
INT32_MAX = 0x7FFFFFFF

_HEADER = struct.Struct(">qiibIhiqqqhii")
_LENGTH = struct.Struct(">i")
_PREFIX = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
_Q = struct.Struct(">q")


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: sequences wrap from Int32 max to 0."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    """Kafka's DefaultRecordBatch.decrementSequence (inverse of ``increment_sequence``)."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


class BatchHeader:
    """The 61-byte header of one v2 batch, plus where it sits in the buffer it came from.

    ``position`` is the batch's start in that buffer and ``size`` its total size (length + 12).
    """

    __slots__ = (
        "base_offset", "length", "partition_leader_epoch", "magic", "crc", "attributes",
        "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id",
        "producer_epoch", "base_sequence", "record_count", "position",
    )

    def __init__(self, fields: tuple, position: int = 0):
        (self.base_offset, self.length, self.partition_leader_epoch, self.magic, self.crc,
         self.attributes, self.last_offset_delta, self.base_timestamp, self.max_timestamp,
         self.producer_id, self.producer_epoch, self.base_sequence,
         self.record_count) = fields
        self.position = position

    @classmethod
    def unpack(cls, buf, position: int = 0) -> "BatchHeader":
        return cls(_HEADER.unpack_from(buf, position), position)

    # --- derived values ---
    @property
    def size(self) -> int:
        return self.length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    def __repr__(self) -> str:
        return (f"BatchHeader(base_offset={self.base_offset}, size={self.size}, "
                f"count={self.record_count}, last_offset_delta={self.last_offset_delta}, "
                f"attributes={self.attributes:#x}, pid={self.producer_id}, "
                f"epoch={self.producer_epoch}, seq={self.base_sequence}, "
                f"max_ts={self.max_timestamp})")


def compute_crc(batch) -> int:
    """CRC32C over attributes..end of one whole batch (bytes-like)."""
    mv = batch if isinstance(batch, memoryview) else memoryview(batch)
    return crc32c(mv[ATTRIBUTES_OFFSET:])


def iter_batch_headers(records, *, verify_crc: bool = True) -> list[BatchHeader]:
    """Split a records byte string into v2 batches, checking each as Kafka's batch iterator and
    ``DefaultRecordBatch.ensureValid`` do.

    A trailing fragment shorter than its declared size is ignored, as Kafka's
    ByteBufferLogInputStream does (the log then trims it). Magic 0/1 batches are returned as
    headers with ``magic`` < 2 and no other field filled in: callers refuse them.
    """
    mv = records if isinstance(records, memoryview) else memoryview(records)
    end = len(mv)
    pos = 0
    out = []
    unpack_length = _LENGTH.unpack_from
    while end - pos >= LOG_OVERHEAD:
        (length,) = unpack_length(mv, pos + LENGTH_OFFSET)
        if length < LEGACY_RECORD_OVERHEAD_V0:
            raise CorruptRecordError(
                f"Record size {length} is less than the minimum record overhead "
                f"({LEGACY_RECORD_OVERHEAD_V0})")
        if end - pos < MAGIC_OFFSET + 1:
            break
        magic = mv[pos + MAGIC_OFFSET]
        if magic > 127:
            magic -= 256
        if magic < 0 or magic > CURRENT_MAGIC:
            raise CorruptRecordError(f"Invalid magic found in record: {magic}")
        size = length + LOG_OVERHEAD
        if end - pos < size:
            break  # partial trailing batch: ignored like Kafka
        if magic != CURRENT_MAGIC:
            h = BatchHeader.__new__(BatchHeader)
            h.magic, h.length, h.position = magic, length, pos
            out.append(h)
            pos += size
            continue
        if size < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"Record batch is corrupt (the size {size} is smaller than the minimum "
                f"allowed overhead {RECORD_BATCH_OVERHEAD})")
        h = BatchHeader(_HEADER.unpack_from(mv, pos), pos)
        if verify_crc:
            computed = crc32c(mv[pos + ATTRIBUTES_OFFSET:pos + size])
            if computed != h.crc:
                raise CorruptRecordError(
                    f"Record is corrupt (stored crc = {h.crc}, computed crc = {computed})")
        out.append(h)
        pos += size
    return out


def validate_produce_records(records, api_version: int = 9, *,
                             max_message_bytes: int = 1048588) -> BatchHeader:
    """Validate the ``records`` of one partition of a Produce request (v3+) as Kafka does:
    ProduceRequest.validateRecords, then UnifiedLog.analyzeAndValidateRecords, then
    LogValidator.validateBatch for a client append. Returns the one batch's header.

    Raises INVALID_RECORD (no batch, more than one, magic < 2, non-zero base offset, bad
    count, control batch from a client, producer id without sequence),
    UNSUPPORTED_COMPRESSION_TYPE (zstd before v7), MESSAGE_TOO_LARGE, CORRUPT_MESSAGE.
    """
    headers = iter_batch_headers(records, verify_crc=False)
    if not headers:
        raise InvalidRequestRecordsError(
            f"Produce requests with version {api_version} must have at least one record "
            "batch per partition")
    first = headers[0]
    if first.magic != CURRENT_MAGIC:
        raise InvalidRequestRecordsError(
            f"Produce requests with version {api_version} are only allowed to contain "
            "record batches with magic version 2")
    if api_version < 7 and first.compression == compression.ZSTD:
        raise UnsupportedCompressionTypeError(
            f"Produce requests with version {api_version} are not allowed to use ZStandard "
            "compression")
    if len(headers) > 1:
        raise InvalidRequestRecordsError(
            f"Produce requests with version {api_version} are only allowed to contain "
            "exactly one record batch per partition")
    mv = records if isinstance(records, memoryview) else memoryview(records)
    validate_batch(first, mv, origin_client=True, max_message_bytes=max_message_bytes)
    return first


def validate_batch(h: BatchHeader, mv: memoryview, *, origin_client: bool,
                   max_message_bytes: int = 1048588, check_crc: bool = True) -> None:
    """Per-batch checks of UnifiedLog.analyzeAndValidateRecords and LogValidator.validateBatch.

    ``mv`` is the buffer the header was read from. ``check_crc`` is False when the caller
    already verified it (``iter_batch_headers(verify_crc=True)``).
    """
    if h.magic != CURRENT_MAGIC:
        raise InvalidRecordError(
            f"Batch magic {h.magic} is not supported: only magic 2 can be appended")
    if origin_client and h.base_offset != 0:
        raise InvalidRecordError(
            f"The baseOffset of the record batch in the append should be 0, but it is "
            f"{h.base_offset}")
    size = h.length + LOG_OVERHEAD
    if size > max_message_bytes:
        raise MessageTooLargeError(
            f"The record batch size in the append is {size} bytes which exceeds the maximum "
            f"configured value of {max_message_bytes}.")
    if check_crc:
        computed = crc32c(mv[h.position + ATTRIBUTES_OFFSET:h.position + size])
        if computed != h.crc:
            raise CorruptRecordError(f"Record is corrupt (stored crc = {h.crc}, computed crc = "
                                     f"{computed})")
    codec = h.attributes & COMPRESSION_CODEC_MASK
    if codec > compression.ZSTD:
        raise LogError(f"Unknown compression type id: {codec}")
    if origin_client:
        count_from_offsets = h.last_offset_delta + 1
        if count_from_offsets <= 0:
            raise InvalidRecordError(
                f"Batch has an invalid offset range: [{h.base_offset}, {h.last_offset}]")
        if h.record_count <= 0:
            raise InvalidRecordError(f"Invalid reported count for record batch: {h.record_count}")
        if count_from_offsets != h.record_count:
            raise InvalidRecordError(
                f"Inconsistent batch offset range [{h.base_offset}, {h.last_offset}] and count "
                f"of records {h.record_count}")
        if h.attributes & CONTROL_FLAG_MASK:
            raise InvalidRecordError("Clients are not allowed to write control records")
        if h.producer_id > NO_PRODUCER_ID and h.base_sequence < 0:
            raise InvalidRecordError(
                f"Invalid sequence number {h.base_sequence} in record batch with producerId "
                f"{h.producer_id}")


def check_timestamps(h: BatchHeader, now_ms: int, before_max_ms: int, after_max_ms: int) -> None:
    """LogValidator.validateTimestamp for CreateTime batches, at batch granularity: the
    maxTimestamp bounds every record from above; baseTimestamp (the first record's) stands for
    the lowest. Kafka checks each record; the broker never walks records on the hot path."""
    if h.attributes & TIMESTAMP_TYPE_MASK:
        return
    if h.max_timestamp != NO_TIMESTAMP and h.max_timestamp - now_ms > after_max_ms:
        raise InvalidTimestampError(
            f"Timestamp {h.max_timestamp} of message is out of range. The timestamp should be "
            f"within [{now_ms - before_max_ms}, {now_ms + after_max_ms}]")
    if h.base_timestamp != NO_TIMESTAMP and now_ms - h.base_timestamp > before_max_ms:
        raise InvalidTimestampError(
            f"Timestamp {h.base_timestamp} of message is out of range. The timestamp should be "
            f"within [{now_ms - before_max_ms}, {now_ms + after_max_ms}]")


def prefix_for(base_offset: int, length: int, partition_leader_epoch: int) -> bytes:
    """The 16 bytes the broker rewrites (baseOffset, batchLength, partitionLeaderEpoch): all
    outside the CRC, so the rest of the batch is stored exactly as sent."""
    return _PREFIX.pack(base_offset, length, partition_leader_epoch)


def assign_offsets(buf: bytearray, position: int, base_offset: int,
                   partition_leader_epoch: int | None = None) -> None:
    """Patch baseOffset (and optionally partitionLeaderEpoch) in place in a bytearray."""
    _Q.pack_into(buf, position + BASE_OFFSET_OFFSET, base_offset)
    if partition_leader_epoch is not None:
        struct.pack_into(">i", buf, position + PARTITION_LEADER_EPOCH_OFFSET,
                         partition_leader_epoch)


def set_log_append_time(batch: bytearray, timestamp_ms: int) -> None:
    """What Kafka's LogValidator does for message.timestamp.type=LogAppendTime: set the
    timestamp-type bit and maxTimestamp, then recompute the CRC (both are inside it)."""
    (attrs,) = struct.unpack_from(">h", batch, ATTRIBUTES_OFFSET)
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, attrs | TIMESTAMP_TYPE_MASK)
    _Q.pack_into(batch, MAX_TIMESTAMP_OFFSET, timestamp_ms)
    struct.pack_into(">I", batch, CRC_OFFSET, compute_crc(batch))


# ----------------------------------------------------------------------------------------------
# Records inside a batch (not on the hot path)
# ----------------------------------------------------------------------------------------------

class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple  # ((str, bytes | None), ...)
    attributes: int = 0


def _read_varint(buf, pos: int) -> tuple[int, int]:
    """Zigzag varint (up to 64 bits) at ``pos``; returns (value, new position)."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint is too long")
    return (result >> 1) ^ -(result & 1), pos


def _write_varint(value: int, out: bytearray) -> None:
    v = (value << 1) ^ (value >> 63)
    v &= 0xFFFFFFFFFFFFFFFF
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _read_nullable_bytes(buf, pos: int) -> tuple[bytes | None, int]:
    """A varint length then that many bytes; length -1 is null (key, value, header value)."""
    n, pos = _read_varint(buf, pos)
    if n < 0:
        return None, pos
    return buf[pos:pos + n], pos + n


def _write_nullable_bytes(value, out: bytearray) -> None:
    """Inverse of ``_read_nullable_bytes``."""
    if value is None:
        _write_varint(-1, out)
    else:
        _write_varint(len(value), out)
        out += value


def batch_records_payload(batch) -> bytes:
    """The uncompressed records section of one whole batch."""
    mv = batch if isinstance(batch, memoryview) else memoryview(batch)
    (attrs,) = struct.unpack_from(">h", mv, ATTRIBUTES_OFFSET)
    codec = attrs & COMPRESSION_CODEC_MASK
    body = mv[RECORD_BATCH_OVERHEAD:]
    if codec == compression.NONE:
        return bytes(body)
    return compression.decompress(codec, body)


def decode_records(batch) -> list[Record]:
    """Decode every record of one whole v2 batch (any codec). Offsets and timestamps are
    absolute; with LogAppendTime every record carries the batch's maxTimestamp, as Kafka's
    consumers see it."""
    mv = batch if isinstance(batch, memoryview) else memoryview(batch)
    h = BatchHeader.unpack(mv, 0)
    data = batch_records_payload(mv)
    log_append = bool(h.attributes & TIMESTAMP_TYPE_MASK)
    out = []
    pos = 0
    n = len(data)
    for _ in range(h.record_count):
        if pos >= n:
            raise CorruptRecordError(
                f"batch declares {h.record_count} records but holds only {len(out)}")
        length, pos = _read_varint(data, pos)
        end = pos + length
        if length < 0 or end > n:
            raise CorruptRecordError("record length exceeds the batch")
        attributes = data[pos]
        pos += 1
        ts_delta, pos = _read_varint(data, pos)
        off_delta, pos = _read_varint(data, pos)
        key, pos = _read_nullable_bytes(data, pos)
        value, pos = _read_nullable_bytes(data, pos)
        hcount, pos = _read_varint(data, pos)
        headers = []
        for _h in range(max(hcount, 0)):
            hklen, pos = _read_varint(data, pos)
            hkey = data[pos:pos + hklen].decode("utf-8")
            pos += hklen
            hval, pos = _read_nullable_bytes(data, pos)
            headers.append((hkey, hval))
        if pos != end:
            raise CorruptRecordError("record size does not match its length field")
        ts = h.max_timestamp if log_append else h.base_timestamp + ts_delta
        out.append(Record(h.base_offset + off_delta, ts, key, value, tuple(headers), attributes))
    if pos != n:
        raise InvalidRecordError("Incorrect declared batch size, records still remaining")
    return out


def record_keys_values(batch) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) of every record of one whole v2 batch, nothing else decoded: what a
    coordinator replaying its compacted-topic log needs (the last value per key), at a fraction
    of ``decode_records``'s cost."""
    mv = batch if isinstance(batch, memoryview) else memoryview(batch)
    h = BatchHeader.unpack(mv, 0)
    data = batch_records_payload(mv)
    out = []
    pos = 0
    n = len(data)
    for _ in range(h.record_count):
        length, pos = _read_varint(data, pos)
        end = pos + length
        if length < 0 or end > n:
            raise CorruptRecordError("record length exceeds the batch")
        _ts_delta, pos = _read_varint(data, pos + 1)   # after the attributes byte
        _off_delta, pos = _read_varint(data, pos)
        key, pos = _read_nullable_bytes(data, pos)
        value, _ = _read_nullable_bytes(data, pos)
        out.append((key, value))
        pos = end
    return out


def iter_log_batches(buf) -> Iterable[tuple[BatchHeader, memoryview]]:
    """(header, whole-batch view) for every complete v2 batch in ``buf`` (e.g. a fetch
    response's records, or bytes read from a segment). No CRC check."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    for h in iter_batch_headers(mv, verify_crc=False):
        yield h, mv[h.position:h.position + h.size]


# --- control records (transaction markers) ---

ABORT = 0
COMMIT = 1
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TXN_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch


class EndTransactionMarker(NamedTuple):
    control_type: int  # ABORT (0) or COMMIT (1)
    coordinator_epoch: int


def read_end_txn_marker(batch) -> EndTransactionMarker | None:
    """The COMMIT/ABORT marker of a control batch, or None for an empty control batch."""
    records = decode_records(batch)
    if not records:
        return None
    rec = records[0]
    if rec.key is None or len(rec.key) < 4:
        raise CorruptRecordError("control record key is too short")
    _version, ctype = _CONTROL_KEY.unpack_from(rec.key, 0)
    if ctype not in (ABORT, COMMIT):
        return None  # another control type (e.g. a KRaft record): not a transaction marker
    if rec.value is None or len(rec.value) < 6:
        raise CorruptRecordError("end transaction marker value is too short")
    _v, coordinator_epoch = _END_TXN_VALUE.unpack_from(rec.value, 0)
    return EndTransactionMarker(ctype, coordinator_epoch)


# --- building batches ---

def _encode_record(out: bytearray, offset_delta: int, timestamp_delta: int, key, value,
                   headers: Sequence) -> None:
    body = bytearray()
    body.append(0)  # record attributes: unused
    _write_varint(timestamp_delta, body)
    _write_varint(offset_delta, body)
    _write_nullable_bytes(key, body)
    _write_nullable_bytes(value, body)
    _write_varint(len(headers), body)
    for hk, hv in headers:
        hkb = hk.encode("utf-8") if isinstance(hk, str) else bytes(hk)
        _write_varint(len(hkb), body)
        body += hkb
        _write_nullable_bytes(hv, body)
    _write_varint(len(body), out)
    out += body


def build_batch(records: Sequence, *, base_offset: int = 0, base_timestamp: int | None = None,
                producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                base_sequence: int = NO_SEQUENCE, is_transactional: bool = False,
                is_control: bool = False, compression_codec: int = compression.NONE,
                timestamp_type: int = CREATE_TIME,
                partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """Build one v2 batch. ``records`` holds ``(key, value)``, ``(key, value, headers)`` or
    ``(key, value, headers, timestamp_ms)`` tuples (timestamp defaults to ``base_timestamp``,
    itself defaulting to 0) or ``Record`` objects (their offset is ignored: records get
    consecutive offset deltas)."""
    if not records:
        raise ValueError("a batch holds at least one record")
    norm = []
    for r in records:
        if isinstance(r, Record):
            norm.append((r.key, r.value, r.headers, r.timestamp))
            continue
        key, value = r[0], r[1]
        headers = r[2] if len(r) > 2 and r[2] is not None else ()
        ts = r[3] if len(r) > 3 else None
        norm.append((key, value, headers, ts))
    if base_timestamp is None:
        base_timestamp = next((ts for *_x, ts in norm if ts is not None), 0)
    body = bytearray()
    max_ts = NO_TIMESTAMP
    for i, (key, value, headers, ts) in enumerate(norm):
        ts = base_timestamp if ts is None else ts
        max_ts = max(max_ts, ts)
        _encode_record(body, i, ts - base_timestamp, key, value, headers)
    payload = compression.compress(compression_codec, bytes(body))
    attributes = compression_codec & COMPRESSION_CODEC_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    length = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(payload)
    buf = bytearray(_HEADER.pack(base_offset, length, partition_leader_epoch, CURRENT_MAGIC, 0,
                                 attributes, len(norm) - 1, base_timestamp, max_ts, producer_id,
                                 producer_epoch, base_sequence, len(norm)))
    buf += payload
    struct.pack_into(">I", buf, CRC_OFFSET, compute_crc(buf))
    return bytes(buf)


def build_control_batch(control_type: int, *, producer_id: int, producer_epoch: int,
                        coordinator_epoch: int, timestamp_ms: int, base_offset: int = 0,
                        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """A COMMIT/ABORT marker batch as Kafka's MemoryRecords.withEndTransactionMarker writes it:
    transactional + control attributes, no sequence, one record whose key is (version 0, type)
    and value (version 0, coordinator epoch)."""
    key = _CONTROL_KEY.pack(0, control_type)
    value = _END_TXN_VALUE.pack(0, coordinator_epoch)
    return build_batch([(key, value, (), timestamp_ms)], base_offset=base_offset,
                       base_timestamp=timestamp_ms, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE,
                       is_transactional=True, is_control=True,
                       partition_leader_epoch=partition_leader_epoch)


def transactional_batch_header(records):
    """The header of the records' first batch when it is transactional (None otherwise, or when
    it cannot be read: the log refuses that) -- Kafka's RequestUtils.hasTransactionalRecords and
    the KIP-890 verification's question."""
    if records is None or len(records) < RECORD_BATCH_OVERHEAD:
        return None
    try:
        h = BatchHeader.unpack(records, 0)
    except Exception:  # noqa: BLE001 - malformed batches are refused by the log
        return None
    return h if h.is_transactional and h.producer_id >= 0 else None
