"""DescribeCluster (60) and OffsetForLeaderEpoch (23): what a one-node cluster says.

The embedded broker has one leader epoch per partition (0: it never changes
leader), so the end offset of that epoch is the log end offset, and any
later epoch is unknown (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET), as Kafka
answers for an epoch it has not seen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import handles
from ..protocol.errors import Errors
from .metadata import NO_AUTHORIZED_OPS

if TYPE_CHECKING:
    from ..server.broker import Broker

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@handles("DescribeCluster")
async def handle_describe_cluster(broker: Broker, ctx, req):
    R = ctx.api.Response
    host, port = broker.advertised_address
    if ctx.version >= 1 and req.endpoint_type != 1:  # 1 = brokers; controllers are not exposed
        return R(throttle_time_ms=0, error_code=Errors.UNSUPPORTED_ENDPOINT_TYPE,
                 error_message="The target does not support endpoint type " + str(req.endpoint_type),
                 endpoint_type=req.endpoint_type, cluster_id=broker.cluster_id, controller_id=-1, brokers=[],
                 cluster_authorized_operations=NO_AUTHORIZED_OPS)
    return R(throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1, cluster_id=broker.cluster_id,
             controller_id=broker.node_id,
             brokers=[R.DescribeClusterBroker(broker_id=broker.node_id, host=host, port=port, rack=None,
                                              is_fenced=False)],
             cluster_authorized_operations=NO_AUTHORIZED_OPS)


@handles("OffsetForLeaderEpoch")
async def handle_offset_for_leader_epoch(broker: Broker, ctx, req):
    R = ctx.api.Response
    T = R.OffsetForLeaderTopicResult
    E = T.EpochEndOffset
    out = []
    for t in req.topics:
        topic = broker.topics.get(t.topic)
        parts = []
        for p in t.partitions:
            r = E(error_code=0, partition=p.partition, leader_epoch=UNDEFINED_EPOCH,
                  end_offset=UNDEFINED_EPOCH_OFFSET)
            parts.append(r)
            if topic is None or not 0 <= p.partition < len(topic.partitions):
                r.error_code = Errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            part = topic.partitions[p.partition]
            err = part.check_current_leader_epoch(p.current_leader_epoch)
            if err is not None:
                r.error_code = err
                continue
            if 0 <= p.leader_epoch <= part.leader_epoch:
                r.leader_epoch = part.leader_epoch
                r.end_offset = part.log.log_end_offset
        out.append(T(topic=t.topic, partitions=parts))
    return R(throttle_time_ms=0, topics=out)
