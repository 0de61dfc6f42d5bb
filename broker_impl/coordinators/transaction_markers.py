"""Kafka's TransactionMarkerChannelManager, for a broker that leads every partition itself.

After PrepareCommit/PrepareAbort is durable, a COMMIT/ABORT control batch is written to every
partition of the transaction (with the producer id, the producer epoch after the Prepare
transition, and the coordinator epoch), then CompleteCommit/CompleteAbort is appended to the
transaction log. Kafka sends WriteTxnMarkers to each partition leader; here every leader is
this broker, so the markers go straight to the partition logs — through :func:`write_marker`,
which the WriteTxnMarkers handler uses too.

Per-partition outcomes follow TransactionMarkerRequestCompletionHandler:
- INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED: stop, this transaction "can now be
  ignored" (it stays in Prepare* until the coordinator reloads, as in Kafka);
- the partition's topic is gone: the partition is dropped from the transaction;
- anything else (storage errors): retried after a backoff until it succeeds.
Transactional offsets (``__consumer_offsets``) are materialised or discarded by the group
coordinator (``complete_txn_offsets``), as Kafka's WriteTxnMarkers handler does.
"""

from __future__ import annotations

import logging

import trio

from ..faults import FAULTS
from ..log.errors import LogError
from ..protocol.errors import Errors
from .group_store import OFFSETS_TOPIC as GROUP_METADATA_TOPIC
from .transaction_metadata import TransactionMetadata, TxnTransitMetadata

log = logging.getLogger("kconform.txn.markers")
RETRY_BACKOFF_S = 0.1


class TransactionMarkerChannelManager:
    def __init__(self, broker, state_manager):
        self.broker = broker
        self.txn_manager = state_manager
        self.in_flight: dict[str, trio.Event] = {}

    def add_txn_markers_to_send(self, coordinator_epoch: int, commit: bool, md: TransactionMetadata,
                                complete: TxnTransitMetadata) -> trio.Event:
        """Start writing the markers of ``md`` in the background; the event fires when the
        transaction is complete (or sending was given up)."""
        done = trio.Event()
        self.in_flight[md.transactional_id] = done
        self.broker.nursery.start_soon(self._run, coordinator_epoch, commit, md, complete, done)
        return done

    async def _run(self, coordinator_epoch, commit, md, complete, done) -> None:
        try:
            if await self._write_markers(coordinator_epoch, commit, md):
                await self._write_completion(coordinator_epoch, md, complete)
        finally:
            if self.in_flight.get(md.transactional_id) is done:
                del self.in_flight[md.transactional_id]
            done.set()

    async def _write_markers(self, coordinator_epoch: int, commit: bool, md: TransactionMetadata) -> bool:
        partitions = sorted(md.topic_partitions)
        written = 0
        group_offsets = False
        for tp in partitions:
            topic, index = tp
            if topic == GROUP_METADATA_TOPIC:
                group_offsets = True
            while True:
                if self.txn_manager.coordinator_epoch != coordinator_epoch:
                    return False
                error = write_marker(self.broker, topic, index, commit, md.producer_id, md.producer_epoch,
                                     coordinator_epoch, md.client_transaction_version)
                if error in (Errors.NONE, Errors.UNKNOWN_TOPIC_OR_PARTITION):
                    break
                if error in (Errors.INVALID_PRODUCER_EPOCH, Errors.TRANSACTION_COORDINATOR_FENCED):
                    log.info("markers of %s stopped on %s-%d: %s", md.transactional_id, topic, index,
                             Errors(error).name)
                    return False
                log.warning("marker for %s on %s-%d failed (%s); retrying", md.transactional_id, topic,
                            index, Errors(error).name)
                await trio.sleep(RETRY_BACKOFF_S)
            md.remove_partition(tp)
            written += 1
            if FAULTS.armed and written < len(partitions):
                await FAULTS.reach("after_some_markers", f"{md.transactional_id} {written}/{len(partitions)}")
        if group_offsets:
            complete_group_offsets(self.broker, md.producer_id, commit)
        self.broker.notify_append()
        if FAULTS.armed:
            await FAULTS.reach("after_all_markers", md.transactional_id)
        return True

    async def _write_completion(self, coordinator_epoch: int, md: TransactionMetadata,
                                complete: TxnTransitMetadata) -> None:
        tm = self.txn_manager
        while True:
            if tm.loading or tm.coordinator_epoch != coordinator_epoch or tm.get(md.transactional_id) is not md:
                log.info("no longer the coordinator of %s at epoch %d: Complete not written",
                         md.transactional_id, coordinator_epoch)
                return
            error = tm.append_transaction_to_log(md.transactional_id, coordinator_epoch, complete,
                                                 retry_on_error=lambda e: e == Errors.COORDINATOR_NOT_AVAILABLE)
            if error == Errors.NONE:
                break
            if error != Errors.COORDINATOR_NOT_AVAILABLE:
                log.error("Complete of %s not written: %s", md.transactional_id, Errors(error).name)
                return
            await trio.sleep(RETRY_BACKOFF_S)
        if FAULTS.armed:
            await FAULTS.reach("after_complete", md.transactional_id)


def write_marker(broker, topic: str, index: int, commit: bool, producer_id: int, producer_epoch: int,
                 coordinator_epoch: int, transaction_version: int) -> int:
    """One COMMIT/ABORT marker on one partition of this broker; an error code. Both the
    coordinator's marker sending and the WriteTxnMarkers handler write markers through here."""
    partition = broker.topics.partition(topic, index)
    if partition is None:
        return Errors.UNKNOWN_TOPIC_OR_PARTITION
    try:
        partition.log.append_control_marker(
            commit, producer_id=producer_id, producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch, transaction_version=transaction_version)
    except LogError as exc:
        return exc.error_code
    except OSError:
        return Errors.KAFKA_STORAGE_ERROR
    return Errors.NONE


def complete_group_offsets(broker, producer_id: int, commit: bool) -> None:
    """A marker reached ``__consumer_offsets``: the group coordinator materialises (COMMIT) or
    drops (ABORT) the producer's transactional offsets, as Kafka's WriteTxnMarkers handler
    has it do."""
    broker.group_coordinator.complete_txn_offsets(producer_id, commit)
