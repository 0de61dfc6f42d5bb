"""DescribeConfigs (32): topic and broker configs, as admin tools ask for them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import handles
from ..protocol.errors import Errors

if TYPE_CHECKING:
    from ..server.broker import Broker

TOPIC = 2
BROKER = 4
# Kafka's ConfigSource values
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

#: topic config -> the broker config that supplies its default (Kafka's mapping)
TOPIC_DEFAULTS = {
    "cleanup.policy": ("log.cleanup.policy", "delete"),
    "compression.type": ("compression.type", None),
    "retention.ms": ("log.retention.ms", None),
    "retention.bytes": ("log.retention.bytes", None),
    "segment.bytes": ("log.segment.bytes", None),
    "segment.ms": ("log.roll.ms", None),
    "index.interval.bytes": ("log.index.interval.bytes", None),
    "flush.messages": ("log.flush.interval.messages", None),
    "flush.ms": ("log.flush.interval.ms", None),
    "max.message.bytes": ("message.max.bytes", None),
    "message.timestamp.type": ("log.message.timestamp.type", None),
    "min.insync.replicas": ("min.insync.replicas", None),
}


@handles("DescribeConfigs", min_version=1)
async def handle_describe_configs(broker: Broker, ctx, req):
    R = ctx.api.Response
    Res = R.DescribeConfigsResult
    C = Res.DescribeConfigsResourceResult
    results = []
    for res in req.resources:
        entries: list[tuple[str, str, int]] = []
        err, msg = Errors.NONE, None
        if res.resource_type == TOPIC:
            topic = broker.topics.get(res.resource_name)
            if topic is None:
                err, msg = Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {res.resource_name} does not exist"
            else:
                for name, (bkey, fallback) in TOPIC_DEFAULTS.items():
                    if name in topic.configs:
                        entries.append((name, topic.configs[name], DYNAMIC_TOPIC_CONFIG))
                    else:
                        v = broker.config.values.get(bkey, fallback)
                        entries.append((name, v, DEFAULT_CONFIG))
        elif res.resource_type == BROKER:
            if res.resource_name not in ("", str(broker.node_id)):
                err, msg = Errors.INVALID_REQUEST, f"Unexpected broker id, expected {broker.node_id}"
            else:
                entries = [(k, v, STATIC_BROKER_CONFIG) for k, v in sorted(broker.config.values.items())
                           if not k.startswith("kconform.")]
        else:
            err, msg = Errors.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}"
        keys = res.configuration_keys
        configs = [C(name=n, value=v, read_only=res.resource_type == BROKER, config_source=src,
                     is_default=src == DEFAULT_CONFIG, is_sensitive=False, synonyms=[], config_type=0,
                     documentation=None)
                   for n, v, src in entries if keys is None or n in keys]
        results.append(Res(error_code=err, error_message=msg, resource_type=res.resource_type,
                           resource_name=res.resource_name, configs=configs))
    return R(throttle_time_ms=0, results=results)
