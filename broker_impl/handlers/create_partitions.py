"""CreatePartitions (37): a topic grows to more partitions (Admin.createPartitions; Kafka
Streams and Connect call it for their internal topics, operators to scale a topic).

As Kafka 4 answers it (the broker forwards it to the controller; ControllerApis.createPartitions,
ReplicationControlManager.createPartitions): a topic named twice is INVALID_REQUEST "Duplicate
topic name." (answered once), one the principal may not ALTER is TOPIC_AUTHORIZATION_FAILED
without a message, then per topic UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS for a count
not above the current one, INVALID_REPLICA_ASSIGNMENT for manual assignments that do not fit,
INVALID_REPLICATION_FACTOR when too few brokers are alive. The controller places the new
partitions' replicas (round-robin over the alive brokers, the topic's replication factor), and
every broker picks them up from the metadata image: leaders lead, followers fetch.
``validate_only`` checks and changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import handles
from ..protocol.errors import Errors
from ..cluster.authorizer import AclOperation as Op, ResourceType as Res, allowed

if TYPE_CHECKING:
    from ..server.broker import Broker


@handles("CreatePartitions")
async def handle_create_partitions(broker: Broker, ctx, req):
    R = ctx.api.Response
    T = R.CreatePartitionsTopicResult
    names = [t.name for t in req.topics]
    duplicates = {n for n in names if names.count(n) > 1}
    results = [T(name=n, error_code=Errors.INVALID_REQUEST, error_message="Duplicate topic name.")
               for n in dict.fromkeys(n for n in names if n in duplicates)]
    for t in req.topics:
        if t.name in duplicates:
            continue
        if not allowed(broker, ctx, Op.ALTER, Res.TOPIC, t.name):
            results.append(T(name=t.name, error_code=Errors.TOPIC_AUTHORIZATION_FAILED, error_message=None))
            continue
        assignments = None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
        done = await broker.topic_creator.create_partitions(t.name, t.count, assignments, req.validate_only)
        results.append(T(name=t.name, error_code=done.error, error_message=done.message))
    return R(throttle_time_ms=0, results=results)
