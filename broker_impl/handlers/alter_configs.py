"""IncrementalAlterConfigs (44) and AlterConfigs (33): change a topic's configs (Admin
.incrementalAlterConfigs / alterConfigs; Kafka Streams, Connect and operators set retention,
cleanup policy, min.insync.replicas this way).

As Kafka 4 answers them: the broker's preprocessing (ConfigAdminManager.preprocess) first -- a
resource named twice is INVALID_REQUEST "Each resource must appear at most once." (both
answers), a config named twice "Error due to duplicate config keys", a null value (but for
DELETE) "Null value not supported for : <names>", an unknown resource type "Unknown resource
type <n>"; then the authorizer (ALTER_CONFIGS on the topic: TOPIC_AUTHORIZATION_FAILED, on the
cluster for BROKER: CLUSTER_AUTHORIZATION_FAILED); then the controller
(ConfigurationControlManager): SET / DELETE / APPEND / SUBTRACT (the last two on LIST configs
only), the resulting configs validated as LogConfig validates them (INVALID_CONFIG: unknown
name, a value not of the config's type or range), then the topic's existence
(UNKNOWN_TOPIC_OR_PARTITION). AlterConfigs replaces the topic's whole set of own configs.
``validate_only`` checks and changes nothing. A change takes effect at once on every broker
(the logs' LogConfig, the partitions' min.insync.replicas), and DescribeConfigs shows the new
value with source DYNAMIC_TOPIC_CONFIG.

BROKER resources: the cluster-wide dynamic broker configs (the resource named "", KIP-226) that
supply topic configs' defaults (message.max.bytes, log.retention.ms, min.insync.replicas,
log.cleanup.policy, ...: topic_admin.broker_default_keys) are changed through the controller and
reach every open log without a value of its own at once; DescribeConfigs shows them as
DYNAMIC_DEFAULT_BROKER_CONFIG. A bad value is INVALID_REQUEST, as Kafka answers it. Every other
broker config, and per-broker ones (the resource named by a node id), are refused with
INVALID_REQUEST saying so, rather than answered NONE for a change this broker would not apply;
Kafka applies many more of them (thread pools, listeners, quotas...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import handles
from .configs import BROKER, TOPIC
from ..cluster.topic_admin import DELETE, SET
from ..protocol.errors import Errors, KafkaError
from ..cluster.authorizer import AclOperation as Op, ResourceType as ResType, allowed, allowed_cluster

if TYPE_CHECKING:
    from ..server.broker import Broker

BROKER_LOGGER = 8


def _preprocess(broker: Broker, ctx, resources, incremental: bool) -> dict[int, KafkaError]:
    """ConfigAdminManager.preprocess and the authorizer: index of a resource -> its error."""
    out: dict[int, KafkaError] = {}
    seen: dict[tuple[int, str], int] = {}
    for i, r in enumerate(resources):
        key = (r.resource_type, r.resource_name)
        if key in seen:
            for j in (seen[key], i):
                out[j] = KafkaError(Errors.INVALID_REQUEST, "Each resource must appear at most once.")
        seen[key] = i
    for i, r in enumerate(resources):
        if i in out:
            continue
        names = [c.name for c in r.configs]
        if len(set(names)) != len(names):
            out[i] = KafkaError(Errors.INVALID_REQUEST, "Error due to duplicate config keys")
            continue
        nulls = [c.name for c in r.configs if c.value is None and not (incremental and c.config_operation == DELETE)]
        if nulls:
            out[i] = KafkaError(Errors.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
            continue
        if r.resource_type == TOPIC:
            if not allowed(broker, ctx, Op.ALTER_CONFIGS, ResType.TOPIC, r.resource_name):
                out[i] = KafkaError(Errors.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
        elif r.resource_type == BROKER or (incremental and r.resource_type == BROKER_LOGGER):
            if not allowed_cluster(broker, ctx, Op.ALTER_CONFIGS):
                out[i] = KafkaError(Errors.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
            elif r.resource_type == BROKER_LOGGER:
                out[i] = KafkaError(Errors.INVALID_REQUEST, "The embedded broker has no loggers to configure.")
            elif r.resource_name and not r.resource_name.isdigit():
                out[i] = KafkaError(Errors.INVALID_REQUEST, f"Node id must be an integer, but it is: {r.resource_name}")
            elif r.resource_name not in ("", str(broker.node_id)):
                out[i] = KafkaError(Errors.INVALID_REQUEST, f"Unexpected broker id, expected {broker.node_id}, "
                                                            f"but received {r.resource_name}")
            elif r.resource_name:
                out[i] = KafkaError(Errors.INVALID_REQUEST,
                                    "The embedded broker takes no per-broker dynamic configs, only cluster-wide "
                                    "ones (the BROKER resource \"\"): " + ", ".join(names))
        else:
            out[i] = KafkaError(Errors.INVALID_REQUEST, f"Unknown resource type {r.resource_type}")
    return out


async def _alter(broker: Broker, ctx, req, incremental: bool):
    R = ctx.api.Response
    A = R.AlterConfigsResourceResponse
    errors = _preprocess(broker, ctx, req.resources, incremental)
    out = []
    for i, r in enumerate(req.resources):
        err = errors.get(i)
        if err is None and r.resource_type == BROKER:
            if incremental:
                ops = [(c.name, c.config_operation, c.value) for c in r.configs]
            else:   # the legacy API replaces the whole set
                ops = [(c.name, SET, c.value) for c in r.configs]
                ops += [(k, DELETE, None) for k in broker.dynamic_configs if k not in {c.name for c in r.configs}]
            done = await broker.topic_creator.alter_broker_defaults(ops, req.validate_only)
            err = KafkaError(done.error, done.message)
        elif err is None:
            if incremental:
                ops = [(c.name, c.config_operation, c.value) for c in r.configs]
                done = await broker.topic_creator.alter_configs(r.resource_name, ops, None, req.validate_only)
            else:
                done = await broker.topic_creator.alter_configs(r.resource_name, None,
                                                                {c.name: c.value for c in r.configs},
                                                                req.validate_only)
            err = KafkaError(done.error, done.message)
        out.append(A(error_code=err.error, error_message=err.message, resource_type=r.resource_type,
                     resource_name=r.resource_name))
    return R(throttle_time_ms=0, responses=out)


@handles("IncrementalAlterConfigs")
async def handle_incremental_alter_configs(broker: Broker, ctx, req):
    return await _alter(broker, ctx, req, incremental=True)


@handles("AlterConfigs")
async def handle_alter_configs(broker: Broker, ctx, req):
    return await _alter(broker, ctx, req, incremental=False)
