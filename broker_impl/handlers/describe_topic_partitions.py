"""DescribeTopicPartitions (75, KIP-966): Metadata's topics and partitions, a page at a time.

Kafka 4.x's admin client describes topics with it when the broker advertises it (falling back
to Metadata otherwise), so that a describe of very many partitions is split into bounded
answers. What Kafka 4.3.1 does (``DescribeTopicPartitionsRequestHandler`` and
``KRaftMetadataCache.describeTopicResponse``), and so this broker:

- No topics named: every topic (at or after the cursor's topic name); a topic the principal may
  not DESCRIBE is left out without a word. Topics named: each distinct one at or after the
  cursor's; a refused one is answered TOPIC_AUTHORIZATION_FAILED (zero id, not internal, no
  partitions, no authorized operations) after all the others; one that does not exist
  UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name), without partitions.
- The answer lists topics by name (Java's string order) and carries at most
  ``min(response_partition_limit, max.request.partition.size.limit)`` partitions (at least
  one). A topic starts at partition 0, the cursor's topic at the cursor's partition index (past
  its last partition: the topic with no partitions, no error). The topic cut short ends the
  answer, next_cursor naming it and its first partition left out; when the limit is used up
  exactly at a topic's end, next_cursor names the next topic (whether or not it exists) at 0.
  next_cursor is null when everything was listed.
- A cursor whose topic is not among the topics named, or whose partition index is negative, is
  an invalid request: every topic named answered INVALID_REQUEST, nothing else. Without a cursor,
  a topic named "" (allowed to DESCRIBE) fails the same way with UNKNOWN_SERVER_ERROR: Kafka 4.3.1
  takes "" for the cursor's topic and reads the absent cursor's partition index (measured).
- Partitions carry no error (a leaderless one reads leader -1, error 0, unlike Metadata);
  offline_replicas are the replicas on brokers not alive. Eligible leader replicas and the last
  known ELR are empty lists, not null: this broker keeps no ELR; Kafka 4.3.1 finalizes
  eligible.leader.replicas.version 1 on a new cluster, but its lists stay empty while a
  partition's ISR has not shrunk below min.insync.replicas.
- Every listed topic carries its authorized operations (all of them without an authorizer);
  the request has no switch for it. is_internal goes by the name (Kafka's Topic.isInternal, which
  counts __share_group_state too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import handles
from .metadata import ZERO_UUID, offline_replicas
from ..cluster.authorizer import (TOPIC_OPERATIONS, AclOperation as Op, ResourceType as Res, allowed,
                                  authorized_operations)
from ..cluster.topics import KAFKA_INTERNAL_TOPICS, validate_topic_name
from ..protocol.errors import Errors, KafkaError

if TYPE_CHECKING:
    from ..server.broker import Broker


def _error_response(R, req, error: int):
    """KafkaApis' answer when the handler throws: each topic named, with the error, nothing else."""
    T = R.DescribeTopicPartitionsResponseTopic
    return R(throttle_time_ms=0, next_cursor=None, topics=[
        T(error_code=error, name=t.name, topic_id=ZERO_UUID, is_internal=False, partitions=[]) for t in req.topics])


def _java_order(name: str) -> bytes:
    """The sort key of Java's String.compareTo (UTF-16 code units), for names outside ASCII."""
    return name.encode("utf-16-be", "surrogatepass")


@handles("DescribeTopicPartitions")
async def handle_describe_topic_partitions(broker: Broker, ctx, req):
    R = ctx.api.Response
    cursor = req.cursor
    start_name = _java_order(cursor.topic_name) if cursor is not None else b""
    every_topic = not req.topics
    candidates = broker.topics.topics if every_topic else (t.name for t in req.topics)
    names = sorted({n for n in candidates if _java_order(n) >= start_name}, key=_java_order)
    if cursor is not None and ((not every_topic and cursor.topic_name not in names) or cursor.partition_index < 0):
        return _error_response(R, req, Errors.INVALID_REQUEST)
    described, refused = [], []
    for name in names:
        if allowed(broker, ctx, Op.DESCRIBE, Res.TOPIC, name):
            described.append(name)
        elif not every_topic:
            refused.append(R.DescribeTopicPartitionsResponseTopic(
                error_code=Errors.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=ZERO_UUID, is_internal=False,
                partitions=[]))
    if cursor is None and described[:1] == [""]:
        return _error_response(R, req, Errors.UNKNOWN_SERVER_ERROR)
    limit = max(1, min(broker.config.int("max.request.partition.size.limit"), req.response_partition_limit))
    first = {cursor.topic_name: cursor.partition_index} if cursor is not None else {}
    topics, next_cursor = _page(broker, R, described, first, limit, every_topic)
    for t in topics:
        t.topic_authorized_operations = authorized_operations(broker, ctx, Res.TOPIC, t.name, TOPIC_OPERATIONS)
    return R(throttle_time_ms=0, topics=topics + refused, next_cursor=next_cursor)


def _page(broker: Broker, R, names: list[str], first: dict[str, int], limit: int, every_topic: bool):
    """(the topics answered, next_cursor): ``names`` in order until ``limit`` partitions are
    listed; an unknown topic costs nothing and is answered only when it was named."""
    T = R.DescribeTopicPartitionsResponseTopic
    P = T.DescribeTopicPartitionsResponsePartition
    out, remaining = [], limit
    for name in names:
        if remaining == 0:
            return out, R.Cursor(topic_name=name, partition_index=0)
        topic = broker.topics.get(name)
        if topic is None:
            if not every_topic:
                try:
                    validate_topic_name(name)
                    error = Errors.UNKNOWN_TOPIC_OR_PARTITION
                except KafkaError as exc:
                    error = exc.error
                out.append(T(error_code=error, name=name, topic_id=ZERO_UUID,
                             is_internal=name in KAFKA_INTERNAL_TOPICS, partitions=[]))
            continue
        start = first.get(name, 0)
        # Kafka adds these as Java ints: a cursor near 2^31 wraps to a negative end, answered as
        # the topic with no partitions and a next_cursor at that negative index
        end = min(len(topic.partitions), (start + remaining + 2**31) % 2**32 - 2**31)
        parts = [P(error_code=Errors.NONE, partition_index=p.index, leader_id=p.leader, leader_epoch=p.leader_epoch,
                   replica_nodes=list(p.replicas), isr_nodes=list(p.isr), eligible_leader_replicas=[],
                   last_known_elr=[], offline_replicas=offline_replicas(broker, p))
                 for p in topic.partitions[start:end]]
        out.append(T(error_code=Errors.NONE, name=name, topic_id=topic.topic_id,
                     is_internal=name in KAFKA_INTERNAL_TOPICS, partitions=parts))
        if end < len(topic.partitions):
            return out, R.Cursor(topic_name=name, partition_index=end)
        remaining -= len(parts)
    return out, None
