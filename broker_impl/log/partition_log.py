"""PartitionLog: the log of one topic-partition directory ``<data-dir>/<topic>-<partition>/``
(Kafka's UnifiedLog + LocalLog + LogLoader, no tiered storage): one replica's local log. A
leader appends to it (``append``), a follower copies its leader's batches into it
(``append_as_follower``, ``truncate_to``). Which replica leads, the ISR, and the high watermark
they advance (``update_high_watermark``) are decided in cluster/partition.py.

Appended to by the partition as leader (cluster/partition, for every append the replica
manager makes) and by the replica fetcher as follower; read by Fetch, ListOffsets and the
coordinators' loads -- all from one trio thread: no locking, synchronous file I/O that only
reaches the page cache (fsync follows Kafka's flush settings). Every batch with a producer id
goes through one producer-state step, ProducerStateManager.update_producers, whether a leader
appends it, a follower copies it or a recovery replays it (Kafka's UnifiedLog.updateProducers).

Hot paths:
- ``append``: one header unpack and one CRC32C per batch, producer-state checks, one
  ``os.pwritev`` of (16 rewritten bytes + the batch as sent). Never walks records.
- ``read``: two bisects on per-batch arrays and one ``os.pread``.

Durability model (as Kafka's): data reaches the OS before ``append`` returns; fsync happens every
``log.flush.interval.messages`` / ``log.flush.interval.ms`` (default never), at segment roll and
at close. After an unclean stop, opening the log recovers the segments written since the last
roll (validating every batch, truncating a torn or corrupt tail) and rebuilds producer state
from the newest snapshot plus the batches after it.
"""

from __future__ import annotations

import os
import time
from bisect import bisect_right
from typing import Any, Mapping, NamedTuple

from ..cluster.durable_file import replace_durably
from . import records as rec
from .config import LogConfig
from .errors import OffsetOutOfRangeError, RecordListTooLargeError, UnexpectedAppendOffsetError
from .index import AbortedTxn
from .leader_epoch import LeaderEpochFileCache
from .producer_state import AppendOrigin, CompletedTxn, ProducerStateManager
from .segment import LOG_SUFFIX, LogSegment, offsets_of_files

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
#: The log start offset when DeleteRecords moved it inside a segment (Kafka keeps one
#: log-start-offset-checkpoint per log directory; each PartitionLog owns its own directory, so the
#: offset lives beside its segments). Absent: the log starts at its first segment.
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"

# ListOffsets special timestamps (ListOffsetsRequest)
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3

_INT32_MAX = 0x7FFFFFFF


def _now_ms() -> int:
    return int(time.time() * 1000)


class LogAppendInfo(NamedTuple):
    """What a Produce response needs for one partition."""

    first_offset: int  # base offset of the (first) batch: ProduceResponse base_offset
    last_offset: int
    log_append_time: int  # -1 for CreateTime (and the original batch's for a duplicate)
    log_start_offset: int
    record_count: int
    duplicate: bool = False  # idempotent retry answered from the producer's last 5 batches


class FetchDataInfo(NamedTuple):
    records: bytes  # whole batches, possibly empty
    first_offset: int  # base offset of the first batch returned (== fetch offset if empty)
    next_offset: int  # offset after the last batch returned
    #: upper bound for the aborted transactions of a read_committed fetch, as Kafka's
    #: LocalLog.addAbortedTransactions finds it: the segment's offset index entry at or after
    #: the end of the read, else the next segment's base offset, else the log end offset
    aborted_upper_bound: int


class TimestampAndOffset(NamedTuple):
    timestamp: int
    offset: int
    leader_epoch: int  # -1 if unknown


def partition_dir(data_dir: str, topic: str, partition: int) -> str:
    return os.path.join(data_dir, f"{topic}-{partition}")


class PartitionLog:
    """Append-only log of one partition with its producer state and transaction index."""

    def __init__(self, directory: str, config: Mapping[str, Any] | LogConfig | None = None, *,
                 leader_epoch: int = 0, now_ms: int | None = None):
        self.directory = directory
        self.config = config if isinstance(config, LogConfig) else LogConfig.from_dict(config)
        self.leader_epoch = leader_epoch
        os.makedirs(directory, exist_ok=True)
        self.producer_state = ProducerStateManager(directory,
                                                   self.config.producer_id_expiration_ms)
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._leo = 0
        #: The log start offset as DeleteRecords (or a leader's, on a follower) set it; the first
        #: segment's base offset when that is higher (log_start_offset takes the larger).
        self._start = self._read_start_checkpoint()
        self._unflushed_messages = 0
        self._last_flush_ms = _now_ms() if now_ms is None else now_ms
        self.recovered_bytes_truncated = 0  # what the last open cut off (for tests and logs)
        self.was_clean_shutdown = False
        self._closed = False
        #: None: the high watermark is the log end offset (a log nobody replicates); a number
        #: once a replicated partition sets it (cluster.partition.Partition).
        self._hw: int | None = None
        self.leader_epoch_cache = LeaderEpochFileCache(directory)
        self._load(_now_ms() if now_ms is None else now_ms)
        self.leader_epoch_cache.truncate_from_end(self._leo)

    @classmethod
    def open(cls, data_dir: str, topic: str, partition: int,
             config: Mapping[str, Any] | LogConfig | None = None, **kw) -> "PartitionLog":
        return cls(partition_dir(data_dir, topic, partition), config, **kw)

    # ================================================================== offsets
    @property
    def log_start_offset(self) -> int:
        """The first offset a fetch may ask for: the first segment's base offset, or higher when
        DeleteRecords moved it inside that segment (maybe_increment_log_start_offset)."""
        base = self._bases[0]
        return base if self._start <= base else self._start

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """UnifiedLog.maybeIncrementLogStartOffset: DeleteRecords on a leader (up to its high
        watermark, OFFSET_OUT_OF_RANGE above it), or a follower following its leader's log start.
        The offset is checkpointed at once; whole segments below it are deleted (never the active
        one). Producer state is kept -- Kafka has kept a producer's state after its records are
        gone since 2.4 (KAFKA-7190, KIP-360): it expires with producer.id.expiration.ms only, so
        an idempotent producer whose records were all deleted continues its sequence. The last
        stable offset never falls below the new start. True when the start moved."""
        if offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset to {offset} of partition "
                f"{os.path.basename(self.directory)} since it is larger than the high watermark "
                f"{self.high_watermark}")
        if offset <= self.log_start_offset:
            return False
        self._start = offset
        self._write_start_checkpoint()
        while len(self.segments) > 1 and self._bases[1] <= offset:
            self.segments.pop(0).delete()
            self._bases.pop(0)
        self.leader_epoch_cache.truncate_from_start(offset)
        return True

    def _read_start_checkpoint(self) -> int:
        try:
            with open(os.path.join(self.directory, LOG_START_OFFSET_FILE), encoding="ascii") as f:
                return int(f.read().strip() or 0)
        except (FileNotFoundError, ValueError):
            return 0

    def _write_start_checkpoint(self) -> None:
        replace_durably(os.path.join(self.directory, LOG_START_OFFSET_FILE), f"{self._start}\n")

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def high_watermark(self) -> int:
        """The offset below which every record is committed (replicated to the ISR). A log no
        one replicates has every appended batch committed: HW == LEO."""
        return self._leo if self._hw is None else self._hw

    def update_high_watermark(self, hw: int) -> int:
        """Set the high watermark (kept within [log start, log end]); from now on it no longer
        follows the log end offset. Returns the value set."""
        self._hw = max(self.log_start_offset, min(hw, self._leo))
        return self._hw

    @property
    def first_unstable_offset(self) -> int | None:
        return self.producer_state.first_undecided_offset()

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        return self.producer_state.has_ongoing_transaction(producer_id, producer_epoch)

    def start_transaction_verification(self, producer_id: int, sequence: int, producer_epoch: int,
                                       supports_epoch_bump: bool) -> None:
        """UnifiedLog.maybeStartTransactionVerification for a batch that is its producer's first
        in the transaction here: the verification entry whose lowest sequence the append checks."""
        self.producer_state.maybe_create_verification_state_entry(producer_id, sequence, producer_epoch,
                                                                  supports_epoch_bump, _now_ms())

    @property
    def last_stable_offset(self) -> int:
        """LSO: first offset of the oldest open transaction, else the high watermark."""
        first = self.producer_state.first_undecided_offset()
        hw = self.high_watermark
        if first is None or first > hw:
            return hw
        start = self.log_start_offset   # a transaction whose start was deleted: Kafka's LSO >= log start
        return start if first < start else first

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # ================================================================== append
    def append(self, records, *, origin: AppendOrigin = AppendOrigin.CLIENT,
               api_version: int = 9, transaction_version: int = 0,
               now_ms: int | None = None) -> LogAppendInfo:
        """Validate and append the ``records`` of one partition of a Produce request (or a
        coordinator's write) and return its offsets.

        CLIENT origin applies Kafka's ProduceRequest rules (exactly one magic-2 batch, base
        offset 0, count consistent, no control batch...) and the idempotent/transactional
        checks, answering a duplicate with the original offsets. COORDINATOR origin accepts
        several batches and control batches and checks only producer epochs.
        ``transaction_version`` (from WriteTxnMarkers v2+) selects the marker epoch rule.
        Raises a ``LogError`` (a KafkaError: its class's error code); nothing is written then.
        """
        now = _now_ms() if now_ms is None else now_ms
        cfg = self.config
        mv = records if isinstance(records, memoryview) else memoryview(records)
        if origin is AppendOrigin.CLIENT:
            headers = [rec.validate_produce_records(mv, api_version,
                                                    max_message_bytes=cfg.max_message_bytes)]
        else:
            headers = rec.iter_batch_headers(mv, verify_crc=True)
            if not headers:
                raise rec.InvalidRecordError("no record batch to append")
            for h in headers:
                rec.validate_batch(h, mv, origin_client=False,
                                   max_message_bytes=cfg.max_message_bytes, check_crc=False)
        log_append = cfg.log_append_time
        total = 0
        max_ts = rec.NO_TIMESTAMP
        for h in headers:
            if not log_append and origin is not AppendOrigin.REPLICATION:
                rec.check_timestamps(h, now, cfg.message_timestamp_before_max_ms,
                                     cfg.message_timestamp_after_max_ms)
            total += h.length + rec.LOG_OVERHEAD
            if h.max_timestamp > max_ts:
                max_ts = h.max_timestamp
        if total > cfg.segment_bytes:
            raise RecordListTooLargeError(
                f"Message batch size is {total} bytes in append to partition "
                f"{os.path.basename(self.directory)}, which exceeds the maximum configured "
                f"segment size of {cfg.segment_bytes}.")
        if log_append:
            max_ts = now

        # --- producer state: validate everything before writing anything ---
        ps = self.producer_state
        updated: dict = {}
        completed: list[CompletedTxn] = []
        offset = self._leo
        first_offset = offset
        count = 0
        for h in headers:
            last = offset + h.last_offset_delta
            if h.producer_id > rec.NO_PRODUCER_ID:
                if origin is AppendOrigin.CLIENT:
                    entry = ps.producers.get(h.producer_id)
                    if entry is not None:
                        dup = entry.find_duplicate_batch(h.producer_epoch, h.base_sequence,
                                                         h.last_sequence)
                        if dup is not None:
                            return LogAppendInfo(dup.first_offset, dup.last_offset,
                                                 dup.timestamp, self.log_start_offset,
                                                 h.record_count, True)
                c = ps.update_producers(updated, h, mv[h.position:h.position + h.size], origin, offset, last,
                                        max_ts if log_append else h.max_timestamp, transaction_version)
                if c is not None:
                    completed.append(c)
            offset = last + 1
            count += h.record_count

        # --- write ---
        segment = self._maybe_roll(total, max_ts, now, offset - 1)
        epoch = self.leader_epoch
        base = first_offset
        for h in headers:
            size = h.length + rec.LOG_OVERHEAD
            if log_append:
                batch = bytearray(mv[h.position:h.position + size])
                rec.assign_offsets(batch, 0, base, epoch)
                rec.set_log_append_time(batch, now)
                bufs = [batch]
                batch_ts = now
            else:
                bufs = [rec.prefix_for(base, h.length, epoch),
                        mv[h.position + 16:h.position + size]]
                batch_ts = h.max_timestamp
            segment.append(bufs, size, base + h.last_offset_delta, batch_ts)
            base += h.last_offset_delta + 1
        self._leo = offset
        if epoch != self.leader_epoch_cache.latest_epoch:
            self.leader_epoch_cache.assign(epoch, first_offset)

        self._commit_append(segment, updated, completed, count, now)
        return LogAppendInfo(first_offset, offset - 1, now if log_append else rec.NO_TIMESTAMP,
                             self.log_start_offset, count)

    def append_as_follower(self, records, now_ms: int | None = None) -> LogAppendInfo:
        """Copy batches fetched from the leader exactly as they are -- offsets and leader epochs
        were set by the leader (UnifiedLog.appendAsFollower). Only the CRC is checked; producer
        state and the aborted-transaction index follow the batches with no validation
        (AppendOrigin.REPLICATION), so a follower that becomes leader dedups, fences and
        answers read_committed exactly as the old leader did. The epoch cache learns every
        new leader epoch from the batches."""
        now = _now_ms() if now_ms is None else now_ms
        mv = records if isinstance(records, memoryview) else memoryview(records)
        headers = rec.iter_batch_headers(mv, verify_crc=True)
        if not headers:
            return LogAppendInfo(self._leo, self._leo - 1, rec.NO_TIMESTAMP, self.log_start_offset, 0)
        expected = self._leo
        total = 0
        max_ts = rec.NO_TIMESTAMP
        for h in headers:
            if h.base_offset != expected:
                raise UnexpectedAppendOffsetError(
                    f"a batch at offset {h.base_offset} of {os.path.basename(self.directory)}, expected "
                    f"{expected} (the log end offset)")
            expected = h.last_offset + 1
            total += h.size
            max_ts = max(max_ts, h.max_timestamp)
        ps = self.producer_state
        updated: dict = {}
        completed: list[CompletedTxn] = []
        count = 0
        for h in headers:
            count += h.record_count
            if h.producer_id <= rec.NO_PRODUCER_ID:
                continue
            c = ps.update_producers(updated, h, mv[h.position:h.position + h.size], AppendOrigin.REPLICATION,
                                    h.base_offset, h.last_offset, h.max_timestamp)
            if c is not None:
                completed.append(c)
        segment = self._maybe_roll(total, max_ts, now, expected - 1)
        cache = self.leader_epoch_cache
        for h in headers:
            segment.append([mv[h.position:h.position + h.size]], h.size, h.last_offset, h.max_timestamp)
            if h.partition_leader_epoch != cache.latest_epoch:
                cache.assign(h.partition_leader_epoch, h.base_offset)
        first = self._leo
        self._leo = expected
        self._commit_append(segment, updated, completed, count, now)
        return LogAppendInfo(first, expected - 1, rec.NO_TIMESTAMP, self.log_start_offset, count)

    def _commit_append(self, segment: LogSegment, updated: dict, completed: list[CompletedTxn], count: int,
                       now: int) -> None:
        """After the batches of an append are written (and the log end moved): the producer
        state they validated, the transactions they completed, the flush policy."""
        ps = self.producer_state
        for info in updated.values():
            ps.update(info)
        ps.update_map_end_offset(self._leo)
        for c in completed:
            self._complete_txn(segment, c, write_index=True)
        self._unflushed_messages += count
        if (self._unflushed_messages >= self.config.flush_messages
                or now - self._last_flush_ms >= self.config.flush_ms):
            self.flush(now)

    def truncate_to(self, offset: int, now_ms: int | None = None) -> int:
        """Drop everything at and after ``offset`` (UnifiedLog.truncateTo): a follower cuts what
        the leader never had. The batch holding ``offset`` goes whole; producer state is reloaded
        from the newest snapshot below the new end and the batches after it; the epoch cache and
        the high watermark follow. Returns the new log end offset.

        At or past the end nothing is cut, but the epoch cache still drops the epochs that
        start at the end (UnifiedLog.truncateTo does the same): a replica that led an epoch
        without appending to it holds an entry the new leader never had, and its every fetch
        would name that epoch and be told to truncate again, for ever -- never back in the ISR."""
        if offset >= self._leo:
            self.leader_epoch_cache.truncate_from_end(self._leo)
            return self._leo
        if offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset, now_ms)
            return self._leo
        now = _now_ms() if now_ms is None else now_ms
        while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
            self.segments.pop().delete()
            self._bases.pop()
        self.segments[-1].truncate_to(offset)
        self._leo = self.segments[-1].next_offset
        self._rebuild_producer_state(now, upto_segment=len(self.segments))
        self.leader_epoch_cache.truncate_from_end(self._leo)
        if self._hw is not None:
            self._hw = min(self._hw, self._leo)
        self.flush(now)
        return self._leo

    def truncate_fully_and_start_at(self, offset: int, now_ms: int | None = None) -> None:
        """An empty log starting at ``offset`` (the leader's log starts after everything we
        have): every segment, producer snapshot and epoch goes."""
        now = _now_ms() if now_ms is None else now_ms
        for seg in self.segments:
            seg.delete()
        self.segments = [self._new_segment(offset, now)]
        self._bases = [offset]
        self.segments[0].ensure_loaded()
        self._leo = offset
        if self._start > offset:   # a checkpointed start past the new log would hide it
            self._start = offset
            self._write_start_checkpoint()
        self.producer_state.truncate_fully_and_start_at(offset)
        self.leader_epoch_cache.clear()
        if self._hw is not None:
            self._hw = offset

    def _complete_txn(self, segment: LogSegment, c: CompletedTxn, write_index: bool) -> None:
        ps = self.producer_state
        if c.is_aborted and write_index:
            segment.txn_index.append(AbortedTxn(c.producer_id, c.first_offset, c.last_offset,
                                                ps.last_stable_offset(c)))
        if c.first_offset in ps.ongoing_txns:
            ps.complete_txn(c)

    # ================================================================== roll / flush
    def _maybe_roll(self, size: int, max_ts: int, now: int, last_offset: int) -> LogSegment:
        """LogSegment.shouldRoll: size, time (relative to the first batch's timestamp, else the
        segment's creation time), full indexes, or offsets no longer fitting in 32 bits."""
        seg = self.segments[-1]
        cfg = self.config
        if seg.size == 0:
            return seg
        first_ts = seg.rolling_based_timestamp
        waited = (max_ts - first_ts) if first_ts >= 0 and max_ts >= 0 else now - seg.created_ms
        if (seg.size > cfg.segment_bytes - size
                or waited > cfg.segment_ms
                or seg.offset_index.size_bytes + 8 > cfg.segment_index_bytes
                or seg.time_index.size_bytes + 12 > cfg.segment_index_bytes
                or last_offset - seg.base_offset > _INT32_MAX):
            return self.roll(now)
        return seg

    def roll(self, now_ms: int | None = None) -> LogSegment:
        """Start a new segment at the log end offset: the old one gets its final time-index
        entry and is fsynced, and a producer snapshot is written at the new base offset (so a
        crash recovers only the new segment)."""
        now = _now_ms() if now_ms is None else now_ms
        old = self.segments[-1]
        if old.size == 0:
            return old
        old.on_become_inactive()
        old.flush()
        seg = self._new_segment(self._leo, now)
        seg.ensure_loaded()
        self.segments.append(seg)
        self._bases.append(seg.base_offset)
        self.producer_state.update_map_end_offset(self._leo)
        self.producer_state.take_snapshot()
        return seg

    def flush(self, now_ms: int | None = None) -> None:
        """fsync the segments holding unflushed data (Kafka's UnifiedLog.flush)."""
        for seg in self.segments:
            if seg.unflushed:
                seg.flush()
        self._unflushed_messages = 0
        self._last_flush_ms = _now_ms() if now_ms is None else now_ms

    def maybe_flush(self, now_ms: int | None = None) -> bool:
        """For the broker's periodic task: flush when log.flush.interval.ms has elapsed."""
        now = _now_ms() if now_ms is None else now_ms
        if self._unflushed_messages and now - self._last_flush_ms >= self.config.flush_ms:
            self.flush(now)
            return True
        return False

    # ================================================================== read
    def _segment_index(self, offset: int) -> int:
        return max(bisect_right(self._bases, offset) - 1, 0)

    def read(self, fetch_offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_batch: bool = True) -> FetchDataInfo:
        """Whole batches from the batch containing ``fetch_offset``, up to ``max_bytes`` (but
        at least one batch when ``min_one_batch``, KIP-74), only batches below ``max_offset``
        (pass the HW for read_uncommitted, the LSO for read_committed). Reads one segment, as
        Kafka does. OFFSET_OUT_OF_RANGE outside [log start, log end]."""
        leo = self._leo
        start = self.log_start_offset
        if fetch_offset < start or fetch_offset > leo:
            raise OffsetOutOfRangeError(
                f"Received request for offset {fetch_offset} for partition "
                f"{os.path.basename(self.directory)}, but we only have log segments in the "
                f"range {start} to {leo}.")
        if fetch_offset == leo or (max_offset is not None and fetch_offset >= max_offset):
            return FetchDataInfo(b"", fetch_offset, fetch_offset, fetch_offset)
        first = self._segment_index(fetch_offset)
        for j in range(first, len(self.segments)):
            r = self.segments[j].read(fetch_offset, max_bytes, max_offset, min_one_batch)
            if r is not None:
                data, base, next_offset, upper = r
                if upper is None:
                    upper = self._bases[j + 1] if j + 1 < len(self._bases) else leo
                return FetchDataInfo(data, base, next_offset, upper)
        return FetchDataInfo(b"", fetch_offset, fetch_offset, fetch_offset)

    def aborted_transactions(self, fetch_offset: int,
                             upper_bound_offset: int) -> list[tuple[int, int]]:
        """(producer_id, first_offset) of aborted transactions overlapping
        [fetch_offset, upper_bound_offset), for a read_committed Fetch response; use the
        ``aborted_upper_bound`` of the FetchDataInfo as the upper bound."""
        out: list[tuple[int, int]] = []
        for seg in self.segments[self._segment_index(fetch_offset):]:
            txns, complete = seg.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)
            out.extend((t.producer_id, t.first_offset) for t in txns)
            if complete:
                break
        return out

    # ================================================================== ListOffsets
    def log_start_epoch(self) -> int:
        """The leader epoch ListOffsets(EARLIEST) names with the log start offset: the epoch
        cache's first entry when it starts at or before the log start (UnifiedLog
        .fetchOffsetByTimestamp), so after a failover the epoch the oldest records were written
        in, not the current one; -1 when the first entry starts later. A log that never had an
        entry (a leader assigns its epoch at election in Kafka, always) names its own epoch."""
        entries = self.leader_epoch_cache.entries()
        if not entries:
            return self.leader_epoch
        epoch, start = entries[0]
        return epoch if start <= self.log_start_offset else -1

    def offset_for_timestamp(self, timestamp: int,
                             max_offset: int | None = None) -> TimestampAndOffset | None:
        """ListOffsets: ``timestamp`` >= 0 gives the first record whose timestamp is >= it;
        EARLIEST_TIMESTAMP (-2) the log start; LATEST_TIMESTAMP (-1) ``max_offset`` (the
        HW/LSO per isolation level, default LEO); MAX_TIMESTAMP (-3) the record with the
        largest timestamp (KIP-734). Offsets at or beyond ``max_offset`` are not returned (None,
        i.e. offset -1 in the response), as Partition.fetchOffsetForTimestamp filters them."""
        limit = self._leo if max_offset is None else max_offset
        if timestamp == EARLIEST_TIMESTAMP:
            return TimestampAndOffset(rec.NO_TIMESTAMP, self.log_start_offset, self.log_start_epoch())
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(rec.NO_TIMESTAMP, limit, self.leader_epoch)
        if timestamp == MAX_TIMESTAMP:
            best = None
            for seg in self.segments:
                r = seg.max_timestamp_record()
                if r is not None and (best is None or r[1] > best[1]):
                    best = r
            if best is None or best[0] >= limit:
                return None
            return TimestampAndOffset(best[1], best[0], best[2])
        if timestamp < 0:
            raise ValueError(f"unsupported ListOffsets timestamp {timestamp}")
        for seg in self.segments:
            if seg.largest_timestamp >= timestamp:
                r = seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if r is None or r[0] >= limit:
                    return None
                return TimestampAndOffset(r[1], r[0], r[2])
        return None

    # ================================================================== producers
    def remove_expired_producers(self, now_ms: int | None = None) -> list[int]:
        """producer.id.expiration.ms: forget idle producers without an open transaction."""
        return self.producer_state.remove_expired_producers(
            _now_ms() if now_ms is None else now_ms)

    def describe_producers(self) -> list[dict]:
        """Per active producer, the fields of a DescribeProducers response."""
        out = []
        for pid, e in self.producer_state.producers.items():
            out.append({
                "producer_id": pid, "producer_epoch": e.producer_epoch,
                "last_sequence": e.last_seq, "last_timestamp": e.last_timestamp,
                "coordinator_epoch": e.coordinator_epoch,
                "current_txn_start_offset": (-1 if e.current_txn_first_offset is None
                                             else e.current_txn_first_offset),
            })
        return out

    # ================================================================== retention
    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """retention.ms / retention.bytes on whole non-active segments; advances the log start
        offset. Returns the number of segments deleted."""
        now = _now_ms() if now_ms is None else now_ms
        cfg = self.config
        deleted = 0
        total = self.size_in_bytes
        while len(self.segments) > 1:
            seg = self.segments[0]
            too_old = cfg.retention_ms >= 0 and 0 <= seg.largest_timestamp < now - cfg.retention_ms
            too_big = cfg.retention_bytes >= 0 and total - seg.size >= cfg.retention_bytes
            if not (too_old or too_big):
                break
            total -= seg.size
            seg.delete()
            self.segments.pop(0)
            self._bases.pop(0)
            deleted += 1
        return deleted

    # ================================================================== open / recovery / close
    def _new_segment(self, base: int, now: int) -> LogSegment:
        return LogSegment(self.directory, base,
                          index_interval_bytes=self.config.index_interval_bytes, created_ms=now)

    def _load(self, now: int) -> None:
        marker = os.path.join(self.directory, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        bases = offsets_of_files(self.directory, LOG_SUFFIX)
        if not bases:
            self.segments = [self._new_segment(0, now)]
            self._bases = [0]
            self.segments[0].ensure_loaded()
            self.producer_state.truncate_fully_and_start_at(0)
            self._leo = 0
            self.was_clean_shutdown = clean
            if clean:
                os.unlink(marker)
            return
        self.segments = [self._new_segment(b, now) for b in bases]
        self._bases = list(bases)
        if clean:
            active = self.segments[-1]
            active.ensure_loaded()
            intact = (active._ends[-1] if len(active._ends) else 0) == active.size
            if intact:
                for seg in self.segments:
                    if not seg.open_indexes():
                        seg.rebuild_indexes()
                self._leo = active.next_offset
                self._rebuild_producer_state(now, upto_segment=len(self.segments))
                self.was_clean_shutdown = True
                os.unlink(marker)
                return
        if os.path.exists(marker):
            os.unlink(marker)
        self._recover(now)

    def _recover(self, now: int) -> None:
        """Unclean open: recover every segment from the one holding the newest producer
        snapshot (written at the last roll, after fsync of everything before it)."""
        ps = self.producer_state
        snaps = ps.list_snapshots()
        r = 0
        if snaps:
            r = max(bisect_right(self._bases, snaps[-1]) - 1, 0)
        for seg in self.segments[:r]:
            if not seg.open_indexes():
                seg.rebuild_indexes()
        self._rebuild_producer_state(now, upto_segment=r)
        truncated_total = 0
        for i in range(r, len(self.segments)):
            seg = self.segments[i]

            def on_batch(h, body, seg=seg):
                self._replay_batch(h, body, seg, write_index=True)

            truncated = seg.recover(on_batch)
            truncated_total += truncated
            if truncated:
                # Everything after a corrupt batch is unreachable: drop later segments.
                for later in self.segments[i + 1:]:
                    truncated_total += later.size
                    later.delete()
                del self.segments[i + 1:]
                del self._bases[i + 1:]
                break
        self._leo = self.segments[-1].next_offset
        self.recovered_bytes_truncated = truncated_total
        ps.delete_snapshots_after(self._leo)
        ps.update_map_end_offset(self._leo)

    def _rebuild_producer_state(self, now: int, upto_segment: int) -> None:
        """Load the newest snapshot at or below the start of segment ``upto_segment`` (or the
        LEO when it is past the last segment), then replay the batches between that snapshot
        and there (no txn index writes: those segments' indexes are trusted)."""
        ps = self.producer_state
        if upto_segment >= len(self.segments):
            limit = self._leo
        else:
            limit = self._bases[upto_segment]
        snap = ps.load_latest_snapshot(limit, now)
        start = self.log_start_offset if snap is None else snap
        ps.update_map_end_offset(start)
        if start < limit:
            for seg in self.segments[self._segment_index(start):upto_segment]:
                for h, body in seg.iter_batches(start):
                    if h.base_offset >= limit:
                        break
                    if h.base_offset >= start:
                        self._replay_batch(h, body, seg, write_index=False)
        ps.update_map_end_offset(limit)

    def _replay_batch(self, h: rec.BatchHeader, body, seg: LogSegment,
                      write_index: bool) -> None:
        """Apply one stored batch to producer state without validation (AppendOrigin
        REPLICATION), as LogLoader does when rebuilding state."""
        if h.producer_id <= rec.NO_PRODUCER_ID:
            return
        ps = self.producer_state
        updated: dict = {}
        completed = ps.update_producers(updated, h, body, AppendOrigin.REPLICATION, h.base_offset, h.last_offset,
                                        h.max_timestamp)
        ps.update(updated[h.producer_id])
        if completed is not None:
            self._complete_txn(seg, completed, write_index)

    def close(self) -> None:
        """Clean shutdown: fsync, write a producer snapshot at the LEO, close files, then the
        ``.kafka_cleanshutdown`` marker so the next open skips recovery."""
        if self._closed:
            return
        self.flush()
        self.segments[-1].flush()
        self.producer_state.update_map_end_offset(self._leo)
        self.producer_state.take_snapshot()
        for seg in self.segments:
            seg.close()
        path = os.path.join(self.directory, CLEAN_SHUTDOWN_FILE)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.fsync(fd)
        os.close(fd)
        dfd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
        self._closed = True

    def abandon(self) -> None:
        """Close file descriptors WITHOUT a clean shutdown (tests simulate a crash)."""
        for seg in self.segments:
            seg.close()
        self._closed = True

    def __enter__(self) -> "PartitionLog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"PartitionLog({self.directory!r}, start={self.log_start_offset}, "
                f"end={self._leo}, lso={self.last_stable_offset}, "
                f"segments={len(self.segments)})")
