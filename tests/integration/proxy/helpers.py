"""Real clients against the proxied broker: produce and read back, bounded in count and time."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition


def produce(bootstrap: str, topic: str, values: list[bytes], timeout: float = 60.0, **config) -> list:
    """Produce ``values`` to partition 0; returns the delivery errors (None = delivered), in order."""
    p = Producer({"bootstrap.servers": bootstrap, "log_level": 0, **config})
    reports: list = [None] * len(values)
    done: list[bool] = [False] * len(values)

    def on_delivery(i):
        def cb(err, msg):
            reports[i] = err
            done[i] = True
        return cb

    for i, v in enumerate(values):
        p.produce(topic, value=v, partition=0, on_delivery=on_delivery(i))
    left = p.flush(timeout)
    assert left == 0, f"{left} record(s) still undelivered after {timeout}s"
    assert all(done)
    return reports


def read_partition(bootstrap: str, topic: str, expect: int, timeout: float = 30.0, settle: float = 1.0) -> list[bytes]:
    """Values stored in partition 0, read from offset 0.

    Keeps reading ``settle`` seconds after ``expect`` records arrived, so that a duplicate
    beyond the expected count is seen rather than cut off.
    """
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.time_ns()}",
                  "enable.auto.commit": False, "log_level": 0})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + timeout
    settle_until = None
    try:
        while time.monotonic() < deadline:
            for m in c.consume(1000, 0.2):
                if m.error() is None:
                    out.append(m.value())
            if len(out) >= expect:
                settle_until = settle_until or time.monotonic() + settle
                if time.monotonic() >= settle_until:
                    break
    finally:
        c.close()
    return out


def high_watermark(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"wm-{time.time_ns()}", "log_level": 0})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


def produce_kafka_python(bootstrap: str, topic: str, value: bytes, timeout: float = 60.0, **config):
    """One record through kafka-python; returns its RecordMetadata (raises on a delivery error).

    kafka-python, like the Java client, bounds every in-flight request by request_timeout_ms:
    on expiry it closes the connection and retries the batch on a new one.
    """
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, **config)
    try:
        return p.send(topic, value, partition=0).get(timeout)
    finally:
        p.close(10)


def wait_for_events(proxy, event: str, n: int = 1, timeout: float = 10.0) -> list[dict]:
    """The proxy's ``event`` records once there are ``n`` (a close is recorded just after the
    sockets are closed, so a client may see the close first)."""
    deadline = time.monotonic() + timeout
    while True:
        found = proxy.events_of(event)
        if len(found) >= n or time.monotonic() >= deadline:
            return found
        time.sleep(0.02)
