"""Metadata (3): brokers, topics, partitions, leaders, replicas and ISR, as this broker's
metadata has them (a one-node broker: itself, leading everything at epoch 0; a broker of a
cluster: the controller's latest image). The brokers listed are the unfenced ones; a partition
without a leader reads LEADER_NOT_AVAILABLE, its replicas on fenced brokers are offline.

Auto-creation follows Kafka: a topic that does not exist is created when
``auto.create.topics.enable`` is true and the request allows it (v4+), and the answer for it in
that response is UNKNOWN_TOPIC_OR_PARTITION with no partitions, so clients ask again (a KRaft
broker only asks its controller to create it; measured on 4.3.1, v1-v12 alike -- ZooKeeper-era
brokers answered LEADER_NOT_AVAILABLE).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import handles
from ..cluster.topics import validate_topic_name
from ..coordinators.group_store import OFFSETS_TOPIC
from ..coordinators.transaction_log import TRANSACTION_STATE_TOPIC
from ..protocol.errors import Errors, KafkaError
from ..cluster.authorizer import (CLUSTER_NAME, CLUSTER_OPERATIONS, TOPIC_OPERATIONS, AclOperation as Op,
                                 ResourceType as Res, allowed, allowed_cluster, authorized_operations)

if TYPE_CHECKING:
    from ..server.broker import Broker

ZERO_UUID = b"\x00" * 16
NO_AUTHORIZED_OPS = -2147483648
INTERNAL_TOPICS = (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)


def offline_replicas(broker: Broker, partition) -> list[int]:
    """A partition's replicas on brokers that are not alive (fenced or unregistered)."""
    alive = broker.replica_manager.broker_alive
    return [r for r in partition.replicas if not alive(r)]


def topic_metadata(R, broker: Broker, topic, error=Errors.NONE):
    parts = []
    if topic is not None and error == Errors.NONE:
        for p in topic.partitions:
            parts.append(R.MetadataResponseTopic.MetadataResponsePartition(
                error_code=Errors.NONE if p.leader >= 0 else Errors.LEADER_NOT_AVAILABLE, partition_index=p.index,
                leader_id=p.leader, leader_epoch=p.leader_epoch, replica_nodes=list(p.replicas),
                isr_nodes=list(p.isr), offline_replicas=offline_replicas(broker, p)))
    return parts


@handles("Metadata")
async def handle_metadata(broker: Broker, ctx, req):
    R = ctx.api.Response
    T = R.MetadataResponseTopic
    out = []
    auto_create = broker.config.bool("auto.create.topics.enable") and (
        ctx.version < 4 or req.allow_auto_topic_creation)
    if ctx.version in (10, 11) and any(rt.name is None or bytes(rt.topic_id) != ZERO_UUID for rt in req.topics or ()):
        # v10-11 carry topic ids but Kafka serves only names there: an id (or no name) makes the
        # whole request invalid (MetadataRequest.getErrorResponse: no brokers, no controller).
        return R(throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=-1, error_code=0,
                 cluster_authorized_operations=NO_AUTHORIZED_OPS,
                 topics=[T(error_code=Errors.INVALID_REQUEST, name=rt.name or "", topic_id=bytes(rt.topic_id),
                           partitions=[], topic_authorized_operations=NO_AUTHORIZED_OPS) for rt in req.topics])
    all_topics = req.topics is None or (ctx.version == 0 and not req.topics)
    if all_topics:
        wanted = [(t.name, None) for t in broker.topics.topics.values()]
    else:
        wanted = []
        for rt in req.topics:
            name = rt.name
            if ctx.version >= 12 and (name is None or bytes(rt.topic_id) != ZERO_UUID):  # an id wins over a name
                t = broker.topics.by_id.get(bytes(rt.topic_id))
                if t is None:
                    out.append(T(error_code=Errors.UNKNOWN_TOPIC_ID, name=None, topic_id=bytes(rt.topic_id),
                                 topic_authorized_operations=NO_AUTHORIZED_OPS))
                    continue
                name = t.name
            wanted.append((name, rt))
    wanted, refused = _authorized(broker, ctx, R, wanted, all_topics, auto_create)

    def topic_ops(name: str) -> int:
        if ctx.version < 8 or not req.include_topic_authorized_operations:
            return NO_AUTHORIZED_OPS
        return authorized_operations(broker, ctx, Res.TOPIC, name, TOPIC_OPERATIONS)

    for name, _ in wanted:
        topic = broker.topics.get(name)
        error = Errors.NONE
        if topic is None:
            try:
                validate_topic_name(name)
                if auto_create and not name.startswith("__"):
                    created = await broker.topic_creator.create(name, broker.config.int("num.partitions"),
                                                                broker.config.int("default.replication.factor"), {})
                    ok = created.error in (Errors.NONE, Errors.TOPIC_ALREADY_EXISTS)
                    error = Errors.UNKNOWN_TOPIC_OR_PARTITION if ok else created.error
                else:
                    error = Errors.UNKNOWN_TOPIC_OR_PARTITION
            except KafkaError as exc:
                error = exc.error
        out.append(T(error_code=error, name=name,
                     topic_id=topic.topic_id if topic is not None else ZERO_UUID,
                     is_internal=bool(topic and topic.internal),
                     partitions=topic_metadata(R, broker, topic, error),
                     topic_authorized_operations=topic_ops(name)))
    out += refused
    rm = broker.replica_manager
    return R(
        throttle_time_ms=0,
        brokers=[R.MetadataResponseBroker(node_id=n, host=h, port=p, rack=None) for n, h, p in rm.live_brokers()],
        cluster_id=broker.cluster_id,
        controller_id=rm.controller_id(),
        topics=out,
        cluster_authorized_operations=_cluster_ops(broker, ctx, req),
        error_code=0,
    )


def _authorized(broker: Broker, ctx, R, wanted, all_topics: bool, auto_create: bool):
    """KafkaApis' checks: DESCRIBE on each topic (a topic refused is left out of an all-topics
    answer, else TOPIC_AUTHORIZATION_FAILED without its id -- named by id: without its name),
    CREATE on the cluster or the topic for one to be created. (the kept, the refused answers)"""
    if broker.authorizer is None:
        return wanted, []
    T = R.MetadataResponseTopic
    kept, no_create, no_describe = [], [], []
    for name, rt in wanted:
        if not allowed(broker, ctx, Op.DESCRIBE, Res.TOPIC, name):
            if all_topics:
                continue
            by_id = rt is not None and bytes(rt.topic_id) != ZERO_UUID
            no_describe.append(T(error_code=Errors.TOPIC_AUTHORIZATION_FAILED, name=None if by_id else name,
                                 topic_id=bytes(rt.topic_id) if by_id else ZERO_UUID, is_internal=False,
                                 partitions=[], topic_authorized_operations=NO_AUTHORIZED_OPS))
        elif auto_create and broker.topics.get(name) is None and not allowed_cluster(broker, ctx, Op.CREATE) \
                and not allowed(broker, ctx, Op.CREATE, Res.TOPIC, name):
            no_create.append(T(error_code=Errors.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=ZERO_UUID,
                               is_internal=name in INTERNAL_TOPICS, partitions=[],
                               topic_authorized_operations=NO_AUTHORIZED_OPS))
        else:
            kept.append((name, rt))
    return kept, no_create + no_describe


def _cluster_ops(broker: Broker, ctx, req) -> int:
    """v8-10, when asked: the cluster's operations one may do, 0 without DESCRIBE on it."""
    if not 8 <= ctx.version <= 10 or not req.include_cluster_authorized_operations:
        return NO_AUTHORIZED_OPS
    if not allowed_cluster(broker, ctx, Op.DESCRIBE):
        return 0
    return authorized_operations(broker, ctx, Res.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)
