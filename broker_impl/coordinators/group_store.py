"""The group coordinator's durable state: the internal topic ``__consumer_offsets``.

As in Kafka, every committed offset and every group-metadata change is one compacted record in
the partition that owns the group (``partition_for(group, offsets.topic.num.partitions)``),
appended as that partition's leader through the replica manager in two halves, as Kafka's
CoordinatorPartitionWriter writes and its runtime then waits for the high watermark: the append
at once (``append_records_to_leader``, COORDINATOR origin, refused below min ISR), and the
acknowledgement only once the ISR has it (:meth:`OffsetsTopic.await_replicated`: the replica
manager's ``wait_for_acks`` within ``offsets.commit.timeout.ms``) -- at once on a one-node broker.
When it becomes leader of a partition the coordinator reads it back (:meth:`OffsetsTopic.replay`)
to rebuild its cache. A failed write reads as the group coordinator answers it
(``append_error_to_response`` and its kin below).

The topic is created on the first FindCoordinator for a group, as in Kafka
(server/topic_creation); a one-node broker also creates it on first use.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Iterator

from ..log import records as rec
from ..log.producer_state import AppendOrigin
from ..protocol.errors import Errors, KafkaError
from .partitioner import partition_for

if TYPE_CHECKING:
    from ..cluster.topics import TopicRegistry
    from ..config import BrokerConfig

log = logging.getLogger("kconform.broker.group.store")

OFFSETS_TOPIC = "__consumer_offsets"
_READ_CHUNK = 1 << 20


def append_error_to_response(code: int) -> Errors:
    """Kafka's mapping of a failed coordinator append to the error a client sees
    (``GroupMetadataManager.appendGroupMetadataErrorToResponseError``)."""
    e = Errors(code)
    if e in (Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_ENOUGH_REPLICAS,
             Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, Errors.REQUEST_TIMED_OUT):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if e is Errors.NOT_LEADER_OR_FOLLOWER:
        return Errors.NOT_COORDINATOR
    if e in (Errors.MESSAGE_TOO_LARGE, Errors.RECORD_LIST_TOO_LARGE, Errors.INVALID_FETCH_SIZE):
        return Errors.UNKNOWN_SERVER_ERROR
    return e


def operation_error_to_response(code: int) -> Errors:
    """The group coordinator's mapping of a failed operation (CoordinatorOperationExceptionHelper.
    handleOperationException), for TxnOffsetCommit's verification of the offsets partition:
    NETWORK_EXCEPTION -- no answer from the transaction's coordinator -- reads
    COORDINATOR_LOAD_IN_PROGRESS (retried without a coordinator lookup), a failed storage
    NOT_COORDINATOR, the rest as a failed append."""
    e = Errors(code)
    if e is Errors.NETWORK_EXCEPTION:
        return Errors.COORDINATOR_LOAD_IN_PROGRESS
    if e is Errors.KAFKA_STORAGE_ERROR:
        return Errors.NOT_COORDINATOR
    return append_error_to_response(e)


def offset_append_error_to_response(code: int) -> Errors:
    """The same mapping for offset commits (``OffsetMetadataManager.normalizeException``):
    a too large batch reads INVALID_COMMIT_OFFSET_SIZE."""
    e = Errors(code)
    if e in (Errors.MESSAGE_TOO_LARGE, Errors.RECORD_LIST_TOO_LARGE, Errors.INVALID_FETCH_SIZE):
        return Errors.INVALID_COMMIT_OFFSET_SIZE
    return append_error_to_response(code)


class OffsetsTopic:
    def __init__(self, config: BrokerConfig, topics: TopicRegistry, replica_manager):
        self.topics = topics
        #: server/replica_manager.ReplicaManager: every append, and the wait for the ISR
        self.replica_manager = replica_manager
        self.num_partitions = config.int("offsets.topic.num.partitions")
        self.commit_timeout_ms = config.int("offsets.commit.timeout.ms")

    @property
    def topic(self):
        return self.topics.get(OFFSETS_TOPIC)

    def exists(self) -> bool:
        return self.topic is not None

    def ensure(self):
        """Create ``__consumer_offsets`` (compacted) if it does not exist yet."""
        t = self.topic
        if t is None and not self.topics.creates_topics:
            raise KafkaError(Errors.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC} does not exist yet")
        if t is None:
            t = self.topics.create(OFFSETS_TOPIC, self.num_partitions, {"cleanup.policy": "compact"})
            log.info("created %s with %d partitions", OFFSETS_TOPIC, self.num_partitions)
        # An existing topic keeps its partition count (Kafka reads it from the topic too).
        self.num_partitions = len(t.partitions)
        return t

    def partition_for(self, group_id: str) -> int:
        t = self.topic
        n = len(t.partitions) if t is not None else self.num_partitions
        return partition_for(group_id, n)

    def append(self, group_id: str, records: list[tuple[bytes, bytes | None]], *,
               producer_id: int = rec.NO_PRODUCER_ID, producer_epoch: int = rec.NO_PRODUCER_EPOCH,
               transactional: bool = False) -> int:
        """Append ``(key, value)`` records in one batch to the group's partition; returns the
        batch's base offset. Raises :class:`KafkaError` with the append's error."""
        if not records:
            return -1
        t = self.ensure()
        part = t.partitions[partition_for(group_id, len(t.partitions))]
        now = int(time.time() * 1000)
        batch = rec.build_batch([(k, v, (), now) for k, v in records], base_timestamp=now,
                                producer_id=producer_id, producer_epoch=producer_epoch,
                                is_transactional=transactional)
        result = self.replica_manager.append_records_to_leader({part: batch}, origin=AppendOrigin.COORDINATOR,
                                                               required_acks=-1, now=now)[part]
        if result.error != Errors.NONE:
            raise KafkaError(result.error, result.error_message)
        return result.base_offset

    async def await_replicated(self, group_id: str) -> Errors:
        """Everything appended to the group's partition so far is replicated to the ISR (the
        acks=all wait of Kafka's coordinator appends): NONE, or the error a client sees
        (COORDINATOR_NOT_AVAILABLE on a timeout, NOT_COORDINATOR once no longer the leader)."""
        t = self.topic
        if t is None:
            return Errors.NONE
        part = t.partitions[partition_for(group_id, len(t.partitions))]
        if part.log is None:
            return Errors.NOT_COORDINATOR
        err = (await self.replica_manager.wait_for_acks({part: part.log.log_end_offset}, self.commit_timeout_ms))[part]
        return Errors.NONE if err == Errors.NONE else append_error_to_response(err)

    def replay(self, partitions=None) -> Iterator[tuple[int, object, list]]:
        """``(partition, batch header, records)`` for every batch of ``partitions`` (default:
        all), in offset order (control batches included: transactional offsets need the
        markers)."""
        t = self.topic
        if t is None:
            return
        for p in t.partitions:
            if partitions is not None and p.index not in partitions:
                continue
            plog = p.log
            if plog is None:
                continue
            offset = plog.log_start_offset
            end = plog.log_end_offset
            while offset < end:
                data = plog.read(offset, _READ_CHUNK)
                if not data.records:
                    break
                last = offset
                for h, batch in rec.iter_log_batches(data.records):
                    if h.next_offset <= offset:
                        continue
                    yield p.index, h, rec.decode_records(batch)
                    last = h.next_offset
                if last <= offset:
                    break
                offset = last
