"""Kafka's TransactionStateManager: the transaction metadata cache and ``__transaction_state``.

- Every transition is appended to the partition of ``__transaction_state`` that the
  transactional id hashes to (Kafka's record format, see transaction_log) and **fsynced** before
  the cache changes and before anyone is answered: the transaction log is the coordinator's
  only memory across a crash.
- The single broker leads every partition of the topic. The *coordinator epoch* (Kafka: the
  partition leader epoch) is bumped and made durable at every load, i.e. every start-up, and
  markers carry it: a marker from a previous incarnation is refused by the data partitions
  (TRANSACTION_COORDINATOR_FENCED) once a newer one wrote there.
- While the log is read back, requests get COORDINATOR_LOAD_IN_PROGRESS; afterwards every
  transaction found in PrepareCommit/PrepareAbort is handed back for its markers to be written
  again (Kafka's loadTransactionsForTxnTopicPartition).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import trio

from ..cluster.durable_file import replace_durably
from ..features import finalized_features
from ..log import records as rec
from ..log.errors import LogError
from ..log.producer_state import AppendOrigin
from ..protocol.errors import Errors
from . import transaction_log as tlog
from .partitioner import partition_for
from .transaction_metadata import CoordinatorError, TransactionMetadata, TransactionState, TxnTransitMetadata

log = logging.getLogger("kconform.txn")
S = TransactionState

#: Log append errors as the coordinator reports them (appendTransactionToLog).
_APPEND_ERRORS = {
    Errors.UNKNOWN_TOPIC_OR_PARTITION: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.REQUEST_TIMED_OUT: Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_LEADER_OR_FOLLOWER: Errors.NOT_COORDINATOR,
    Errors.KAFKA_STORAGE_ERROR: Errors.NOT_COORDINATOR,
    Errors.MESSAGE_TOO_LARGE: Errors.UNKNOWN_SERVER_ERROR,
    Errors.RECORD_LIST_TOO_LARGE: Errors.UNKNOWN_SERVER_ERROR,
}


def now_ms() -> int:
    return int(time.time() * 1000)


class TransactionStateManager:
    def __init__(self, broker):
        self.broker = broker
        cfg = broker.config
        self.num_partitions = cfg.int("transaction.state.log.num.partitions")
        self.max_timeout_ms = cfg.int("transaction.max.timeout.ms")
        self.transactional_id_expiration_ms = cfg.int("transactional.id.expiration.ms")
        self.coordinator_epoch = -1
        self.loading = True
        self.cache: dict[int, dict[str, TransactionMetadata]] = {}
        self._epoch_file = Path(broker.data_dir) / "transaction_coordinator_epoch"

    # ------------------------------------------------------------------ basics
    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def transaction_version_level(self) -> int:
        """The finalized ``transaction.version`` (what ApiVersions advertises)."""
        return finalized_features(self.broker.config).get("transaction.version", 0)

    def validate_transaction_timeout_ms(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.max_timeout_ms

    def _topic(self, create: bool):
        topics = self.broker.topics
        topic = topics.get(tlog.TRANSACTION_STATE_TOPIC)
        if topic is None and create:
            # Kafka's enforced configs: compacted, uncompressed (not enforced here: no cleaner).
            topic = topics.create(tlog.TRANSACTION_STATE_TOPIC, self.num_partitions,
                                  {"cleanup.policy": "compact", "compression.type": "uncompressed"})
        return topic

    def _partition_log(self, partition: int):
        return self._topic(create=True).partitions[partition].log

    # ------------------------------------------------------------------ cache access
    def get(self, transactional_id: str) -> TransactionMetadata | None:
        """getTransactionState: raises COORDINATOR_LOAD_IN_PROGRESS while loading."""
        if self.loading:
            raise CoordinatorError(Errors.COORDINATOR_LOAD_IN_PROGRESS)
        return self.cache.get(self.partition_for(transactional_id), {}).get(transactional_id)

    def put_if_not_exists(self, md: TransactionMetadata) -> TransactionMetadata:
        if self.loading:
            raise CoordinatorError(Errors.COORDINATOR_LOAD_IN_PROGRESS)
        part = self.cache.setdefault(self.partition_for(md.transactional_id), {})
        return part.setdefault(md.transactional_id, md)

    def all_metadata(self):
        for part in self.cache.values():
            yield from part.values()

    # ------------------------------------------------------------------ append
    def append_transaction_to_log(self, transactional_id: str, coordinator_epoch: int,
                                  transit: TxnTransitMetadata, retry_on_error=lambda e: False) -> int:
        """Append ``transit``, fsync, then complete the transition in the cache. Returns the
        error code the caller answers with (NONE on success); on error the pending state is
        reset unless ``retry_on_error(code)``."""
        md = self.get(transactional_id)
        if md is None:
            return Errors.NOT_COORDINATOR
        if coordinator_epoch != self.coordinator_epoch:
            return Errors.NOT_COORDINATOR
        now = now_ms()
        batch = rec.build_batch([(tlog.key_bytes(transactional_id),
                                  tlog.value_bytes(transit, self.transaction_version_level()), (), now)])
        error = Errors.NONE
        try:
            plog = self._partition_log(self.partition_for(transactional_id))
            plog.append(batch, origin=AppendOrigin.COORDINATOR, now_ms=now)
            plog.flush(now)   # durable before anyone is told
        except LogError as exc:
            error = _APPEND_ERRORS.get(Errors(exc.error_code), Errors(exc.error_code))
        except OSError as exc:
            log.error("txn log append for %s failed: %s", transactional_id, exc)
            error = Errors.NOT_COORDINATOR
        if error == Errors.NONE:
            if self.coordinator_epoch != coordinator_epoch:
                return Errors.NOT_COORDINATOR
            md.complete_transition_to(transit)
        elif not retry_on_error(error):
            md.pending_state = None
        return error

    # ------------------------------------------------------------------ load
    def _bump_coordinator_epoch(self) -> int:
        """Kafka's coordinator epoch is the __transaction_state partition's leader epoch. A
        restart of a single KRaft node moves it by two: the partition goes leaderless while the
        node is away and is led again when it is back (measured on 4.3.1: 0, then 2)."""
        epoch = 0
        if self._epoch_file.exists():
            text = self._epoch_file.read_text().strip()
            epoch = int(text) + 2 if text else 0
        replace_durably(self._epoch_file, str(epoch))
        return epoch

    def _read_partition(self, plog) -> dict[str, TransactionMetadata]:
        loaded: dict[str, TransactionMetadata] = {}
        offset = plog.log_start_offset
        end = plog.log_end_offset
        while offset < end:
            data = plog.read(offset, 1 << 20, max_offset=end, min_one_batch=True)
            if not data.records:
                break
            for h, body in rec.iter_log_batches(data.records):
                for r in rec.decode_records(body):
                    if r.key is None:
                        continue
                    tid = tlog.read_key(r.key)
                    if tid is None:
                        continue
                    md = tlog.read_value(tid, r.value)
                    if md is None:
                        loaded.pop(tid, None)
                    else:
                        loaded[tid] = md
                offset = h.last_offset + 1
        return loaded

    async def load(self) -> list[tuple[TransactionMetadata, TxnTransitMetadata, bool]]:
        """Read the whole txn log back at a new coordinator epoch. Returns the transactions to
        complete (metadata, prepared Complete* transition, commit?)."""
        self.loading = True
        self.coordinator_epoch = self._bump_coordinator_epoch()
        self.cache = {}
        pending = []
        topic = self._topic(create=False)
        if topic is not None:
            now = now_ms()
            for p in topic.partitions:
                loaded = self._read_partition(p.log)
                self.cache[p.index] = loaded
                for md in loaded.values():
                    if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                        pending.append((md, md.prepare_complete(now), md.state is S.PREPARE_COMMIT))
                await trio.sleep(0)   # let requests in meanwhile: they get LOAD_IN_PROGRESS
        self.loading = False
        log.info("transaction log loaded at coordinator epoch %d: %d ids, %d to complete",
                 self.coordinator_epoch, sum(len(c) for c in self.cache.values()), len(pending))
        return pending

    # ------------------------------------------------------------------ timers
    def timed_out_transactions(self, now: int) -> list[tuple[str, int, int]]:
        return [(md.transactional_id, md.producer_id, md.producer_epoch) for md in self.all_metadata()
                if md.pending_state is None and md.state is S.ONGOING
                and md.txn_start_timestamp + md.txn_timeout_ms < now]

    def remove_expired_transactional_ids(self, now: int) -> list[str]:
        """Tombstone ids idle for transactional.id.expiration.ms in Empty/Complete*."""
        removed = []
        for part, entries in self.cache.items():
            expired = [md for md in entries.values()
                       if md.pending_state is None and md.state.expiration_allowed
                       and md.txn_last_update_timestamp <= now - self.transactional_id_expiration_ms]
            if not expired:
                continue
            for md in expired:
                md.prepare_dead()
            batch = rec.build_batch([(tlog.key_bytes(md.transactional_id), None, (), now) for md in expired])
            try:
                plog = self._partition_log(part)
                plog.append(batch, origin=AppendOrigin.COORDINATOR, now_ms=now)
                plog.flush(now)
            except (LogError, OSError) as exc:
                log.warning("tombstones for expired transactional ids failed: %s", exc)
                for md in expired:
                    md.pending_state = None
                continue
            for md in expired:
                entries.pop(md.transactional_id, None)
                removed.append(md.transactional_id)
        return removed
