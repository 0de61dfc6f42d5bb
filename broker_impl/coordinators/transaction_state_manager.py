"""Kafka's TransactionStateManager: the transaction metadata cache and ``__transaction_state``.

- Every transition is appended to the partition of ``__transaction_state`` that the
  transactional id hashes to (Kafka's record format, see transaction_log), through the replica
  manager's ``append_records`` as that partition's leader with acks=all, and replicated to the
  ISR before the cache changes and before anyone is answered (``request.timeout.ms``: the
  transaction log is the coordinator's only memory across a crash or a failover). Durable as
  Kafka's is: written to the log (the page cache, which a kill -9 does not lose) and to the ISR;
  fsync follows the log's flush settings, as for any partition (Kafka's appendTransactionToLog
  forces none: a forced fsync here cost ~0.45 ms per transition, three per transaction, with
  the event loop blocked). Append errors are mapped as appendTransactionToLog does.
- The coordinator owns the partitions it leads, each at a *coordinator epoch* that markers
  carry and data partitions check (TRANSACTION_COORDINATOR_FENCED for an older one). In a
  cluster that epoch is the partition's leader epoch, and a broker elected leader of a
  partition loads it (:meth:`begin_load` / :meth:`load_partition`); a broker alone owns every
  partition, at an epoch bumped and made durable at each start (``transaction_coordinator_epoch``).
- Requests for an id of a partition being loaded get COORDINATOR_LOAD_IN_PROGRESS, of a
  partition not owned NOT_COORDINATOR. Partitions load one at a time, read off the event loop,
  as Kafka's single loader thread reads them. After a load, every transaction found in
  PrepareCommit/PrepareAbort is handed back for its markers to be written again (Kafka's
  loadTransactionsForTxnTopicPartition).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import trio

from ..cluster.durable_file import replace_durably
from ..features import finalized_features
from ..log import records as rec
from ..log.producer_state import AppendOrigin
from ..protocol.errors import Errors, KafkaError
from . import transaction_log as tlog
from .partitioner import partition_for
from .transaction_metadata import TransactionMetadata, TransactionState, TxnTransitMetadata

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
        self.append_timeout_ms = cfg.int("request.timeout.ms")
        #: partition -> coordinator epoch, for the partitions this coordinator owns (loaded)
        self.owned: dict[int, int] = {}
        #: partition -> the coordinator epoch it is being loaded at
        self.loading: dict[int, int] = {}
        self.cache: dict[int, dict[str, TransactionMetadata]] = {}
        #: Kafka loads ``__transaction_state`` partitions on one scheduler thread, one after
        #: another, while the request threads answer COORDINATOR_LOAD_IN_PROGRESS: the same here
        self._loader = trio.CapacityLimiter(1)
        self._epoch_file = Path(broker.data_dir) / "transaction_coordinator_epoch"

    # ------------------------------------------------------------------ basics
    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def transaction_version_level(self) -> int:
        """The finalized ``transaction.version`` (what ApiVersions advertises)."""
        return finalized_features(self.broker.config).get("transaction.version", 0)

    def validate_transaction_timeout_ms(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.max_timeout_ms

    def coordinator_epoch_of(self, transactional_id: str) -> int:
        """The coordinator epoch of the id's partition (-1 where it is not owned)."""
        return self.owned.get(self.partition_for(transactional_id), -1)

    def _partition(self, partition: int):
        """The ``__transaction_state`` partition (a one-node broker creates the topic on first
        use; in a cluster it exists wherever a partition of it is owned)."""
        topics = self.broker.topics
        topic = topics.get(tlog.TRANSACTION_STATE_TOPIC)
        if topic is None:
            if not topics.creates_topics:
                raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"{tlog.TRANSACTION_STATE_TOPIC} does not exist")
            partitions, _rf, configs = self.broker.topic_creator.internal_topic_settings(tlog.TRANSACTION_STATE_TOPIC)
            topic = topics.create(tlog.TRANSACTION_STATE_TOPIC, partitions, configs)
        return topic.partitions[partition]

    # ------------------------------------------------------------------ cache access
    def _owned_partition(self, transactional_id: str) -> int:
        p = self.partition_for(transactional_id)
        if p in self.loading:
            raise KafkaError(Errors.COORDINATOR_LOAD_IN_PROGRESS)
        if p not in self.owned:
            raise KafkaError(Errors.NOT_COORDINATOR)
        return p

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        """getTransactionState: COORDINATOR_LOAD_IN_PROGRESS while the id's partition loads,
        NOT_COORDINATOR when another broker owns it."""
        return self.cache[self._owned_partition(transactional_id)].get(transactional_id)

    def put_if_not_exists(self, md: TransactionMetadata) -> TransactionMetadata:
        part = self.cache[self._owned_partition(md.transactional_id)]
        return part.setdefault(md.transactional_id, md)

    def all_metadata(self):
        for p in list(self.owned):
            yield from list(self.cache.get(p, {}).values())

    # ------------------------------------------------------------------ append
    async def _append(self, partition: int, batch: bytes, now: int) -> Errors:
        """Append ``batch`` to our partition as its leader, wait for the ISR: the error the
        coordinator answers with (already mapped)."""
        try:
            part = self._partition(partition)
        except KafkaError as exc:
            return _APPEND_ERRORS.get(exc.error, exc.error)
        results = await self.broker.replica_manager.append_records(
            {part: batch}, acks=-1, timeout_ms=self.append_timeout_ms, origin=AppendOrigin.COORDINATOR,
            now=now)   # written and replicated before anyone is told
        err = results[part].error
        return _APPEND_ERRORS.get(err, err)

    async def append_transaction_to_log(self, transactional_id: str, coordinator_epoch: int,
                                        transit: TxnTransitMetadata, retry_on_error=lambda e: False) -> int:
        """Append ``transit`` (durable and replicated), then complete the transition in the
        cache. Returns the error code the caller answers with (NONE on success); on error the
        pending state is reset unless ``retry_on_error(code)``."""
        md = self.get(transactional_id)
        if md is None:
            return Errors.NOT_COORDINATOR
        p = self.partition_for(transactional_id)
        if coordinator_epoch != self.owned.get(p):
            return Errors.NOT_COORDINATOR
        now = now_ms()
        batch = rec.build_batch([(tlog.key_bytes(transactional_id),
                                  tlog.value_bytes(transit, self.transaction_version_level()), (), now)])
        error = await self._append(p, batch, now)
        if error == Errors.NONE:
            if self.owned.get(p) != coordinator_epoch:
                return Errors.NOT_COORDINATOR
            md.complete_transition_to(transit)
        elif not retry_on_error(error):
            md.pending_state = None
        return error

    # ------------------------------------------------------------------ ownership and load
    def bump_local_epoch(self) -> int:
        """A broker alone: the coordinator epoch of this start. Kafka's coordinator epoch is the
        __transaction_state partition's leader epoch, and a restart of a single KRaft node moves
        it by two: the partition goes leaderless while the node is away and is led again when it
        is back (measured on 4.3.1: 0, then 2)."""
        epoch = 0
        if self._epoch_file.exists():
            text = self._epoch_file.read_text().strip()
            epoch = int(text) + 2 if text else 0
        replace_durably(self._epoch_file, str(epoch))
        return epoch

    def begin_load(self, partition: int, coordinator_epoch: int) -> None:
        """Elected for ``partition``: requests for it wait (LOAD_IN_PROGRESS) until loaded."""
        self.owned.pop(partition, None)
        self.cache.pop(partition, None)
        self.loading[partition] = coordinator_epoch

    def resign(self, partition: int) -> None:
        """Another broker owns ``partition`` now: NOT_COORDINATOR for its ids from here on."""
        self.owned.pop(partition, None)
        self.loading.pop(partition, None)
        self.cache.pop(partition, None)

    def _read_partition(self, plog) -> dict[str, TransactionMetadata]:
        """The last state of every transactional id in ``plog``. Only the last record of a key
        counts (a tombstone removes it), so keys are kept raw and each surviving value decoded
        once: a partition written by one busy producer holds thousands of records of one id,
        and loading it is the window in which its producer is answered
        COORDINATOR_LOAD_IN_PROGRESS."""
        last: dict[bytes, bytes | None] = {}
        offset = plog.log_start_offset
        end = plog.log_end_offset
        while offset < end:
            data = plog.read(offset, 1 << 20, max_offset=end, min_one_batch=True)
            if not data.records:
                break
            for h, body in rec.iter_log_batches(data.records):
                for key, value in rec.record_keys_values(body):
                    if key is not None:
                        last[bytes(key)] = value
                offset = h.last_offset + 1
        loaded: dict[str, TransactionMetadata] = {}
        for key, value in last.items():
            tid = tlog.read_key(key)
            if tid is None:
                continue
            md = tlog.read_value(tid, value)
            if md is not None:
                loaded[tid] = md
        return loaded

    async def load_partition(self, partition: int, coordinator_epoch: int
                             ) -> list[tuple[TransactionMetadata, TxnTransitMetadata, bool]] | None:
        """Read ``partition`` back at ``coordinator_epoch``; then it is owned. Returns the
        transactions to complete (metadata, prepared Complete* transition, commit?), or None
        when the partition was lost or re-elected meanwhile."""
        async with self._loader:
            if self.loading.get(partition) != coordinator_epoch:
                return None
            topic = self.broker.topics.get(tlog.TRANSACTION_STATE_TOPIC)
            plog = topic.partitions[partition].log if topic is not None else None
            # read off the event loop: nothing appends to a partition while it loads, and
            # requests for it meanwhile get LOAD_IN_PROGRESS
            loaded = await trio.to_thread.run_sync(self._read_partition, plog) if plog is not None else {}
        if self.loading.get(partition) != coordinator_epoch:
            return None
        now = now_ms()
        pending = [(md, md.prepare_complete(now), md.state is S.PREPARE_COMMIT) for md in loaded.values()
                   if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)]
        del self.loading[partition]
        self.cache[partition] = loaded
        self.owned[partition] = coordinator_epoch
        if loaded or self.broker.is_cluster:
            log.info("%s-%d loaded at coordinator epoch %d: %d ids, %d to complete", tlog.TRANSACTION_STATE_TOPIC,
                     partition, coordinator_epoch, len(loaded), len(pending))
        return pending

    # ------------------------------------------------------------------ timers
    def timed_out_transactions(self, now: int) -> list[tuple[str, int, int]]:
        return [(md.transactional_id, md.producer_id, md.producer_epoch) for md in self.all_metadata()
                if md.pending_state is None and md.state is S.ONGOING
                and md.txn_start_timestamp + md.txn_timeout_ms < now]

    async def remove_expired_transactional_ids(self, now: int) -> list[str]:
        """Tombstone ids idle for transactional.id.expiration.ms in Empty/Complete*."""
        removed = []
        for part in list(self.owned):
            epoch = self.owned[part]
            entries = self.cache.get(part, {})
            expired = [md for md in entries.values()
                       if md.pending_state is None and md.state.expiration_allowed
                       and md.txn_last_update_timestamp <= now - self.transactional_id_expiration_ms]
            if not expired:
                continue
            for md in expired:
                md.prepare_dead()
            batch = rec.build_batch([(tlog.key_bytes(md.transactional_id), None, (), now) for md in expired])
            error = await self._append(part, batch, now)
            if error != Errors.NONE or self.owned.get(part) != epoch:
                log.warning("tombstones for expired transactional ids failed: %s", Errors(error).name)
                for md in expired:
                    md.pending_state = None
                continue
            for md in expired:
                entries.pop(md.transactional_id, None)
                removed.append(md.transactional_id)
        return removed
