"""The group coordinator's durable state: the internal topic ``__consumer_offsets``.

As in Kafka, every committed offset and every group-metadata change is one
compacted record in the partition that owns the group
(``partition_for(group, offsets.topic.num.partitions)``), appended through
the broker's own :class:`~broker_impl.log.partition_log.PartitionLog` with
COORDINATOR origin; the coordinator acknowledges a commit only after that
append returned. On start-up the coordinator reads the partitions back
(:meth:`OffsetsTopic.replay`) to rebuild its cache.

The topic is created lazily, on the first use of the coordinator, as Kafka
creates it on the first FindCoordinator for a group.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Iterator

from ..log import records as rec
from ..log.errors import LogError
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


def offset_append_error_to_response(code: int) -> Errors:
    """The same mapping for offset commits (``OffsetMetadataManager.normalizeException``):
    a too large batch reads INVALID_COMMIT_OFFSET_SIZE."""
    e = Errors(code)
    if e in (Errors.MESSAGE_TOO_LARGE, Errors.RECORD_LIST_TOO_LARGE, Errors.INVALID_FETCH_SIZE):
        return Errors.INVALID_COMMIT_OFFSET_SIZE
    return append_error_to_response(code)


class OffsetsTopic:
    def __init__(self, config: BrokerConfig, topics: TopicRegistry):
        self.topics = topics
        self.num_partitions = config.int("offsets.topic.num.partitions")

    @property
    def topic(self):
        return self.topics.get(OFFSETS_TOPIC)

    def exists(self) -> bool:
        return self.topic is not None

    def ensure(self):
        """Create ``__consumer_offsets`` (compacted) if it does not exist yet."""
        t = self.topic
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
        batch's base offset. Raises :class:`KafkaError` with the log's error code."""
        if not records:
            return -1
        t = self.ensure()
        plog = t.partitions[partition_for(group_id, len(t.partitions))].log
        now = int(time.time() * 1000)
        batch = rec.build_batch([(k, v, (), now) for k, v in records], base_timestamp=now,
                                producer_id=producer_id, producer_epoch=producer_epoch,
                                is_transactional=transactional)
        try:
            info = plog.append(batch, origin=AppendOrigin.COORDINATOR, now_ms=now)
        except LogError as exc:
            raise KafkaError(Errors(exc.error_code), exc.message) from None
        return info.first_offset

    def replay(self) -> Iterator[tuple[int, object, list]]:
        """``(partition, batch header, records)`` for every batch of every partition, in
        offset order (control batches included: transactional offsets need the markers)."""
        t = self.topic
        if t is None:
            return
        for p in t.partitions:
            plog = p.log
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
