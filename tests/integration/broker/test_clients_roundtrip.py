"""Unmodified clients write 10,000 records to a 3-partition topic and read them
all back through subscribe() in a consumer group."""

from __future__ import annotations

import time

import kafka
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

N = 10_000


def _create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(15)


def test_confluent_kafka_10k_through_a_group(broker):
    _create(broker.bootstrap, "rt-confluent")
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "log_level": 0})
    for i in range(N):
        p.produce("rt-confluent", key=b"k%d" % i, value=b"v%d" % i)
    assert p.flush(60) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "rt-confluent-g",
                  "auto.offset.reset": "earliest", "log_level": 0})
    c.subscribe(["rt-confluent"])
    seen = {}
    deadline = time.monotonic() + 60
    while len(seen) < N and time.monotonic() < deadline:
        for m in c.consume(1000, 1.0):
            if m.error() is None:
                seen[m.value()] = (m.partition(), m.offset())
    parts = {p for p, _ in seen.values()}
    c.close()
    assert len(seen) == N
    assert set(seen) == {b"v%d" % i for i in range(N)}
    assert parts == {0, 1, 2}


def test_kafka_python_10k_through_a_group(broker):
    _create(broker.bootstrap, "rt-kp")
    prod = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    futures = [prod.send("rt-kp", key=b"k%d" % i, value=b"v%d" % i) for i in range(N)]
    prod.flush(60)
    assert all(f.succeeded() for f in futures)
    prod.close()
    cons = kafka.KafkaConsumer("rt-kp", bootstrap_servers=broker.bootstrap, group_id="rt-kp-g",
                               auto_offset_reset="earliest")
    seen = set()
    parts = set()
    deadline = time.monotonic() + 60
    while len(seen) < N and time.monotonic() < deadline:
        for tp, msgs in cons.poll(1000).items():
            parts.add(tp.partition)
            seen.update(m.value for m in msgs)
    cons.commit()
    committed = sum(cons.committed(kafka.TopicPartition("rt-kp", p)) or 0 for p in range(3))
    cons.close()
    assert seen == {b"v%d" % i for i in range(N)}
    assert parts == {0, 1, 2}
    assert committed == N
