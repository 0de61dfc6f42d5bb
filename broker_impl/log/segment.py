"""One log segment: ``<base offset:020d>.log`` plus its ``.index``, ``.timeindex`` and
``.txnindex`` (Kafka's LogSegment).

The segment keeps, in memory, one entry per batch: last offset, end position and max timestamp
(``array('q')``, 24 bytes a batch). A fetch is then two bisects and one ``os.pread``; an append
is one ``os.pwritev`` and three array appends. The arrays of a segment that has only been opened
(not written) are built on first use by walking the batch headers, so a clean restart reads
nothing but the active segment's headers.
"""

from __future__ import annotations

import os
from array import array
from bisect import bisect_left, bisect_right
from typing import Callable, Iterator

from crc32c import crc32c

from . import records as rec
from .errors import KafkaStorageError
from .index import CorruptIndexError, OffsetIndex, TimeIndex, TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"

_SCAN_CHUNK = 1 << 20
_MIN_BATCH = rec.RECORD_BATCH_OVERHEAD


def filename_prefix(offset: int) -> str:
    """Kafka names every per-offset file by the offset zero-padded to 20 digits."""
    return f"{offset:020d}"


def offsets_of_files(directory: str, suffix: str) -> list[int]:
    """The offsets named by the ``<offset><suffix>`` files in ``directory``, ascending (segments
    by ``.log``, producer snapshots by ``.snapshot``); other names are ignored, as Kafka's
    loader skips files it does not recognise."""
    offsets = []
    for name in os.listdir(directory):
        if name.endswith(suffix):
            stem = name[:-len(suffix)]
            if stem.isdigit():
                offsets.append(int(stem))
    offsets.sort()
    return offsets


class LogSegment:
    def __init__(self, directory: str, base_offset: int, *, index_interval_bytes: int = 4096,
                 created_ms: int = 0):
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        prefix = os.path.join(directory, filename_prefix(base_offset))
        self.log_path = prefix + LOG_SUFFIX
        self.offset_index = OffsetIndex(prefix + INDEX_SUFFIX, base_offset)
        self.time_index = TimeIndex(prefix + TIME_INDEX_SUFFIX, base_offset)
        self.txn_index = TransactionIndex(prefix + TXN_INDEX_SUFFIX)
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self._fd).st_size
        if self.size == 0:  # a new segment: empty index files, as Kafka creates them
            for path in (self.offset_index.path, self.time_index.path):
                if not os.path.exists(path):
                    open(path, "ab").close()
        self._loaded = False
        self._reset_arrays()
        self.unflushed = False

    # ------------------------------------------------------------------ opening / loading
    def open_indexes(self) -> bool:
        """Load the index files; False when any is missing or inconsistent (caller rebuilds)."""
        ok = True
        try:
            if not os.path.exists(self.offset_index.path):
                raise CorruptIndexError("missing offset index")
            self.offset_index.load(self.size)
            if not os.path.exists(self.time_index.path):
                raise CorruptIndexError("missing time index")
            self.time_index.load()
        except (CorruptIndexError, OSError):
            ok = False
        try:
            self.txn_index.load()
        except (CorruptIndexError, OSError):
            self.txn_index.reset()
            ok = False
        return ok

    def ensure_loaded(self) -> None:
        """Build the per-batch arrays from the batch headers (trusted data: no CRC check)."""
        if self._loaded:
            return
        self._reset_arrays()
        for _h, _b in self._walk(verify_crc=False, index=False):
            pass
        self._loaded = True

    def rebuild_indexes(self) -> None:
        """Rewrite .index and .timeindex from the log (trusted data)."""
        self.offset_index.reset()
        self.time_index.reset()
        self._reset_arrays()
        for _h, _b in self._walk(verify_crc=False, index=True):
            pass
        self._loaded = True

    def recover(self, on_batch: Callable[[rec.BatchHeader, memoryview], None] | None = None
                ) -> int:
        """Kafka's LogSegment.recover: validate every batch (size, magic, offsets increasing,
        CRC), rebuild the offset and time indexes, empty the txn index (the caller refills it
        through ``on_batch``), and truncate the file after the last valid batch.

        Returns the number of bytes truncated (0 when the segment was intact)."""
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self._reset_arrays()
        valid_end = 0
        for h, body in self._walk(verify_crc=True, index=True):
            if on_batch is not None:
                on_batch(h, body)
            valid_end = h.position + h.size
        self._loaded = True
        truncated = self.size - valid_end
        if truncated:
            os.ftruncate(self._fd, valid_end)
            self.size = valid_end
            os.fsync(self._fd)
        return truncated

    def _reset_arrays(self) -> None:
        self._last_offsets = array("q")
        self._ends = array("q")
        self._max_ts = array("q")
        self.max_timestamp_so_far = rec.NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        self._bytes_since_index = 0

    def _walk(self, *, verify_crc: bool, index: bool,
              ) -> Iterator[tuple[rec.BatchHeader, memoryview | None]]:
        """Walk the batches from position 0, recording them in the arrays (and the indexes if
        ``index``); stop at the first batch that is torn or invalid. Yields each batch's header
        and, when ``verify_crc``, a view of its bytes."""
        fd = self._fd
        file_size = self.size
        pos = 0
        buf = b""
        mv = memoryview(buf)
        buf_start = 0
        min_offset = self.base_offset
        while pos + _MIN_BATCH <= file_size:
            rel = pos - buf_start
            if rel + _MIN_BATCH > len(buf):
                buf = os.pread(fd, _SCAN_CHUNK, pos)
                mv = memoryview(buf)
                buf_start, rel = pos, 0
                if len(buf) < _MIN_BATCH:
                    break
            h = rec.BatchHeader.unpack(mv, rel)
            size = h.length + rec.LOG_OVERHEAD
            if (size < _MIN_BATCH or pos + size > file_size or h.magic != rec.CURRENT_MAGIC
                    or h.base_offset < min_offset or h.last_offset_delta < 0):
                break
            h.position = pos
            body = None
            if verify_crc:
                if rel + size <= len(buf):
                    body = mv[rel:rel + size]
                else:
                    body = memoryview(os.pread(fd, size, pos))
                    if len(body) != size:
                        break
                if crc32c(body[rec.ATTRIBUTES_OFFSET:]) != h.crc:
                    break
            last = h.base_offset + h.last_offset_delta
            self._record_batch(last, pos, size, h.max_timestamp, index)
            min_offset = last + 1
            yield h, body
            pos += size

    # ------------------------------------------------------------------ appending
    def _record_batch(self, last_offset: int, position: int, size: int, max_ts: int,
                      index: bool) -> None:
        self._last_offsets.append(last_offset)
        self._ends.append(position + size)
        self._max_ts.append(max_ts)
        if max_ts > self.max_timestamp_so_far:
            self.max_timestamp_so_far = max_ts
            self.offset_of_max_timestamp = last_offset
        if index:
            # LogSegment.append: index the position of this append once more than
            # index.interval.bytes were written since the previous entry.
            if self._bytes_since_index > self.index_interval_bytes:
                self.offset_index.append(last_offset, position)
                self.time_index.maybe_append(self.max_timestamp_so_far,
                                             self.offset_of_max_timestamp)
                self._bytes_since_index = 0
            self._bytes_since_index += size

    def append(self, buffers: list, size: int, last_offset: int, max_timestamp: int) -> int:
        """Write one batch (given as buffers: the rewritten prefix and the rest as sent) at the
        end of the file; returns its position. The bytes reach the page cache before return."""
        if not self._loaded:
            self.ensure_loaded()
        pos = self.size
        try:
            written = os.pwritev(self._fd, buffers, pos)
            while written < size:  # short write: finish it
                data = b"".join(bytes(b) for b in buffers)
                n = os.pwrite(self._fd, data[written:], pos + written)
                if n <= 0:
                    raise OSError("short write")
                written += n
        except OSError as e:
            try:
                os.ftruncate(self._fd, pos)
            except OSError:
                pass
            raise KafkaStorageError(f"append to {self.log_path} failed: {e}") from e
        self.size = pos + size
        self.unflushed = True
        self._record_batch(last_offset, pos, size, max_timestamp, True)
        return pos

    def truncate_to(self, offset: int) -> int:
        """Kafka's LogSegment.truncateTo: drop every batch whose last offset is >= ``offset``
        (the batch holding ``offset`` goes whole), with their index entries and the aborted
        transactions they end. Returns the number of bytes dropped."""
        self.ensure_loaded()
        i = bisect_left(self._last_offsets, offset)
        if i == len(self._last_offsets):
            return 0
        base = self._batch_base(i)
        pos = self.batch_position(i)
        self.offset_index.truncate_to(self._last_offsets[i])
        self.time_index.truncate_to(base)
        self.txn_index.truncate_to(base)
        dropped = self.size - pos
        os.ftruncate(self._fd, pos)
        self.size = pos
        del self._last_offsets[i:]
        del self._ends[i:]
        del self._max_ts[i:]
        self.max_timestamp_so_far = rec.NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        for j, ts in enumerate(self._max_ts):
            if ts > self.max_timestamp_so_far:
                self.max_timestamp_so_far = ts
                self.offset_of_max_timestamp = self._last_offsets[j]
        self._bytes_since_index = 0
        self.unflushed = True
        return dropped

    def on_become_inactive(self) -> None:
        """At roll, Kafka makes sure the time index ends with the segment's max timestamp."""
        if self.max_timestamp_so_far >= 0:
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp)

    # ------------------------------------------------------------------ reading
    @property
    def batch_count(self) -> int:
        self.ensure_loaded()
        return len(self._last_offsets)

    @property
    def next_offset(self) -> int:
        """Offset after the last batch of this segment (its base offset when empty)."""
        self.ensure_loaded()
        return self._last_offsets[-1] + 1 if self._last_offsets else self.base_offset

    @property
    def largest_timestamp(self) -> int:
        self.ensure_loaded()
        return self.max_timestamp_so_far

    @property
    def rolling_based_timestamp(self) -> int:
        """Max timestamp of the first batch (Kafka rolls by time relative to it)."""
        self.ensure_loaded()
        return self._max_ts[0] if self._max_ts else rec.NO_TIMESTAMP

    def read(self, fetch_offset: int, max_bytes: int, max_offset: int | None,
             min_one_batch: bool) -> tuple[bytes, int, int, int | None] | None:
        """Whole batches from the one containing ``fetch_offset``: at most ``max_bytes`` unless
        the first batch alone is larger and ``min_one_batch`` (KIP-74), and only batches below
        ``max_offset``. Returns (bytes, first batch base offset, next offset after the data,
        upper bound for aborted transactions from the offset index or None), or None when this
        segment holds no offset >= fetch_offset.

        The upper bound is Kafka's (LocalLog.addAbortedTransactions ->
        LogSegment.fetchUpperBoundOffset): Kafka's read is a byte slice of
        min(max position - start, max_bytes, or the first batch's size if larger) from the
        fetched batch's position -- the max position being where the batch holding
        ``max_offset`` starts -- and the bound is the first offset index entry at or after the
        slice's end. This log returns whole batches only, but bounds the aborts the same way."""
        self.ensure_loaded()
        last_offsets = self._last_offsets
        ends = self._ends
        n = len(last_offsets)
        i = bisect_left(last_offsets, fetch_offset)
        if i == n:
            return None
        start = ends[i - 1] if i else 0
        hi = n
        if max_offset is not None:
            hi = bisect_left(last_offsets, max_offset, i, n)
            if hi == i:
                return b"", fetch_offset, fetch_offset, None
        k = bisect_right(ends, start + max_bytes, i, hi)
        if k == i:
            if not min_one_batch:
                return b"", fetch_offset, fetch_offset, None
            k = i + 1
        end = ends[k - 1]
        data = os.pread(self._fd, end - start, start)
        base = self._batch_base(i)
        slice_size = min(ends[hi - 1] - start,
                         max(max_bytes, ends[i] - start) if min_one_batch else max_bytes)
        upper = self.offset_index.fetch_upper_bound_offset(start + slice_size)
        return data, base, last_offsets[k - 1] + 1, upper

    def _batch_base(self, i: int) -> int:
        # This log never compacts, so offsets are contiguous: batch i starts right after batch
        # i-1, and the first batch at the segment's base offset.
        return self._last_offsets[i - 1] + 1 if i else self.base_offset

    def batch_position(self, i: int) -> int:
        return self._ends[i - 1] if i else 0

    def read_header(self, i: int) -> rec.BatchHeader:
        pos = self.batch_position(i)
        return rec.BatchHeader.unpack(os.pread(self._fd, rec.RECORD_BATCH_OVERHEAD, pos), 0)

    def read_batch(self, i: int) -> bytes:
        pos = self.batch_position(i)
        return os.pread(self._fd, self._ends[i] - pos, pos)

    def batch_index_for(self, offset: int) -> int:
        """Index of the first batch whose last offset >= ``offset`` (== batch_count if none)."""
        self.ensure_loaded()
        return bisect_left(self._last_offsets, offset)

    def iter_batches(self, from_offset: int) -> Iterator[tuple[rec.BatchHeader, bytes]]:
        """(header, whole batch bytes) from the batch containing ``from_offset`` on."""
        self.ensure_loaded()
        i = bisect_left(self._last_offsets, from_offset)
        n = len(self._last_offsets)
        while i < n:
            start = self.batch_position(i)
            j = max(bisect_right(self._ends, start + _SCAN_CHUNK * 4, i, n), i + 1)
            chunk = memoryview(os.pread(self._fd, self._ends[j - 1] - start, start))
            pos = 0
            while pos < len(chunk):
                h = rec.BatchHeader.unpack(chunk, pos)
                size = h.length + rec.LOG_OVERHEAD
                h.position = start + pos
                yield h, chunk[pos:pos + size]
                pos += size
            i = j

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int
                                 ) -> tuple[int, int, int] | None:
        """Kafka's LogSegment.findOffsetByTimestamp: the first record with timestamp >=
        ``timestamp`` and offset >= ``starting_offset`` as (offset, timestamp, leader epoch)."""
        self.ensure_loaded()
        if self.max_timestamp_so_far < timestamp:
            return None
        start_offset = max(self.time_index.offset_before(timestamp), starting_offset)
        i = bisect_left(self._last_offsets, start_offset)
        max_ts = self._max_ts
        for j in range(i, len(max_ts)):
            if max_ts[j] >= timestamp:
                batch = self.read_batch(j)
                h = rec.BatchHeader.unpack(batch, 0)
                for r in rec.decode_records(batch):
                    if r.timestamp >= timestamp and r.offset >= starting_offset:
                        return r.offset, r.timestamp, h.partition_leader_epoch
        return None

    def max_timestamp_record(self) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) of the first record carrying this segment's
        largest timestamp (ListOffsets MAX_TIMESTAMP, KIP-734)."""
        self.ensure_loaded()
        if self.max_timestamp_so_far < 0:
            return None
        j = self._max_ts.index(self.max_timestamp_so_far)
        batch = self.read_batch(j)
        h = rec.BatchHeader.unpack(batch, 0)
        for r in rec.decode_records(batch):
            if r.timestamp == self.max_timestamp_so_far:
                return r.offset, r.timestamp, h.partition_leader_epoch
        return h.last_offset, h.max_timestamp, h.partition_leader_epoch

    # ------------------------------------------------------------------ durability / lifecycle
    def flush(self) -> None:
        os.fsync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()
        self.unflushed = False

    def close(self) -> None:
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self.close()
        for path in (self.log_path, self.offset_index.path, self.time_index.path,
                     self.txn_index.path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size})"
