"""DeleteRecords (21): move a partition's log start offset forward (Kafka's
KafkaApis.handleDeleteRecordsRequest, ReplicaManager.deleteRecords, DelayedDeleteRecords).

Why a broker of a conformance suite has it: Kafka Streams purges its repartition topics with it,
Admin.deleteRecords is how operators trim a topic, and what the log start offset does to the
rest of the log is transactional state too -- since 2.4 (KAFKA-7190, KIP-360) an idempotent
producer whose records were all deleted keeps its producer state and continues its sequence;
before, it was forgotten and its next batch was refused with UNKNOWN_PRODUCER_ID.

Per partition, in Kafka's order: DELETE on the topic (TOPIC_AUTHORIZATION_FAILED), the partition
exists (UNKNOWN_TOPIC_OR_PARTITION), not an internal topic (INVALID_TOPIC_EXCEPTION), not a
compact-only topic (POLICY_VIOLATION), this broker leads it (NOT_LEADER_OR_FOLLOWER), the offset
(-1 = the high watermark) is between 0 and the high watermark (OFFSET_OUT_OF_RANGE). The
answer's low watermark is the lowest log start offset of the replicas on alive brokers: the
response waits (up to timeout_ms, then REQUEST_TIMED_OUT with the leader's own start) until
every such follower has moved its start too -- a follower learns the leader's start from its
fetch responses and reports its own in its fetch requests. An error answers low watermark -1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from . import handles, partition_or_error
from ..protocol.errors import Errors, KafkaError
from ..cluster.authorizer import AclOperation as Op, ResourceType as Res, allowed

if TYPE_CHECKING:
    from ..server.broker import Broker


def _compact_only(configs) -> bool:
    policies = {p.strip() for p in (configs or {}).get("cleanup.policy", "delete").split(",")}
    return "delete" not in policies


@handles("DeleteRecords")
async def handle_delete_records(broker: Broker, ctx, req):
    R = ctx.api.Response
    T = R.DeleteRecordsTopicResult
    P = T.DeleteRecordsPartitionResult
    out = []
    waits = []   # (partition result, partition, requested offset)
    for t in req.topics:
        topic = broker.topics.get(t.name)
        deletable = allowed(broker, ctx, Op.DELETE, Res.TOPIC, t.name)
        parts = []
        for p in t.partitions:
            pr = P(partition_index=p.partition_index, low_watermark=-1, error_code=0)
            parts.append(pr)
            part, err = partition_or_error(topic, p.partition_index, deletable)
            if err is not None:
                pr.error_code = err
                continue
            if topic.internal:
                pr.error_code = Errors.INVALID_TOPIC_EXCEPTION
                continue
            if _compact_only(topic.configs):
                pr.error_code = Errors.POLICY_VIOLATION
                continue
            try:
                wanted = part.delete_records_on_leader(p.offset)
            except KafkaError as exc:   # the log's refusals (OffsetOutOfRangeError) are KafkaErrors too
                pr.error_code = exc.error
                continue
            low = part.low_watermark()
            if low >= wanted:
                pr.low_watermark = low
            else:
                waits.append((pr, part, wanted))
        out.append(T(name=t.name, partitions=parts))
    if waits:
        async def wait(pr, part, wanted):
            pr.error_code, pr.low_watermark = await part.wait_for_low_watermark(wanted, req.timeout_ms)

        async with trio.open_nursery() as nursery:
            for w in waits:
                nursery.start_soon(wait, *w)
    return R(throttle_time_ms=0, topics=out)
