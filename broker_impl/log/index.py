"""Per-segment indexes in Kafka's on-disk formats, mirrored in memory (arrays + bisect).

- ``OffsetIndex`` (``.index``): entries of (relative offset int32, position int32); the offset
  is the LAST offset of the batch(es) appended at that position, as LogSegment.append writes it.
  One entry every ``index.interval.bytes`` of log. Sparse: it bounds lookups and lets tools read
  the log like Kafka's; the segment's exact per-batch arrays serve the hot path.
- ``TimeIndex`` (``.timeindex``): entries of (timestamp int64, relative offset int32), appended
  with the offset index when the segment's max timestamp has grown; strictly increasing.
- ``TransactionIndex`` (``.txnindex``): aborted transactions whose ABORT marker is in this
  segment: (version int16 = 0, producerId int64, firstOffset int64, lastOffset int64,
  lastStableOffset int64). Created lazily: a missing file means no aborted transaction, as in
  Kafka.

Kafka preallocates index files and trims them at close; these files simply grow, which Kafka's
readers accept (the size stays a multiple of the entry size).
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from typing import NamedTuple

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_TXN_ENTRY = struct.Struct(">hqqqq")

OFFSET_ENTRY_SIZE = _OFFSET_ENTRY.size  # 8
TIME_ENTRY_SIZE = _TIME_ENTRY.size  # 12
TXN_ENTRY_SIZE = _TXN_ENTRY.size  # 34


class CorruptIndexError(Exception):
    """An index file failed its sanity check; the segment rebuilds it from the log."""


def _open_append(path: str) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)


class _IndexFile:
    """The file side shared by the three indexes: entries are appended with one ``os.write``
    on a lazily opened O_APPEND descriptor, fsynced on flush when written since the last one
    (a transaction log flushed at every append gets an index entry every few KiB), and cut
    back on truncation."""

    def __init__(self, path: str):
        self.path = path
        self._fd: int | None = None
        self._dirty = False

    def _write(self, entry: bytes) -> None:
        if self._fd is None:
            self._fd = _open_append(self.path)
        os.write(self._fd, entry)
        self._dirty = True

    def _read_entries(self, entry: struct.Struct):
        """The file's entries, unpacked; CorruptIndexError when the size is not a whole number of
        entries (Kafka's sanityCheck: the segment then rebuilds the index)."""
        with open(self.path, "rb") as f:
            data = f.read()
        if len(data) % entry.size:
            raise CorruptIndexError(
                f"{self.path}: size {len(data)} is not a multiple of {entry.size}")
        return entry.iter_unpack(data)

    def _empty_file(self) -> None:
        """Cut the file to nothing (creating it if missing), before a rebuild."""
        self.close()
        with open(self.path, "wb"):
            pass

    def _truncate_file(self, size: int) -> None:
        self.close()
        os.truncate(self.path, size)

    def flush(self) -> None:
        if self._dirty:
            os.fsync(self._fd)
            self._dirty = False

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._dirty = False


#: AbstractIndex.warmEntries: the entries in the index's last 8 KiB (an offset entry is 8 bytes),
#: searched first because lookups are nearly always near the end.
_WARM_ENTRIES = 8192 // 8


class OffsetIndex(_IndexFile):
    """Sparse map relative offset -> file position for one segment."""

    def __init__(self, path: str, base_offset: int):
        super().__init__(path)
        self.base_offset = base_offset
        self.offsets = array("q")  # absolute offsets
        self.positions = array("q")

    # --- loading / sanity ---
    def load(self, log_size: int) -> None:
        """Read the file; raise CorruptIndexError when it cannot be trusted (Kafka's
        OffsetIndex.sanityCheck plus: positions inside the log, offsets increasing)."""
        offsets = array("q")
        positions = array("q")
        last_off, last_pos = -1, -1
        for rel, pos in self._read_entries(_OFFSET_ENTRY):
            off = self.base_offset + rel
            if rel < 0 or off <= last_off or pos < last_pos or pos >= max(log_size, 1):
                raise CorruptIndexError(f"{self.path}: inconsistent entry ({off}, {pos})")
            offsets.append(off)
            positions.append(pos)
            last_off, last_pos = off, pos
        self.offsets, self.positions = offsets, positions

    def reset(self) -> None:
        """Empty the index (memory and file), before a rebuild."""
        self._empty_file()
        self.offsets = array("q")
        self.positions = array("q")

    # --- writing ---
    def append(self, offset: int, position: int) -> None:
        if self.offsets and offset <= self.offsets[-1]:
            return
        self._write(_OFFSET_ENTRY.pack(offset - self.base_offset, position))
        self.offsets.append(offset)
        self.positions.append(position)

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset >= ``offset`` (used when the log is truncated)."""
        n = bisect_left(self.offsets, offset)
        if n == len(self.offsets):
            return
        del self.offsets[n:]
        del self.positions[n:]
        self._truncate_file(n * OFFSET_ENTRY_SIZE)

    # --- reading ---
    def lookup(self, offset: int) -> tuple[int, int]:
        """Largest entry with offset <= ``offset`` as (offset, position); (base, 0) if none.
        The batch containing ``offset`` starts at or after that position."""
        i = bisect_right(self.offsets, offset)
        if i == 0:
            return self.base_offset, 0
        return self.offsets[i - 1], self.positions[i - 1]

    def fetch_upper_bound_offset(self, position: int) -> int | None:
        """Kafka's OffsetIndex.fetchUpperBoundOffset: the offset of an entry whose position is
        at or after ``position`` (where a fetch's bytes end), None when there is none. It bounds
        the aborted transactions a read_committed fetch lists, and Kafka documents it as "an
        offset surely past the fetched range, not generally the smallest one": its search
        (AbstractIndex.indexSlotRangeFor, SMALLEST_UPPER_BOUND) looks in the newest
        ``_WARM_ENTRIES`` entries first and, when its binary search narrows to one slot without
        comparing it, answers the NEXT slot even if that one matched exactly -- e.g. a fetch
        that ends exactly at the first entry gets the second. The same search here, so the
        aborted lists are Kafka's (measured: cases/txn/fetch_aborted_list_upper_bound)."""
        positions = self.positions
        n = len(positions)
        if n == 0:
            return None
        first_hot = max(0, n - 1 - _WARM_ENTRIES)
        if positions[first_hot] < position:
            lo, hi = first_hot, n - 1
        elif positions[0] > position:
            return self.offsets[0]
        else:
            lo, hi = 0, first_hot
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if positions[mid] > position:
                hi = mid - 1
            elif positions[mid] < position:
                lo = mid
            else:
                return self.offsets[mid]
        return None if lo == n - 1 else self.offsets[lo + 1]

    def __len__(self) -> int:
        return len(self.offsets)

    @property
    def size_bytes(self) -> int:
        return len(self.offsets) * OFFSET_ENTRY_SIZE


class TimeIndex(_IndexFile):
    """Sparse map timestamp -> offset for one segment, timestamps strictly increasing."""

    def __init__(self, path: str, base_offset: int):
        super().__init__(path)
        self.base_offset = base_offset
        self.timestamps = array("q")
        self.offsets = array("q")

    def load(self, next_offset: int | None = None) -> None:
        ts_arr, off_arr = array("q"), array("q")
        last_ts = -(1 << 63)
        last_off = -1
        for ts, rel in self._read_entries(_TIME_ENTRY):
            off = self.base_offset + rel
            if ts <= last_ts or off < last_off or rel < 0 or (
                    next_offset is not None and off >= next_offset):
                raise CorruptIndexError(f"{self.path}: inconsistent entry ({ts}, {off})")
            ts_arr.append(ts)
            off_arr.append(off)
            last_ts, last_off = ts, off
        self.timestamps, self.offsets = ts_arr, off_arr

    def reset(self) -> None:
        self._empty_file()
        self.timestamps = array("q")
        self.offsets = array("q")

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Append (timestamp, offset) if the timestamp is larger than the last entry's."""
        if self.timestamps and timestamp <= self.timestamps[-1]:
            return
        if timestamp < 0:
            return
        self._write(_TIME_ENTRY.pack(timestamp, offset - self.base_offset))
        self.timestamps.append(timestamp)
        self.offsets.append(offset)

    def truncate_to(self, offset: int) -> None:
        n = len(self.offsets)
        keep = n
        while keep > 0 and self.offsets[keep - 1] >= offset:
            keep -= 1
        if keep == n:
            return
        del self.timestamps[keep:]
        del self.offsets[keep:]
        self._truncate_file(keep * TIME_ENTRY_SIZE)

    def offset_before(self, timestamp: int) -> int:
        """Offset of the last entry whose timestamp is strictly below ``timestamp`` (every record
        up to that offset is older than ``timestamp``), or the base offset."""
        i = bisect_left(self.timestamps, timestamp)
        if i == 0:
            return self.base_offset
        return self.offsets[i - 1]

    def __len__(self) -> int:
        return len(self.timestamps)

    @property
    def size_bytes(self) -> int:
        return len(self.timestamps) * TIME_ENTRY_SIZE


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # offset of the ABORT marker
    last_stable_offset: int  # LSO right after the abort


class TransactionIndex(_IndexFile):
    """Aborted transactions whose ABORT marker lies in one segment."""

    def __init__(self, path: str):
        super().__init__(path)
        self.entries: list[AbortedTxn] = []

    def load(self) -> None:
        if not os.path.exists(self.path):
            self.entries = []
            return
        with open(self.path, "rb") as f:
            data = f.read()
        usable = len(data) - len(data) % TXN_ENTRY_SIZE
        entries = []
        for version, pid, first, last, lso in _TXN_ENTRY.iter_unpack(data[:usable]):
            if version != 0:
                raise CorruptIndexError(f"{self.path}: unknown aborted txn version {version}")
            entries.append(AbortedTxn(pid, first, last, lso))
        self.entries = entries
        if usable != len(data):  # torn last entry: drop it
            os.truncate(self.path, usable)

    def reset(self) -> None:
        self.close()
        self.entries = []
        if os.path.exists(self.path):
            os.unlink(self.path)

    def append(self, txn: AbortedTxn) -> None:
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            raise ValueError(f"aborted txn {txn} is not after {self.entries[-1]}")
        self._write(_TXN_ENTRY.pack(0, *txn))
        self.entries.append(txn)

    def truncate_to(self, offset: int) -> None:
        """Drop aborted txns whose marker offset >= ``offset``."""
        keep = [t for t in self.entries if t.last_offset < offset]
        if len(keep) == len(self.entries):
            return
        self.entries = keep
        self._truncate_file(len(keep) * TXN_ENTRY_SIZE)

    def collect_aborted_txns(self, fetch_offset: int,
                             upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Kafka's TransactionIndex.collectAbortedTxns: txns overlapping
        [fetch_offset, upper_bound_offset), and whether the search is complete (an entry whose
        LSO reaches the upper bound proves no later segment can add an overlapping txn)."""
        out = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return out, True
        return out, False

