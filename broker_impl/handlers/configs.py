"""DescribeConfigs (32): topic and broker configs, as admin tools ask for them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import handles
from ..cluster.topics import validate_topic_name
from ..log.config import TOPIC_DEFAULTS
from ..protocol.errors import Errors, KafkaError
from ..cluster.authorizer import AclOperation as Op, ResourceType as ResType, allowed, allowed_cluster

if TYPE_CHECKING:
    from ..server.broker import Broker

TOPIC = 2
BROKER = 4
# Kafka's ConfigSource values
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
#: Kafka 4 formats a KRaft cluster with min.insync.replicas as a cluster-wide dynamic default,
#: so a topic without its own value reports that source (measured on 4.3.1).
CLUSTER_DEFAULTS = frozenset({"min.insync.replicas"})


def topic_configs(broker: Broker, own: dict[str, str]) -> list[tuple[str, str, int, int]]:
    """(name, value, config source, config type) of every config of a topic whose own configs
    are `own`, as Kafka's DescribeConfigs and CreateTopics (v5+) answer them."""
    out = []
    for name, (bkey, fallback, ctype) in sorted(TOPIC_DEFAULTS.items()):
        if name in own:
            out.append((name, own[name], DYNAMIC_TOPIC_CONFIG, ctype))
        else:
            value = broker.config.values.get(bkey, fallback) if bkey else fallback
            dynamic = name in CLUSTER_DEFAULTS or bkey in broker.dynamic_configs
            out.append((name, value, DYNAMIC_DEFAULT_BROKER_CONFIG if dynamic else DEFAULT_CONFIG, ctype))
    return out


#: Kafka's PASSWORD configs: described without their value, as sensitive (measured on 4.3.1)
SENSITIVE = frozenset({"ssl.keystore.password", "ssl.key.password", "ssl.truststore.password", "ssl.keystore.key",
                       "ssl.keystore.certificate.chain", "ssl.truststore.certificates"})


@handles("DescribeConfigs", min_version=1)
async def handle_describe_configs(broker: Broker, ctx, req):
    R = ctx.api.Response
    Res = R.DescribeConfigsResult
    C = Res.DescribeConfigsResourceResult
    results = []
    for res in req.resources:
        entries: list[tuple[str, str, int, int]] = []
        err, msg = Errors.NONE, None
        if res.resource_type == TOPIC and not allowed(broker, ctx, Op.DESCRIBE_CONFIGS, ResType.TOPIC,
                                                      res.resource_name):
            err, msg = Errors.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."   # KafkaApis
        elif res.resource_type == BROKER and not allowed_cluster(broker, ctx, Op.DESCRIBE_CONFIGS):
            err, msg = Errors.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
        elif res.resource_type == TOPIC:
            topic = broker.topics.get(res.resource_name)
            if topic is None:
                try:  # a name that cannot be a topic's is INVALID_TOPIC_EXCEPTION, as in Kafka
                    validate_topic_name(res.resource_name)
                    err, msg = Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {res.resource_name} does not exist"
                except KafkaError as exc:
                    err, msg = exc.error, exc.message
            else:
                entries = topic_configs(broker, topic.configs)
        elif res.resource_type == BROKER:
            if res.resource_name not in ("", str(broker.node_id)):
                err, msg = Errors.INVALID_REQUEST, f"Unexpected broker id, expected {broker.node_id}"
            elif res.resource_name == "":   # the cluster-wide dynamic configs only (measured on 4.3.1)
                cluster = {n: broker.config.str(n) for n in CLUSTER_DEFAULTS} | broker.dynamic_configs
                types = {bkey: ctype for bkey, _fallback, ctype in TOPIC_DEFAULTS.values() if bkey}
                entries = [(k, v, DYNAMIC_DEFAULT_BROKER_CONFIG, types.get(k, 0)) for k, v in sorted(cluster.items())]
            else:
                entries = [(k, v, DYNAMIC_DEFAULT_BROKER_CONFIG if k in broker.dynamic_configs else STATIC_BROKER_CONFIG,
                            0) for k, v in sorted(broker.config.values.items()) if not k.startswith("kconform.")]
        else:
            err, msg = Errors.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}"
        keys = res.configuration_keys  # null or empty: every config (Kafka's ConfigHelper)
        configs = [C(name=n, value=None if n in SENSITIVE else v,
                     read_only=res.resource_type == BROKER and src != DYNAMIC_DEFAULT_BROKER_CONFIG,
                     config_source=src, is_default=src == DEFAULT_CONFIG, is_sensitive=n in SENSITIVE, synonyms=[],
                     config_type=ctype, documentation=None)
                   for n, v, src, ctype in entries if not keys or n in keys]
        # Kafka answers a described resource with an empty error message, not null.
        results.append(Res(error_code=err, error_message="" if msg is None else msg, resource_type=res.resource_type,
                           resource_name=res.resource_name, configs=configs))
    return R(throttle_time_ms=0, results=results)
