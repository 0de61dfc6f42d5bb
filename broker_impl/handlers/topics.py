"""CreateTopics (19) and DeleteTopics (20)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import handles
from .configs import topic_configs
from ..protocol.errors import Errors, KafkaError
from ..server.authorizer import AclOperation as Op, ResourceType as Res, allowed, allowed_cluster

if TYPE_CHECKING:
    from ..server.broker import Broker

ZERO_UUID = b"\x00" * 16

#: Topic-level configs this broker understands (Kafka's topic config names).
TOPIC_CONFIGS = frozenset({
    "cleanup.policy", "compression.type", "retention.ms", "retention.bytes", "segment.bytes",
    "segment.ms", "segment.index.bytes", "index.interval.bytes", "flush.messages", "flush.ms",
    "max.message.bytes", "message.timestamp.type", "min.insync.replicas", "unclean.leader.election.enable",
    "message.timestamp.before.max.ms", "message.timestamp.after.max.ms", "delete.retention.ms",
    "min.compaction.lag.ms", "max.compaction.lag.ms", "file.delete.delay.ms", "preallocate",
    "min.cleanable.dirty.ratio", "local.retention.ms", "local.retention.bytes", "remote.storage.enable",
    "follower.replication.throttled.replicas", "leader.replication.throttled.replicas",
    "message.downconversion.enable",
})


#: Kafka's controller limits (QuorumController: MAX_PARTITIONS_PER_BATCH and
#: MAX_RECORDS_PER_USER_OP): a CreateTopics asking for more is refused whole, every topic with
#: POLICY_VIOLATION (measured on 4.3.1: 10001 partitions, or 2 topics of 6000, are refused; 10000
#: partitions in one topic are 10001 records, refused as too large a batch).
MAX_PARTITIONS_PER_REQUEST = 10000
MAX_RECORDS_PER_REQUEST = 10000


def _request_limit(broker: Broker, req) -> str | None:
    """Kafka's message when the request as a whole is over the controller's limits, else None."""
    partitions = records = 0
    for t in req.topics:
        n = len(t.assignments) if t.assignments else (broker.config.int("num.partitions") if t.num_partitions == -1
                                                      else t.num_partitions)
        partitions += max(n, 0)
        records += 1 + max(n, 0) + len(t.configs)
    if partitions > MAX_PARTITIONS_PER_REQUEST:
        return "Excessively large number of partitions per request."
    if records > MAX_RECORDS_PER_REQUEST:
        return "Unable to perform excessively large batch operation."
    return None


@handles("CreateTopics")
async def handle_create_topics(broker: Broker, ctx, req):
    """The request's own fields are checked here; the topic is made by whoever decides in this
    cluster (server/topic_creation: this broker alone, or the controller)."""
    R = ctx.api.Response
    results = []
    too_large = _request_limit(broker, req)
    # KafkaApis/ControllerApis: CREATE on the cluster or on the topic
    may_create = allowed_cluster(broker, ctx, Op.CREATE)
    for t in req.topics:
        res = R.CreatableTopicResult(name=t.name, error_code=0, error_message=None)
        try:
            if not (may_create or allowed(broker, ctx, Op.CREATE, Res.TOPIC, t.name)):
                raise KafkaError(Errors.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            if too_large:
                raise KafkaError(Errors.POLICY_VIOLATION, too_large)
            n = t.num_partitions
            if t.assignments:
                n = len(t.assignments)
            elif n == -1:
                n = broker.config.int("num.partitions")
            rf = t.replication_factor
            if rf == -1:
                rf = broker.config.int("default.replication.factor")
            if rf <= 0:
                raise KafkaError(Errors.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
            if rf > 1 and not broker.is_cluster:
                raise KafkaError(Errors.INVALID_REPLICATION_FACTOR,
                                 f"Unable to replicate the partition {rf} time(s): The target replication "
                                 f"factor of {rf} cannot be reached because only 1 broker(s) are registered.")
            configs = {}
            for c in t.configs:
                if c.name not in TOPIC_CONFIGS:
                    raise KafkaError(Errors.INVALID_CONFIG, f"Unknown topic config name: {c.name}")
                configs[c.name] = c.value
            created = await broker.topic_creator.create(t.name, n, rf, configs, validate_only=req.validate_only)
            if created.error != Errors.NONE:
                raise KafkaError(created.error, created.message)
            if not req.validate_only:
                res.topic_id = created.topic_id
            res.num_partitions = n
            res.replication_factor = rf
            if ctx.version >= 5:  # the new topic's configs, as DescribeConfigs would list them
                CC = R.CreatableTopicResult.CreatableTopicConfigs
                res.configs = [CC(name=name, value=value, read_only=False, config_source=source, is_sensitive=False)
                               for name, value, source, _type in topic_configs(broker, configs)]
        except KafkaError as exc:
            res.error_code = exc.error
            res.error_message = exc.message
            res.num_partitions = -1
            res.replication_factor = -1
        results.append(res)
    return R(throttle_time_ms=0, topics=results)


@handles("DeleteTopics")
async def handle_delete_topics(broker: Broker, ctx, req):
    R = ctx.api.Response
    results = []
    targets = []
    if ctx.version >= 6:
        for t in req.topics:
            name = t.name
            by_id = bytes(t.topic_id) != ZERO_UUID
            if (name is None) != by_id:  # Kafka's DeleteTopicsRequest: exactly one of the two
                results.append(R.DeletableTopicResult(
                    name=name, topic_id=bytes(t.topic_id), error_code=Errors.INVALID_REQUEST,
                    error_message="You may not specify both topic name and topic id." if by_id
                    else "Neither topic name nor id were specified."))
                continue
            if name is None:
                topic = broker.topics.by_id.get(bytes(t.topic_id))
                if topic is None:
                    results.append(R.DeletableTopicResult(name=None, topic_id=bytes(t.topic_id),
                                                          error_code=Errors.UNKNOWN_TOPIC_ID,
                                                          error_message="This server does not host this topic ID."))
                    continue
                name = topic.name
                if not allowed(broker, ctx, Op.DESCRIBE, Res.TOPIC, name):   # an id one may not see
                    results.append(R.DeletableTopicResult(name=None, topic_id=bytes(t.topic_id),
                                                          error_code=Errors.TOPIC_AUTHORIZATION_FAILED,
                                                          error_message="Topic authorization failed."))
                    continue
            targets.append(name)
    else:
        targets = list(req.topic_names)
    for name in targets:
        res = R.DeletableTopicResult(name=name, error_code=0)
        try:
            if not allowed(broker, ctx, Op.DELETE, Res.TOPIC, name):   # KafkaApis, before existence
                raise KafkaError(Errors.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
            if not broker.config.bool("delete.topic.enable"):
                raise KafkaError(Errors.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
            if name.startswith("__"):
                raise KafkaError(Errors.INVALID_TOPIC_EXCEPTION, f"Cannot delete internal topic {name}")
            deleted = await broker.topic_creator.delete(name)
            if deleted.error != Errors.NONE:
                raise KafkaError(deleted.error, deleted.message)
            res.topic_id = deleted.topic_id
        except KafkaError as exc:
            res.error_code = exc.error
            res.error_message = exc.message
        results.append(res)
    return R(throttle_time_ms=0, responses=results)
