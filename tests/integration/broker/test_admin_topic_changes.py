"""CreatePartitions and IncrementalAlterConfigs / AlterConfigs on the embedded broker through
confluent-kafka's AdminClient, on one node and on a 3-node cluster (the controller decides, every
broker applies): new partitions are led, replicated and written to; a topic config change is
described as DYNAMIC_TOPIC_CONFIG and takes effect on the next append; a cluster-wide dynamic
broker default does too, and survives a restart. Real processes and sockets."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   NewPartitions)

from broker_impl.protocol.messages import API
from conformance.targets.topology import TopicSpec

from .rawclient import RawConnection

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def _admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})


def _grow(bootstrap, topic, count, validate_only=False):
    admin = _admin(bootstrap)   # kept alive until the answer: a destroyed client fails its futures
    fut = admin.create_partitions([NewPartitions(topic, count)], validate_only=validate_only, request_timeout=30)
    return fut[topic].result(30)


def _on_every_broker(bootstrap, read, agreed, timeout=30.0):
    """``read(address)`` of every broker of ``bootstrap``, once ``agreed(answers)`` (or at the
    deadline): each broker applies the controller's change on its own (Kafka's brokers too), so a
    client bootstrapping from a broker not asked yet may still see the old state."""
    deadline = time.monotonic() + timeout
    while True:
        seen = [read(address) for address in bootstrap.split(",")]
        if agreed(seen) or time.monotonic() > deadline:
            return seen
        time.sleep(0.2)


def _partitions(bootstrap, topic, want, timeout=30.0):
    """{partition: (leader, replicas, isr)} once every broker's Metadata lists ``want`` partitions,
    all led."""
    def read(address):
        md = _admin(address).list_topics(topic, timeout=10).topics[topic]
        return {p.id: (p.leader, sorted(p.replicas), sorted(p.isrs)) for p in md.partitions.values()}

    return _on_every_broker(bootstrap, read, lambda seen: all(
        len(s) == want and all(v[0] >= 0 for v in s.values()) for s in seen), timeout)[0]


def _produce(bootstrap, topic, partition, value, **conf):
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 0, "message.timeout.ms": 20000,
                  **conf})
    p.produce(topic, value, partition=partition, on_delivery=lambda err, msg: errors.append((err, msg)))
    p.flush(30)
    (err, msg), = errors
    return err, msg


def _describe(bootstrap, topic, name):
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = _admin(bootstrap)
    entries = admin.describe_configs([res])[res].result(30)
    return entries[name]


def _alter(bootstrap, topic, name, value, op=AlterConfigOpType.SET, validate_only=False):
    res = ConfigResource(ConfigResource.Type.TOPIC, topic,
                         incremental_configs=[ConfigEntry(name, value, incremental_operation=op)])
    admin = _admin(bootstrap)
    return admin.incremental_alter_configs([res], validate_only=validate_only)[res].result(30)


def test_one_node_grows_a_topic_and_refuses_what_kafka_refuses(start):
    _target, bootstrap = start(1, [TopicSpec("t", 1, 1)])
    _grow(bootstrap, "t", 3, validate_only=True)
    assert len(_partitions(bootstrap, "t", 1)) == 1
    _grow(bootstrap, "t", 3)
    parts = _partitions(bootstrap, "t", 3)
    assert sorted(parts) == [0, 1, 2] and all(v[0] >= 0 for v in parts.values())
    err, msg = _produce(bootstrap, "t", 2, b"x")
    assert err is None and msg.offset() == 0
    with pytest.raises(KafkaException) as exc:
        _grow(bootstrap, "t", 3)
    assert exc.value.args[0].code() == KafkaError.INVALID_PARTITIONS
    assert exc.value.args[0].str() == "Topic already has 3 partition(s)."
    with pytest.raises(KafkaException) as exc:
        _grow(bootstrap, "t", 2)
    assert exc.value.args[0].code() == KafkaError.INVALID_PARTITIONS


def test_one_node_topic_config_takes_effect_and_is_described(start):
    _target, bootstrap = start(1, [TopicSpec("t", 1, 1)])
    _alter(bootstrap, "t", "max.message.bytes", "100", validate_only=True)
    assert _describe(bootstrap, "t", "max.message.bytes").source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    _alter(bootstrap, "t", "max.message.bytes", "100")
    entry = _describe(bootstrap, "t", "max.message.bytes")
    assert (entry.value, entry.source) == ("100", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    err, _msg = _produce(bootstrap, "t", 0, b"y" * 500, **{"compression.type": "none"})
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE
    _alter(bootstrap, "t", "max.message.bytes", None, op=AlterConfigOpType.DELETE)
    err, _msg = _produce(bootstrap, "t", 0, b"y" * 500)
    assert err is None
    _alter(bootstrap, "t", "cleanup.policy", "compact", op=AlterConfigOpType.APPEND)
    assert _describe(bootstrap, "t", "cleanup.policy").value == "delete,compact"
    with pytest.raises(KafkaException) as exc:
        _alter(bootstrap, "t", "min.insync.replicas", "0")
    assert exc.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_three_nodes_new_partitions_are_replicated_and_configs_reach_every_broker(start):
    target, bootstrap = start(3, [TopicSpec("t", 1, 3)])
    _grow(bootstrap, "t", 4)
    parts = _partitions(bootstrap, "t", 4)
    assert sorted(parts) == [0, 1, 2, 3]
    assert all(v[1] == [1, 2, 3] or len(v[1]) == 3 for v in parts.values())
    assert len({v[0] for k, v in parts.items() if k > 0}) > 1        # the new leaders are spread
    err, msg = _produce(bootstrap, "t", 3, b"z")
    assert err is None and msg.offset() == 0
    # min.insync.replicas 3 with a follower down: acks=all is refused on every leader
    _alter(bootstrap, "t", "min.insync.replicas", "3")
    seen = _on_every_broker(bootstrap, lambda address: _describe(address, "t", "min.insync.replicas").value,
                            lambda seen: seen == ["3"] * len(seen))
    assert seen == ["3", "3", "3"]
    leader = parts[3][0]
    victim = next(r for r in parts[3][1] if r != leader)
    target.kill(victim)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        err, _msg = _produce(bootstrap, "t", 3, b"w", **{"retries": 0})
        if err is not None and err.code() == KafkaError.NOT_ENOUGH_REPLICAS:
            break
        time.sleep(0.5)
    assert err is not None and err.code() == KafkaError.NOT_ENOUGH_REPLICAS


def test_one_node_broker_default_and_new_partitions_survive_a_restart(start):
    target, bootstrap = start(1, [TopicSpec("t", 1, 1)])
    api = API["IncrementalAlterConfigs"]   # the resource "" is one confluent's AdminClient will not send
    R = api.Request.AlterConfigsResource
    with RawConnection(bootstrap) as conn:
        resp = conn.request("IncrementalAlterConfigs", 1, api.Request(validate_only=False, resources=[R(
            resource_type=4, resource_name="",
            configs=[R.AlterableConfig(name="message.max.bytes", config_operation=0, value="100")])]))
    assert [r.error_code for r in resp.responses] == [0]
    entry = _describe(bootstrap, "t", "max.message.bytes")
    assert (entry.value, entry.source) == ("100", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    err, _msg = _produce(bootstrap, "t", 0, b"y" * 500, **{"compression.type": "none"})
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE
    _grow(bootstrap, "t", 2)
    target.restart(target.node_ids()[0])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            entry = _describe(bootstrap, "t", "max.message.bytes")
            break
        except KafkaException:
            time.sleep(0.5)
    assert (entry.value, entry.source) == ("100", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    err, _msg = _produce(bootstrap, "t", 0, b"y" * 500, **{"compression.type": "none"})
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert sorted(_partitions(bootstrap, "t", 2)) == [0, 1]   # the grown topic after the restart
