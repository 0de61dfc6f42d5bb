"""confluent-kafka (librdkafka) steps shared by the transaction tests against the embedded
broker subprocess: topics, transactional producers, an open two-partition transaction, a
read-to-the-end consumer, and waiting for the broker to reach a state."""

from __future__ import annotations

import time
import uuid

import pytest

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def wait_until(predicate, limit_s: float = 20.0) -> bool:
    """Poll ``predicate`` every 20 ms; False if it still does not hold after ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def create_topics(bootstrap, *names, partitions=1):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        f.result(15)


def txn_producer(bootstrap, tid, **extra):
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 0, **extra})
    p.init_transactions(15)
    return p


def open_txn(b, tid, topic, values=(b"v0", b"v1"), timeout_ms=60000):
    """Create ``topic`` with one partition per value and leave a transaction open that wrote
    ``values[i]`` to partition i, flushed (on the broker, not in the client's buffers)."""
    create_topics(b.bootstrap, topic, partitions=len(values))
    p = txn_producer(b.bootstrap, tid, **{"transaction.timeout.ms": timeout_ms})
    p.begin_transaction()
    for partition, value in enumerate(values):
        p.produce(topic, value=value, partition=partition)
    p.flush(10)
    return p


def commit_into_crash(b, p) -> int | None:
    """Commit ``p``'s transaction on a broker armed to exit at a fault point; it may die before
    answering, so the commit's own outcome is not looked at. Returns the broker's exit code
    (86 for a fault-point crash), or None if it still runs after 10 s."""
    try:
        p.commit_transaction(3)
    except ck.KafkaException:
        pass   # the broker may die before answering
    wait_until(lambda: b.proc.poll() is not None, 10)
    return b.proc.returncode


def consume_all(bootstrap, topic, isolation, expect_at_least=0, timeout=10.0, partitions=1):
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}",
                     "auto.offset.reset": "earliest", "isolation.level": isolation,
                     "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
    out, eofs = [], set()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == ck.KafkaError._PARTITION_EOF:
                    eofs.add(m.partition())
                    if len(eofs) == partitions and len(out) >= expect_at_least:
                        break
                continue
            out.append(m.value())
    finally:
        c.close()
    return out
