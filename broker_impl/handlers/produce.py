"""Produce (0): validate each partition's batch, append it, answer per partition.

The hot path: per partition one header parse, one CRC32C, one producer-state
check and one file write; records inside a batch are never walked. acks=0
gets no response at all, as in Kafka. This broker is the only replica, so
acks=1 and acks=all are answered once the append reached the segment file
(and fsync per log.flush.interval.*), exactly when Kafka's leader with no
followers would answer.

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
from ..protocol.codegen import ProtocolError
from ..protocol.errors import Errors

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


@handles("Produce", min_version=3, advertised_min=0)
async def handle_produce(broker: Broker, ctx, req):
    R = ctx.api.Response
    T = R.TopicProduceResponse
    P = T.PartitionProduceResponse
    acks = req.acks
    by_id = ctx.version >= 13
    out = []
    appended = False
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
            plog = topic.partitions[pd.index].log
            if pd.records is None:
                raise ProtocolError(f"null records for {td.name}-{pd.index}")
            try:
                err = await txn.verify_produce(ctx, req, topic, pd)
                if err is not None:
                    parts.append(_partition_error(P, pd.index, err,
                                                  _NOT_IN_TRANSACTION if err == Errors.INVALID_TXN_STATE else None))
                    continue
                result = plog.append(pd.records, api_version=ctx.version, now_ms=now_ms)
            except LogError as exc:
                part = _partition_error(P, pd.index, exc.error_code,
                                        exc.message if isinstance(exc, InvalidTimestampError) else None)
                if exc.error not in _NO_LOG_START and not isinstance(exc, InvalidRequestRecordsError):
                    part.log_start_offset = plog.log_start_offset
                parts.append(part)
                continue
            appended = appended or not result.duplicate
            parts.append(P(index=pd.index, error_code=0, base_offset=result.first_offset,
                           log_append_time_ms=result.log_append_time, log_start_offset=result.log_start_offset))
        out.append(T(name=td.name, topic_id=td.topic_id, partition_responses=parts))
    if appended:
        broker.notify_append()
    if acks == 0:
        return None
    return R(responses=out, throttle_time_ms=0)
