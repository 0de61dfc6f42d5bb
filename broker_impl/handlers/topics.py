"""CreateTopics (19) and DeleteTopics (20)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import handles
from ..protocol.errors import Errors, KafkaError

if TYPE_CHECKING:
    from ..server.broker import Broker

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


@handles("CreateTopics")
async def handle_create_topics(broker: Broker, ctx, req):
    """The request's own fields are checked here; the topic is made by whoever decides in this
    cluster (server/topic_creation: this broker alone, or the controller)."""
    R = ctx.api.Response
    results = []
    for t in req.topics:
        res = R.CreatableTopicResult(name=t.name, error_code=0)
        try:
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
            if name is None:
                topic = broker.topics.by_id.get(bytes(t.topic_id))
                if topic is None:
                    results.append(R.DeletableTopicResult(name=None, topic_id=bytes(t.topic_id),
                                                          error_code=Errors.UNKNOWN_TOPIC_ID,
                                                          error_message="This server does not host this topic ID."))
                    continue
                name = topic.name
            targets.append(name)
    else:
        targets = list(req.topic_names)
    for name in targets:
        res = R.DeletableTopicResult(name=name, error_code=0)
        try:
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
