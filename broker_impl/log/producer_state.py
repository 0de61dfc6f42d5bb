"""Idempotent and transactional producer state of one partition (Kafka's ProducerStateManager,
ProducerStateEntry, ProducerAppendInfo; storage/src/main/java/org/apache/kafka/storage/
internals/log/ in apache/kafka).

What it decides, exactly as current Kafka does:
- a batch whose (epoch, first seq, last seq) equals one of the producer's last 5 batches
  (NUM_BATCHES_TO_RETAIN) is a duplicate: the broker answers success with the ORIGINAL offsets
  (UnifiedLog.analyzeAndValidateProducerState; DUPLICATE_SEQUENCE_NUMBER is never returned);
- epoch older than the producer's -> INVALID_PRODUCER_EPOCH (47);
- a new epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER (45);
- same epoch: the first sequence must follow the last one (wrapping at Int32 max), else 45;
- unknown producer id: any sequence is accepted (KIP-360, Kafka >= 2.5: no UNKNOWN_PRODUCER_ID),
  except the first batch of a transaction that was verified with the coordinator (KIP-890,
  VerificationStateEntry): a TV2 producer the partition has no state of must start at sequence
  0, and no verified batch may be above the lowest sequence seen while verifying -- else 45, so
  that a later batch cannot overtake an earlier one refused with a retriable error (the earlier
  one would then be out of order until the transaction times out);
- a non-transactional batch while the producer has an open transaction -> INVALID_TXN_STATE;
- a COMMIT/ABORT marker with an older coordinator epoch -> TRANSACTION_COORDINATOR_FENCED (52),
  with an older producer epoch -> INVALID_PRODUCER_EPOCH (TV2: the marker epoch must be
  greater, except for a retried marker of a transaction already ended).

Snapshots (``<offset:020d>.snapshot``) use Kafka's file format (version 1, CRC32C), which keeps
only each producer's LAST batch: after a restart the dedup window is 1 batch, as in Kafka.
"""

from __future__ import annotations

import enum
import os
import struct
from collections import deque
from typing import NamedTuple

from crc32c import crc32c

from . import records as rec
from .errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from .segment import filename_prefix, offsets_of_files

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_SUFFIX = ".snapshot"
PRODUCER_SNAPSHOT_VERSION = 1

_SNAP_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")
# producer_id, epoch, last_sequence, last_offset, offset_delta, timestamp, coordinator_epoch,
# current_txn_first_offset


class AppendOrigin(enum.Enum):
    """Who appends: decides how much is validated (Kafka's AppendOrigin)."""

    CLIENT = "client"  # Produce: epoch + sequence checks, duplicate detection
    COORDINATOR = "coordinator"  # group/txn coordinators, txn markers: epoch checks only
    REPLICATION = "replication"  # recovery replay: no checks


class BatchMetadata(NamedTuple):
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return rec.decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # offset of the marker
    is_aborted: bool


class TxnMetadata:
    __slots__ = ("producer_id", "first_offset", "last_offset")

    def __init__(self, producer_id: int, first_offset: int):
        self.producer_id = producer_id
        self.first_offset = first_offset
        self.last_offset: int | None = None

    def __repr__(self) -> str:
        return f"TxnMetadata(pid={self.producer_id}, first={self.first_offset})"


class ProducerStateEntry:
    __slots__ = ("producer_id", "producer_epoch", "coordinator_epoch", "last_timestamp",
                 "current_txn_first_offset", "batch_metadata")

    def __init__(self, producer_id: int, producer_epoch: int = rec.NO_PRODUCER_EPOCH,
                 coordinator_epoch: int = -1, last_timestamp: int = rec.NO_TIMESTAMP,
                 current_txn_first_offset: int | None = None,
                 batch_metadata: BatchMetadata | None = None):
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        self.batch_metadata: deque[BatchMetadata] = deque()
        if batch_metadata is not None:
            self.batch_metadata.append(batch_metadata)

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else rec.NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else rec.NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def copy_without_batches(self) -> "ProducerStateEntry":
        """ProducerStateEntry.withProducerIdAndBatchMetadata(pid, empty): what an append
        accumulates into before it is committed."""
        return ProducerStateEntry(self.producer_id, self.producer_epoch, self.coordinator_epoch,
                                  self.last_timestamp, self.current_txn_first_offset)

    def maybe_update_producer_epoch(self, producer_epoch: int) -> bool:
        if self.producer_epoch != producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = producer_epoch
            return True
        return False

    def _add_batch_metadata(self, batch: BatchMetadata) -> None:
        if len(self.batch_metadata) == NUM_BATCHES_TO_RETAIN:
            self.batch_metadata.popleft()
        self.batch_metadata.append(batch)

    def add_batch(self, producer_epoch: int, last_seq: int, last_offset: int, offset_delta: int,
                  timestamp: int) -> None:
        self.maybe_update_producer_epoch(producer_epoch)
        self._add_batch_metadata(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def update_from(self, other: "ProducerStateEntry") -> None:
        """Commit an append's accumulated entry into this one (ProducerStateEntry.update)."""
        self.maybe_update_producer_epoch(other.producer_epoch)
        for b in other.batch_metadata:
            self._add_batch_metadata(b)
        self.coordinator_epoch = other.coordinator_epoch
        self.current_txn_first_offset = other.current_txn_first_offset
        self.last_timestamp = other.last_timestamp

    def update_for_marker(self, producer_epoch: int, coordinator_epoch: int,
                          timestamp: int) -> None:
        self.maybe_update_producer_epoch(producer_epoch)
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = None
        self.last_timestamp = timestamp

    def find_duplicate_batch(self, producer_epoch: int, first_seq: int,
                             last_seq: int) -> BatchMetadata | None:
        if producer_epoch != self.producer_epoch:
            return None
        for b in self.batch_metadata:
            if b.last_seq == last_seq and b.first_seq == first_seq:
                return b
        return None

    def __repr__(self) -> str:
        return (f"ProducerStateEntry(pid={self.producer_id}, epoch={self.producer_epoch}, "
                f"coordinator_epoch={self.coordinator_epoch}, "
                f"txn_first_offset={self.current_txn_first_offset}, "
                f"batches={list(self.batch_metadata)})")


class VerificationStateEntry:
    """Kafka's VerificationStateEntry: a producer's transactional batch is being verified with its
    coordinator (KIP-890) on this partition. Kept from the first verification until a batch of the
    transaction (or a marker) is appended; its lowest sequence blocks a higher one from being
    written first -- the batches of one transaction sent together are verified together, and one
    refused with a retriable error (CONCURRENT_TRANSACTIONS) must not be overtaken by the next."""

    __slots__ = ("timestamp", "lowest_sequence", "epoch", "supports_epoch_bump")

    def __init__(self, timestamp: int, sequence: int, epoch: int, supports_epoch_bump: bool):
        self.timestamp = timestamp
        self.lowest_sequence = sequence
        self.epoch = epoch
        self.supports_epoch_bump = supports_epoch_bump

    def maybe_update_lowest_sequence_and_epoch(self, sequence: int, epoch: int) -> None:
        """A lower sequence of the same epoch lowers the bar; a newer epoch (the sequences start
        again) replaces it."""
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch, self.lowest_sequence = epoch, sequence


class ProducerAppendInfo:
    """Validates one producer's batches against its state before they are written and
    accumulates the new state; nothing changes until ProducerStateManager.update()."""

    def __init__(self, producer_id: int, current_entry: ProducerStateEntry, origin: AppendOrigin,
                 verification: VerificationStateEntry | None = None):
        self.producer_id = producer_id
        self.current_entry = current_entry
        self.origin = origin
        #: the producer's verification on this partition when the append began (kept even once the
        #: manager dropped it after this append's first transactional batch, as Kafka's is)
        self.verification = verification
        self.updated_entry = current_entry.copy_without_batches()
        self.started_transactions: list[TxnMetadata] = []

    def _check_producer_epoch(self, producer_epoch: int, offset: int,
                              transaction_version: int) -> None:
        current = self.updated_entry.producer_epoch
        if transaction_version >= 2:
            invalid = producer_epoch <= current
        else:
            invalid = producer_epoch < current
        if not invalid:
            return
        if (transaction_version >= 2 and producer_epoch == current
                and self.updated_entry.current_txn_first_offset is None):
            return  # TV2 retry of a marker whose transaction already ended (KAFKA-19999)
        if self.origin is AppendOrigin.REPLICATION:
            return
        cmp = "<=" if transaction_version >= 2 else "<"
        raise InvalidProducerEpochError(
            f"Epoch of producer {self.producer_id} at offset {offset} is {producer_epoch}, "
            f"which is {cmp} the last seen epoch {current}")

    def _check_sequence(self, producer_epoch: int, first_seq: int, offset: int) -> None:
        ver = self.verification
        if ver is not None and ver.supports_epoch_bump and first_seq != 0 and self.current_entry.is_empty:
            raise OutOfOrderSequenceError(
                f"Producer {self.producer_id} at offset {offset}: sequence {first_seq} where a "
                "transactions-v2 producer this partition has no state of must start at 0")
        if ver is not None and first_seq > ver.lowest_sequence:
            raise OutOfOrderSequenceError(
                f"Producer {self.producer_id} at offset {offset}: sequence {first_seq} is above "
                f"{ver.lowest_sequence}, the lowest sequence seen while its transaction was verified")
        updated = self.updated_entry
        if producer_epoch != updated.producer_epoch:
            if first_seq != 0 and updated.producer_epoch != rec.NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch of producer {self.producer_id} at "
                    f"offset {offset}: {producer_epoch} (request epoch), {first_seq} (seq. "
                    f"number), {updated.producer_epoch} (current producer epoch)")
            return
        if not updated.is_empty:
            current_last_seq = updated.last_seq
        elif producer_epoch == self.current_entry.producer_epoch:
            current_last_seq = self.current_entry.last_seq
        else:
            current_last_seq = rec.NO_SEQUENCE
        # No current epoch (e.g. the producer's data was removed): accept any sequence.
        if self.current_entry.producer_epoch == rec.NO_PRODUCER_EPOCH:
            return
        if not (first_seq == current_last_seq + 1
                or (first_seq == 0 and current_last_seq == rec.INT32_MAX)):
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {self.producer_id} at offset "
                f"{offset}: {first_seq} (incoming seq. number), {current_last_seq} (current end "
                "sequence number)")

    def append_data_batch(self, producer_epoch: int, first_seq: int, last_seq: int,
                          last_timestamp: int, first_offset: int, last_offset: int,
                          is_transactional: bool) -> None:
        self._check_producer_epoch(producer_epoch, first_offset, 0)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(producer_epoch, first_seq, first_offset)
        self.updated_entry.add_batch(producer_epoch, last_seq, last_offset,
                                     last_offset - first_offset, last_timestamp)
        txn_first = self.updated_entry.current_txn_first_offset
        if txn_first is not None and not is_transactional:
            raise InvalidTxnStateError(
                f"Expected transactional write from producer {self.producer_id} at offset "
                f"{first_offset}")
        if txn_first is None and is_transactional:
            self.updated_entry.current_txn_first_offset = first_offset
            self.started_transactions.append(TxnMetadata(self.producer_id, first_offset))

    def append_end_txn_marker(self, marker: rec.EndTransactionMarker, producer_epoch: int,
                              offset: int, timestamp: int,
                              transaction_version: int = 0) -> CompletedTxn | None:
        self._check_producer_epoch(producer_epoch, offset, transaction_version)
        if self.updated_entry.coordinator_epoch > marker.coordinator_epoch:
            if self.origin is not AppendOrigin.REPLICATION:
                raise TransactionCoordinatorFencedError(
                    f"Invalid coordinator epoch for producerId {self.producer_id} at offset "
                    f"{offset}: {marker.coordinator_epoch} (zombie), "
                    f"{self.updated_entry.coordinator_epoch} (current)")
        first = self.updated_entry.current_txn_first_offset
        completed = None
        if first is not None:
            completed = CompletedTxn(self.producer_id, first, offset,
                                     marker.control_type == rec.ABORT)
        self.updated_entry.update_for_marker(producer_epoch, marker.coordinator_epoch, timestamp)
        return completed


class ProducerStateManager:
    """Producer table of one partition, ongoing transactions (for the LSO) and snapshots."""

    def __init__(self, directory: str, producer_id_expiration_ms: int = 86_400_000):
        self.directory = directory
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        # Ongoing transactions keyed by first offset, kept in offset order (Kafka's TreeMap):
        # the first one bounds the LSO. See update() for why insertion order is not enough.
        self.ongoing_txns: dict[int, TxnMetadata] = {}
        #: producer id -> its transaction's verification in progress (KIP-890)
        self.verification_states: dict[int, VerificationStateEntry] = {}
        self.last_map_offset = 0
        self.last_snap_offset = 0

    # ------------------------------------------------------------------ queries
    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """The producer has a transaction open on this partition at this epoch (so its batches
        need no verification with the coordinator: KIP-890)."""
        e = self.producers.get(producer_id)
        return e is not None and e.current_txn_first_offset is not None and e.producer_epoch == producer_epoch

    def first_undecided_offset(self) -> int | None:
        """First offset of the oldest ongoing transaction (bounds the LSO)."""
        for first in self.ongoing_txns:
            return first
        return None

    def active_producers(self) -> dict[int, ProducerStateEntry]:
        return dict(self.producers)

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """LSO once ``completed`` is done: first offset of the next ongoing transaction of
        another producer, else the offset after the marker (stored in the txn index)."""
        for txn in self.ongoing_txns.values():
            if txn.producer_id != completed.producer_id:
                return txn.first_offset
        return completed.last_offset + 1

    # ------------------------------------------------------------------ verification
    def maybe_create_verification_state_entry(self, producer_id: int, sequence: int, epoch: int,
                                              supports_epoch_bump: bool, now_ms: int) -> VerificationStateEntry:
        """The producer's verification entry, made when its first transactional batch on this
        partition goes to the coordinator and updated by every later one until an append."""
        entry = self.verification_states.get(producer_id)
        if entry is None:
            entry = self.verification_states[producer_id] = VerificationStateEntry(
                now_ms, sequence, epoch, supports_epoch_bump)
        entry.maybe_update_lowest_sequence_and_epoch(sequence, epoch)
        return entry

    def verification_state_entry(self, producer_id: int) -> VerificationStateEntry | None:
        return self.verification_states.get(producer_id)

    # ------------------------------------------------------------------ updates
    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        current = self.producers.get(producer_id) or ProducerStateEntry(producer_id)
        return ProducerAppendInfo(producer_id, current, origin, self.verification_states.get(producer_id))

    def update_producers(self, producers: dict[int, ProducerAppendInfo], h: rec.BatchHeader, batch,
                         origin: AppendOrigin, first_offset: int, last_offset: int, timestamp: int,
                         transaction_version: int = 0) -> CompletedTxn | None:
        """Kafka's UnifiedLog.updateProducers, the one producer-state step of every batch with a
        producer id -- a leader's append, a follower's, a log rebuilding its state: ``h``
        (``batch``: its bytes) at ``first_offset``..``last_offset`` goes into its producer's
        pending state in ``producers`` (checked as ``origin`` asks; nothing changes until
        :meth:`update`). Returns the transaction its marker completes, if any."""
        info = producers.get(h.producer_id)
        if info is None:
            info = producers[h.producer_id] = self.prepare_update(h.producer_id, origin)
        completed = None
        if h.is_control:
            marker = rec.read_end_txn_marker(batch)
            if marker is None:
                return None
            completed = info.append_end_txn_marker(marker, h.producer_epoch, first_offset, timestamp,
                                                   transaction_version)
        else:
            info.append_data_batch(h.producer_epoch, h.base_sequence, h.last_sequence, timestamp, first_offset,
                                   last_offset, h.is_transactional)
        if h.is_transactional:
            # the transaction has a first offset now, or ended: its verification is over -- except
            # a TV2 marker of the epoch being verified, which ended the transaction before it
            ver = self.verification_states.get(h.producer_id)
            if not (ver is not None and ver.supports_epoch_bump and h.is_control and h.producer_epoch == ver.epoch):
                self.verification_states.pop(h.producer_id, None)
        return completed

    def update(self, info: ProducerAppendInfo) -> None:
        current = self.producers.get(info.producer_id)
        if current is None:
            self.producers[info.producer_id] = info.updated_entry
        else:
            current.update_from(info.updated_entry)
        ongoing = self.ongoing_txns
        for txn in info.started_transactions:
            last = next(reversed(ongoing), None)
            ongoing[txn.first_offset] = txn
            if last is not None and txn.first_offset < last:
                # A follower's append of several producers' batches is applied producer by
                # producer: one that appears first in the fetched batches may have begun its
                # open transaction after another's (cases/cluster/
                # follower_catch_up_keeps_oldest_open_txn). Rare, so re-sort then.
                self.ongoing_txns = ongoing = dict(sorted(ongoing.items()))

    def complete_txn(self, completed: CompletedTxn) -> None:
        txn = self.ongoing_txns.pop(completed.first_offset, None)
        if txn is None:
            raise ValueError(f"attempted to complete transaction {completed} which was not "
                             "started")
        txn.last_offset = completed.last_offset

    def update_map_end_offset(self, offset: int) -> None:
        self.last_map_offset = offset

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        """Drop producers idle for producer.id.expiration.ms without an open transaction;
        returns their ids. Their next write is accepted with any sequence."""
        expired = [pid for pid, e in self.producers.items() if self._is_expired(now_ms, e)]
        for pid in expired:
            del self.producers[pid]
        # verifications that never led to an append (the producer gave up) go the same way
        for pid in [pid for pid, v in self.verification_states.items()
                    if now_ms - v.timestamp >= self.producer_id_expiration_ms]:
            del self.verification_states[pid]
        return expired

    def _is_expired(self, now_ms: int, e: ProducerStateEntry) -> bool:
        return (e.current_txn_first_offset is None
                and now_ms - e.last_timestamp >= self.producer_id_expiration_ms)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.producers.clear()
        self.ongoing_txns.clear()
        for snap in self.list_snapshots():
            self._delete_snapshot(snap)
        self.last_snap_offset = 0
        self.last_map_offset = offset

    def clear(self) -> None:
        self.producers.clear()
        self.ongoing_txns.clear()

    # ------------------------------------------------------------------ snapshots
    def snapshot_path(self, offset: int) -> str:
        return os.path.join(self.directory, filename_prefix(offset) + SNAPSHOT_SUFFIX)

    def list_snapshots(self) -> list[int]:
        return offsets_of_files(self.directory, SNAPSHOT_SUFFIX)

    def _delete_snapshot(self, offset: int) -> None:
        try:
            os.unlink(self.snapshot_path(offset))
        except FileNotFoundError:
            pass

    def take_snapshot(self, *, keep: int = 2) -> int | None:
        """Write ``<map end offset>.snapshot`` unless it already exists; keep the
        newest ``keep`` snapshot files. Returns the snapshot offset written, if any."""
        if os.path.exists(self.snapshot_path(self.last_map_offset)):
            return None
        offset = self.last_map_offset
        write_snapshot(self.snapshot_path(offset), self.producers.values())
        self.last_snap_offset = offset
        snaps = self.list_snapshots()
        for old in snaps[:-keep] if keep > 0 else []:
            self._delete_snapshot(old)
        return offset

    def delete_snapshots_after(self, offset: int) -> None:
        for snap in self.list_snapshots():
            if snap > offset:
                self._delete_snapshot(snap)

    def load_latest_snapshot(self, max_offset: int, now_ms: int) -> int | None:
        """Load the newest readable snapshot at an offset <= ``max_offset`` (deleting newer or
        corrupt ones); returns its offset, or None (state left empty)."""
        self.clear()
        for snap in reversed(self.list_snapshots()):
            if snap > max_offset:
                self._delete_snapshot(snap)
                continue
            try:
                entries = read_snapshot(self.snapshot_path(snap))
            except (CorruptSnapshotError, OSError):
                self._delete_snapshot(snap)
                continue
            for e in entries:
                if not self._is_expired(now_ms, e):
                    self._load_entry(e)
            # keep ongoing_txns in offset order
            self.ongoing_txns = dict(sorted(self.ongoing_txns.items()))
            self.last_snap_offset = snap
            self.last_map_offset = snap
            return snap
        return None

    def _load_entry(self, e: ProducerStateEntry) -> None:
        self.producers[e.producer_id] = e
        if e.current_txn_first_offset is not None:
            self.ongoing_txns[e.current_txn_first_offset] = TxnMetadata(
                e.producer_id, e.current_txn_first_offset)


class CorruptSnapshotError(Exception):
    pass


def write_snapshot(path: str, entries) -> None:
    """Kafka's producer snapshot format v1: version int16, crc uint32 (CRC32C of everything
    after it), then an array (int32 count) of entries. Written to a temp file, fsynced, and
    renamed so a crash never leaves a half snapshot under the real name."""
    body = bytearray(struct.pack(">i", 0))
    n = 0
    for e in entries:
        body += _SNAP_ENTRY.pack(
            e.producer_id, e.producer_epoch, e.last_seq, e.last_data_offset,
            e.last_offset_delta, e.last_timestamp, e.coordinator_epoch,
            -1 if e.current_txn_first_offset is None else e.current_txn_first_offset)
        n += 1
    struct.pack_into(">i", body, 0, n)
    crc = crc32c(bytes(body))
    data = struct.pack(">hI", PRODUCER_SNAPSHOT_VERSION, crc) + bytes(body)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_snapshot(path: str) -> list[ProducerStateEntry]:
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < _SNAP_HEADER.size:
        raise CorruptSnapshotError(f"{path}: too short")
    version, crc, count = _SNAP_HEADER.unpack_from(data, 0)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"{path}: unknown version {version}")
    if crc32c(data[6:]) != crc:
        raise CorruptSnapshotError(f"{path}: CRC mismatch")
    if count < 0 or len(data) != _SNAP_HEADER.size + count * _SNAP_ENTRY.size:
        raise CorruptSnapshotError(f"{path}: size does not match {count} entries")
    out = []
    for (pid, epoch, seq, offset, delta, ts, coord_epoch,
         txn_first) in _SNAP_ENTRY.iter_unpack(data[_SNAP_HEADER.size:]):
        batch = BatchMetadata(seq, offset, delta, ts) if offset >= 0 else None
        out.append(ProducerStateEntry(pid, epoch, coord_epoch, ts,
                                      txn_first if txn_first >= 0 else None, batch))
    return out
