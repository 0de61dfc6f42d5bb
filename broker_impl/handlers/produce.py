"""Produce (0): validate each partition's batch, append it as the leader, answer per partition.

The hot path: per partition one header parse, one CRC32C, one producer-state check and one file
write; records inside a batch are never walked. acks=0 gets no response at all, as in Kafka.

Only the partition's leader appends (NOT_LEADER_OR_FOLLOWER elsewhere, with the leader it knows
of in ``current_leader`` / ``node_endpoints``, KIP-951, so the client need not ask Metadata).
acks=1 is answered once the leader's segment file has the batch; acks=all is refused with
NOT_ENOUGH_REPLICAS while the ISR is below ``min.insync.replicas``, and otherwise answered once
the high watermark passed the batch (cluster/partition, Kafka's DelayedProduce): within the
request's ``timeout_ms`` or REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR
shrank below min ISR meanwhile. A one-node broker is its own ISR: acks=all returns at once.

Versions 0-2 are advertised (Kafka 4 does so for librdkafka's sake, see
KAFKA-18659) but refused, like Kafka 4 refuses them.

Error fields as Kafka 4.3.1 fills them (measured with ``kconform diff``): ``error_message`` is
null except where Kafka has a message of its own (a partition not in the transaction, a record
refused for its timestamp); ``log_start_offset`` is the partition's for an error its log raised
(out-of-order sequence, fenced epoch...), -1 for a partition that is unknown or whose records
were refused before the log (ProduceRequest.validateRecords, too large, corrupt). A null
``records`` is refused as a malformed request: Kafka's own answer is an NPE in its error path
and no answer at all (docs/wirediff.md).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from . import handles
from ..log.errors import InvalidRequestRecordsError, InvalidTimestampError, LogError
from ..log.producer_state import AppendOrigin
from ..protocol.codegen import ProtocolError
from ..protocol.errors import Errors, KafkaError

if TYPE_CHECKING:
    from ..server.broker import Broker

_VALID_ACKS = (0, 1, -1)
#: Log errors Kafka answers without the log start offset (ReplicaManager.appendToLocalLog: the
#: records never reached the partition's log).
_NO_LOG_START = frozenset({Errors.MESSAGE_TOO_LARGE, Errors.RECORD_LIST_TOO_LARGE, Errors.CORRUPT_MESSAGE,
                           Errors.KAFKA_STORAGE_ERROR})
#: Kafka's message for a transactional batch to a partition the transaction does not have.
_NOT_IN_TRANSACTION = "Partition was not added to the transaction"


def _partition_error(P, index: int, error: int, message: str | None = None):
    return P(index=index, error_code=error, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1,
             error_message=message)


def _not_leader(broker: Broker, R, P, part, index: int, endpoints: dict):
    """NOT_LEADER_OR_FOLLOWER with the leader this broker knows of (KIP-951)."""
    pr = _partition_error(P, index, Errors.NOT_LEADER_OR_FOLLOWER)
    hint = broker.replica_manager.leader_hint(part)
    if hint is not None:
        leader, epoch, host, port = hint
        pr.current_leader = P.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
        endpoints[leader] = R.NodeEndpoint(node_id=leader, host=host, port=port, rack=None)
    return pr


@handles("Produce", min_version=3, advertised_min=0)
async def handle_produce(broker: Broker, ctx, req):
    R = ctx.api.Response
    T = R.TopicProduceResponse
    P = T.PartitionProduceResponse
    acks = req.acks
    by_id = ctx.version >= 13
    out = []
    waits = []          # (partition response, partition, offset the HW must reach)
    endpoints: dict = {}
    txn = broker.txn_coordinator
    now_ms = int(time.time() * 1000)
    for td in req.topic_data:
        topic = broker.topics.by_id.get(bytes(td.topic_id)) if by_id else broker.topics.get(td.name)
        parts = []
        for pd in td.partition_data:
            if acks not in _VALID_ACKS:
                parts.append(_partition_error(P, pd.index, Errors.INVALID_REQUIRED_ACKS))
                continue
            if topic is None:
                parts.append(_partition_error(P, pd.index,
                                              Errors.UNKNOWN_TOPIC_ID if by_id else Errors.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            if topic.internal:
                parts.append(_partition_error(P, pd.index, Errors.INVALID_TOPIC_EXCEPTION,
                                              f"Cannot append to internal topic {topic.name}"))
                continue
            if not 0 <= pd.index < len(topic.partitions):
                parts.append(_partition_error(P, pd.index, Errors.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            part = topic.partitions[pd.index]
            if not part.is_leader:
                parts.append(_not_leader(broker, R, P, part, pd.index, endpoints))
                continue
            if pd.records is None:
                raise ProtocolError(f"null records for {td.name}-{pd.index}")
            try:
                err = await txn.verify_produce(ctx, req, topic, pd)
                if err is not None:
                    parts.append(_partition_error(P, pd.index, err,
                                                  _NOT_IN_TRANSACTION if err == Errors.INVALID_TXN_STATE else None))
                    continue
                result = part.append_records_to_leader(pd.records, origin=AppendOrigin.CLIENT, required_acks=acks,
                                                       api_version=ctx.version, now=now_ms)
            except LogError as exc:
                pr = _partition_error(P, pd.index, exc.error_code,
                                      exc.message if isinstance(exc, InvalidTimestampError) else None)
                if exc.error not in _NO_LOG_START and not isinstance(exc, InvalidRequestRecordsError):
                    pr.log_start_offset = part.log.log_start_offset
                parts.append(pr)
                continue
            except KafkaError as exc:
                if exc.error == Errors.NOT_LEADER_OR_FOLLOWER:
                    parts.append(_not_leader(broker, R, P, part, pd.index, endpoints))
                else:
                    parts.append(_partition_error(P, pd.index, exc.error, exc.message))
                continue
            pr = P(index=pd.index, error_code=0, base_offset=result.first_offset,
                   log_append_time_ms=result.log_append_time, log_start_offset=result.log_start_offset)
            parts.append(pr)
            if acks == -1:
                waits.append((pr, part, result.last_offset + 1))
        out.append(T(name=td.name, topic_id=td.topic_id, partition_responses=parts))
    if acks == 0:
        return None
    if waits:
        errors = await broker.replica_manager.wait_for_acks([(part, o) for _, part, o in waits], req.timeout_ms)
        for (pr, _part, _o), err in zip(waits, errors):
            pr.error_code = err
    return R(responses=out, throttle_time_ms=0, node_endpoints=list(endpoints.values()))
