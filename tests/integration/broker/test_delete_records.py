"""DeleteRecords on the embedded broker through confluent-kafka's AdminClient: on one node, and on
a 3-node cluster where the answer waits for every follower's log start and a new leader after
failover starts where the old one did. Real processes and sockets."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, OFFSET_BEGINNING, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from conformance.targets.topology import TopicSpec

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def _produce(bootstrap, topic, values):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "log_level": 0})
    for v in values:
        p.produce(topic, v.encode(), partition=0)
    assert p.flush(60) == 0


def _delete(bootstrap, topic, offset):
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    fut = admin.delete_records([TopicPartition(topic, 0, offset)], request_timeout=30)
    return fut[TopicPartition(topic, 0)].result(30)


def _earliest(bootstrap, topic):
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    tp = TopicPartition(topic, 0)
    return admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(30).offset


def _read_all(bootstrap, topic, expected, timeout=30.0):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{time.time_ns()}", "log_level": 0,
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expected and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append((m.offset(), m.value().decode()))
    finally:
        c.close()
    return out


def test_one_node_trims_and_an_idempotent_producer_continues(start):
    _target, bootstrap = start(1, [TopicSpec("t", 1, 1)])
    _produce(bootstrap, "t", ["a", "b", "c"])
    assert _delete(bootstrap, "t", 2).low_watermark == 2
    assert _earliest(bootstrap, "t") == 2
    _produce(bootstrap, "t", ["d"])
    assert _read_all(bootstrap, "t", 2) == [(2, "c"), (3, "d")]


def test_three_nodes_every_replica_starts_there_and_a_new_leader_keeps_it(start):
    target, bootstrap = start(3, [TopicSpec("t", 1, 3, {"min.insync.replicas": "2"})])
    _produce(bootstrap, "t", ["a", "b", "c", "d", "e"])
    # answered once the followers, fetching, have moved their own log start (the low watermark)
    assert _delete(bootstrap, "t", 3).low_watermark == 3
    old = target.partition_leader("t", 0)
    target.kill(old)
    deadline = time.monotonic() + 30
    while target.partition_leader("t", 0) in (old, -1, None) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert target.partition_leader("t", 0) != old
    assert _earliest(bootstrap, "t") == 3
    assert _read_all(bootstrap, "t", 2) == [(3, "d"), (4, "e")]
