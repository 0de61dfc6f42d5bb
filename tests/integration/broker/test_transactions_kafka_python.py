"""Transactions against the embedded broker with kafka-python 3.0 (its own protocol
implementation, so different versions and retry behaviour than librdkafka)."""

from __future__ import annotations

import time
import uuid

import kafka
import kafka.errors
import pytest
from kafka.admin import NewTopic


def _create(bootstrap, *names, partitions=1):
    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(n, partitions, 1) for n in names])
    admin.close()


def _read(bootstrap, topic, isolation, partitions=1, settle=1.5, timeout=20.0):
    c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                            auto_offset_reset="earliest", enable_auto_commit=False,
                            group_id=f"kp-{uuid.uuid4()}")
    c.assign([kafka.TopicPartition(topic, p) for p in range(partitions)])
    out = []
    deadline = time.monotonic() + timeout
    quiet_since = time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - quiet_since < settle:
        got = c.poll(300)
        for msgs in got.values():
            out.extend(m.value for m in msgs)
        if got:
            quiet_since = time.monotonic()
    c.close()
    return out


def _producer(bootstrap, tid):
    p = kafka.KafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid, acks="all",
                            max_block_ms=15000)
    p.init_transactions()
    return p


def test_commit_and_abort_visibility(broker):
    _create(broker.bootstrap, "kp-a", "kp-b")
    p = _producer(broker.bootstrap, "kp-tx")
    p.begin_transaction()
    for i in range(3):
        p.send("kp-a", b"c%d" % i)
        p.send("kp-b", b"c%d" % i)
    p.commit_transaction()
    p.begin_transaction()
    p.send("kp-a", b"aborted")
    p.flush()
    p.abort_transaction()
    p.close()
    assert _read(broker.bootstrap, "kp-a", "read_committed") == [b"c0", b"c1", b"c2"]
    assert _read(broker.bootstrap, "kp-b", "read_committed") == [b"c0", b"c1", b"c2"]
    assert _read(broker.bootstrap, "kp-a", "read_uncommitted") == [b"c0", b"c1", b"c2", b"aborted"]


def test_zombie_is_fenced(broker):
    _create(broker.bootstrap, "kp-z")
    old = _producer(broker.bootstrap, "kp-zombie")
    old.begin_transaction()
    old.send("kp-z", b"from-old")
    old.flush()
    new = _producer(broker.bootstrap, "kp-zombie")   # fences `old`, aborting its open transaction
    new.begin_transaction()
    new.send("kp-z", b"from-new")
    new.commit_transaction()
    with pytest.raises(kafka.errors.KafkaError) as info:
        old.commit_transaction()
    # kafka-python 3.0 negotiates EndTxn v3+: the broker answers PRODUCER_FENCED (90)
    assert isinstance(info.value, kafka.errors.ProducerFencedError)
    new.close()
    old.close(timeout=1)
    assert _read(broker.bootstrap, "kp-z", "read_committed") == [b"from-new"]
