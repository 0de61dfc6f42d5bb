"""DescribeCluster (60) and OffsetForLeaderEpoch (23).

DescribeCluster lists the unfenced brokers (a one-node broker: itself). OffsetForLeaderEpoch is
answered by a partition's leader from its leader epoch cache (log/leader_epoch): the requested
epoch, or the largest one below it, and where it ended -- the log end offset for the current
epoch, UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET for an epoch newer than any it knows. Followers
ask it to truncate (server/replica_fetcher, ``replica_id`` >= 0); consumers ask it to validate
their position after a leader change (KIP-320). A broker that does not lead the partition
answers NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import handles
from ..protocol.errors import Errors
from ..server.authorizer import AclOperation as Op, ResourceType as Res, allowed, allowed_cluster
from .metadata import NO_AUTHORIZED_OPS

if TYPE_CHECKING:
    from ..server.broker import Broker

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@handles("DescribeCluster")
async def handle_describe_cluster(broker: Broker, ctx, req):
    R = ctx.api.Response
    rm = broker.replica_manager
    if ctx.version >= 1 and req.endpoint_type != 1:  # 1 = brokers; controllers are not exposed
        return R(throttle_time_ms=0, error_code=Errors.UNSUPPORTED_ENDPOINT_TYPE,
                 error_message="The target does not support endpoint type " + str(req.endpoint_type),
                 endpoint_type=req.endpoint_type, cluster_id=broker.cluster_id, controller_id=-1, brokers=[],
                 cluster_authorized_operations=NO_AUTHORIZED_OPS)
    return R(throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1, cluster_id=broker.cluster_id,
             controller_id=rm.controller_id(),
             brokers=[R.DescribeClusterBroker(broker_id=n, host=h, port=p, rack=None, is_fenced=False)
                      for n, h, p in rm.live_brokers()],
             cluster_authorized_operations=NO_AUTHORIZED_OPS)


@handles("OffsetForLeaderEpoch")
async def handle_offset_for_leader_epoch(broker: Broker, ctx, req):
    R = ctx.api.Response
    T = R.OffsetForLeaderTopicResult
    E = T.EpochEndOffset
    out = []
    refused = []
    # KafkaApis: CLUSTER_ACTION (followers), else DESCRIBE on each topic; the refused answered last
    cluster_action = allowed_cluster(broker, ctx, Op.CLUSTER_ACTION)
    for t in req.topics:
        if not (cluster_action or allowed(broker, ctx, Op.DESCRIBE, Res.TOPIC, t.topic)):
            refused.append(T(topic=t.topic, partitions=[
                E(error_code=Errors.TOPIC_AUTHORIZATION_FAILED, partition=p.partition, leader_epoch=UNDEFINED_EPOCH,
                  end_offset=UNDEFINED_EPOCH_OFFSET) for p in t.partitions]))
            continue
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
            err = part.leader_error(p.current_leader_epoch)
            if err is not None:
                r.error_code = err
                continue
            r.leader_epoch, r.end_offset = part.end_offset_for_epoch(p.leader_epoch)
        out.append(T(topic=t.topic, partitions=parts))
    return R(throttle_time_ms=0, topics=out + refused)
