"""Produce (0): the request's partitions to ReplicaManager.append_records, its answers to the wire.

What is checked here is the request's own shape, in this order, per partition: ``acks`` (0, 1
or -1, else INVALID_REQUIRED_ACKS everywhere), the topic (by name, or by id from v13:
UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID), internal topics (INVALID_TOPIC_EXCEPTION, with
Kafka's message), the partition index, and null records (refused as a malformed request: Kafka's
own answer is an NPE in its error path and no answer at all, docs/wirediff.md). The rest --
leadership, the transaction's verification (KIP-890), min ISR, the log's checks, the acks wait
-- is the replica manager's (server/replica_manager), which answers every partition it was given.
acks=0 gets no response at all, as in Kafka.

Error fields as Kafka 4.3.1 fills them (measured with ``kconform diff``): ``error_message`` is
null except where Kafka has a message of its own (a partition not in the transaction, a record
refused for its timestamp, an internal topic); ``log_start_offset`` is the partition's for an
error its log raised (out-of-order sequence, fenced epoch...), -1 for a partition that is
unknown or whose records were refused before the log. NOT_LEADER_OR_FOLLOWER names the leader
this broker knows of in ``current_leader`` / ``node_endpoints`` (KIP-951), so the client need
not ask Metadata.

Versions 0-2 are advertised (Kafka 4 does so for librdkafka's sake, see KAFKA-18659) but
refused, like Kafka 4 refuses them.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from . import handles
from ..cluster.append import PartitionResponse, TransactionSupportedOperation, TxnVerification
from ..cluster.partition import Partition
from ..log.producer_state import AppendOrigin
from ..log.records import transactional_batch_header
from ..protocol.codegen import ProtocolError
from ..protocol.errors import Errors
from ..cluster.authorizer import AclOperation as Op, ResourceType as Res, allowed

if TYPE_CHECKING:
    from ..server.broker import Broker

_VALID_ACKS = (0, 1, -1)


def _refused(acks: int, topic, pd, by_id: bool, writable: bool) -> PartitionResponse | None:
    """The request's own refusal of one of its partitions (None: it goes to the append)."""
    if acks not in _VALID_ACKS:
        return PartitionResponse(Errors.INVALID_REQUIRED_ACKS)
    if not writable:
        return PartitionResponse(Errors.TOPIC_AUTHORIZATION_FAILED)
    if topic is None:
        return PartitionResponse(Errors.UNKNOWN_TOPIC_ID if by_id else Errors.UNKNOWN_TOPIC_OR_PARTITION)
    if topic.internal:
        return PartitionResponse(Errors.INVALID_TOPIC_EXCEPTION, error_message=f"Cannot append to internal topic {topic.name}")
    if not 0 <= pd.index < len(topic.partitions):
        return PartitionResponse(Errors.UNKNOWN_TOPIC_OR_PARTITION)
    if pd.records is None:
        raise ProtocolError(f"null records for {topic.name}-{pd.index}")
    return None


@handles("Produce", min_version=3, advertised_min=0)
async def handle_produce(broker: Broker, ctx, req):
    by_id = ctx.version >= 13
    tid = getattr(req, "transactional_id", None)
    if broker.authorizer is not None and _has_transactional_records(req) and (
            tid is None or not allowed(broker, ctx, Op.WRITE, Res.TRANSACTIONAL_ID, tid)):
        # KafkaApis: transactional records need WRITE on the transactional id, else every
        # partition of the request is refused
        return _every_partition(ctx, req, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    entries: dict[Partition, object] = {}
    requested = []          # per topic: its data, and per partition the Partition or its refusal
    for td in req.topic_data:
        topic = broker.topics.by_id.get(bytes(td.topic_id)) if by_id else broker.topics.get(td.name)
        # WRITE on the topic (an unknown topic id is looked up first: no name to check)
        writable = (by_id and topic is None) or allowed(broker, ctx, Op.WRITE, Res.TOPIC,
                                                          topic.name if topic is not None else td.name)
        parts = []
        for pd in td.partition_data:
            answer = _refused(req.acks, topic, pd, by_id, writable)
            if answer is None:
                answer = topic.partitions[pd.index]
                entries[answer] = pd.records
            parts.append((pd.index, answer))
        requested.append((td, parts))
    results = {}
    if entries:
        verification = None if tid is None else TxnVerification(tid, TransactionSupportedOperation.for_produce(ctx.version))
        results = await broker.replica_manager.append_records(
            entries, acks=req.acks, timeout_ms=req.timeout_ms, origin=AppendOrigin.CLIENT, verification=verification,
            api_version=ctx.version, now=int(time.time() * 1000))
    if req.acks == 0:
        return None
    R = ctx.api.Response
    T = R.TopicProduceResponse
    P = T.PartitionProduceResponse
    endpoints: dict = {}

    def wire(index: int, r: PartitionResponse, part: Partition | None):
        pr = P(index=index, error_code=r.error, base_offset=r.base_offset, log_append_time_ms=r.log_append_time,
               log_start_offset=r.log_start_offset, error_message=r.error_message)
        if r.error == Errors.NOT_LEADER_OR_FOLLOWER:
            hint = broker.replica_manager.leader_hint(part)
            if hint is not None:
                leader, epoch, host, port = hint
                pr.current_leader = P.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
                endpoints[leader] = R.NodeEndpoint(node_id=leader, host=host, port=port, rack=None)
        return pr

    out = [T(name=td.name, topic_id=td.topic_id,
             partition_responses=[wire(index, results[a], a) if isinstance(a, Partition) else wire(index, a, None)
                                  for index, a in parts])
           for td, parts in requested]
    return R(responses=out, throttle_time_ms=0, node_endpoints=list(endpoints.values()))


def _has_transactional_records(req) -> bool:
    """Kafka's RequestUtils.hasTransactionalRecords: the first batch of a partition is transactional."""
    return any(transactional_batch_header(pd.records) is not None
               for td in req.topic_data for pd in td.partition_data)


def _every_partition(ctx, req, err: int):
    """Kafka's ProduceRequest.getErrorResponse: the error on every partition of the request."""
    if req.acks == 0:
        return None
    R = ctx.api.Response
    T = R.TopicProduceResponse
    P = T.PartitionProduceResponse
    return R(throttle_time_ms=0, node_endpoints=[], responses=[
        T(name=td.name, topic_id=td.topic_id, partition_responses=[
            P(index=pd.index, error_code=err, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1)
            for pd in td.partition_data])
        for td in req.topic_data])
