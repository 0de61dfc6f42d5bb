"""A driver's poll that a group rebalance interrupts returns no record of the old generation.

A driver's `poll` op gathers records over several calls of its library's own poll, until
`max_records` or `timeout_ms`. A rebalance can fall between two of those calls. The records
gathered before it are of the old generation: a partition the rebalance moved to another member is
read by that member from the group's committed offset, and an eager (range) rebalance revokes every
partition, so one assigned back to this member is read again from the committed offset too. A
KafkaConsumer.poll() never hands out both (its records are read after any rebalance inside it);
the op must not either. Found by the generative workload on Apache Kafka 4.3.1 (a Java copier
copied a partition its franz-go peer now owned, and its next poll returned its own records again:
22 records copied twice).

The rebalance here is a second member joining while the first member's poll op runs: member A
(range) joins alone and polls one record, then its long poll op starts and gathers the records of
both partitions at once; half a second later member B subscribes and polls, and A takes part in
the rebalance (inside its op: A's library polls only there) at its next heartbeat. Nobody commits,
so every partition's new owner reads it from offset 0. What A's op and B's op return together is
then each record once: A's only from A's partition after the rebalance, B's from B's.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

from conformance.clients import CLIENTS
from conformance.clients.driver import JAVA_ASSIGNORS

pytestmark = pytest.mark.timeout(180)

RANGE = {name: cls for cls, name in JAVA_ASSIGNORS.items()}["range"]
PARTITIONS = 2
PER_PARTITION = 10
#: A's poll op: long enough for B's join, A's next heartbeat (heartbeat.interval.ms: 1 s) and the
#: reads after the rebalance.
A_POLL_MS = 8000
B_POLL_MS = 6000


def _consumer(spawn, broker, label: str, group: str, topic: str):
    proc = spawn("java", label=label)
    config = {"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": label,
              "auto.offset.reset": "earliest", "enable.auto.commit": "false",
              "partition.assignment.strategy": RANGE, "session.timeout.ms": "10000",
              "heartbeat.interval.ms": "1000"}
    assert proc.call("create_consumer", config=config, deadline_ms=30_000).ok
    assert proc.call("subscribe", topics=[topic], deadline_ms=30_000).ok
    return proc


@pytest.mark.parametrize("broker", [pytest.param("embedded", id="embedded"),
                                    pytest.param("apache-kafka", id="kafka",
                                                 marks=[pytest.mark.slow, pytest.mark.kafka])],
                         indirect=True)
def test_java_poll_drops_records_a_rebalance_inside_it_took(broker, spawn, h) -> None:
    ok, reason = CLIENTS["java"].availability()
    if not ok:
        pytest.skip(f"client java unavailable: {reason}")
    topic = broker.topic(PARTITIONS)
    group = f"kpr-{uuid.uuid4().hex[:8]}"
    writer = spawn("java", label="writer")
    h.ok(writer.call("create_producer", config={"bootstrap.servers": broker.bootstrap, "linger.ms": "0"}))
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            h.ok(writer.call("send", topic=topic, partition=p, value=f"{p}:{i}", wait=False))
    h.ok(writer.call("flush", deadline_ms=30_000))

    a = _consumer(spawn, broker, "a", group, topic)
    first = h.ok(a.call("poll", max_records=1, timeout_ms=20_000, deadline_ms=30_000))["records"]
    assert len(first) == 1, f"A alone never got a record: {first}"
    b = _consumer(spawn, broker, "b", group, topic)   # its process and consumer ready: B joins at its poll

    polled: dict[str, Any] = {}

    def poll_a() -> None:
        polled["a"] = a.call("poll", max_records=1000, timeout_ms=A_POLL_MS, deadline_ms=A_POLL_MS + 20_000)

    thread = threading.Thread(target=poll_a, name="poll-a", daemon=True)
    thread.start()
    try:
        threading.Event().wait(0.5)   # A's op has gathered the records of both partitions by now
        got_b = h.ok(b.call("poll", max_records=1000, timeout_ms=B_POLL_MS, deadline_ms=B_POLL_MS + 20_000))["records"]
    finally:
        thread.join(A_POLL_MS / 1000 + 25)
    assert not thread.is_alive(), "A's poll op never answered"
    got_a = h.ok(polled["a"])["records"]

    # B has records only once the group completed the rebalance, which needs A to rejoin, which A's
    # library does only inside a poll -- so the rebalance fell inside A's op.
    assert got_b, "B got no partition: the rebalance did not happen inside A's poll op"
    a_parts = {r["partition"] for r in got_a}
    b_parts = {r["partition"] for r in got_b}
    assert not a_parts & b_parts, (
        f"A's poll op returned records of partitions B owns since the rebalance inside it: A "
        f"{sorted((r['partition'], r['offset']) for r in got_a)}, B {sorted((r['partition'], r['offset']) for r in got_b)}")
    keys_a = [(r["partition"], r["offset"]) for r in got_a]
    assert len(keys_a) == len(set(keys_a)), f"A's poll op returned records twice: {sorted(keys_a)}"
    both = sorted(keys_a + [(r["partition"], r["offset"]) for r in got_b])
    assert both == [(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)], (
        f"A and B together did not read every record once from offset 0: {both}")
