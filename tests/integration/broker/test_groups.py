"""Consumer groups against the embedded broker (a real subprocess) with real clients:
confluent-kafka (librdkafka) and kafka-python. Every wait is bounded by a deadline;
nothing asserts on elapsed time."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.slow

SESSION_MS = 6000


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(15)


def produce(bootstrap: str, topic: str, per_partition: int, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(per_partition * partitions):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % partitions)
    assert p.flush(20) == 0


def rk_consumer(bootstrap: str, group: str, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "session.timeout.ms": SESSION_MS,
                     "heartbeat.interval.ms": 500, **extra})


def assigned(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def poll_until(consumers, predicate, timeout: float = 60.0) -> bool:
    """Poll every consumer (that is how librdkafka makes progress) until ``predicate()``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.1)
        if predicate():
            return True
    return False


def test_two_consumers_split_partitions_and_rebalance_when_one_leaves(broker):
    create_topic(broker.bootstrap, "orders", 3)
    c1 = rk_consumer(broker.bootstrap, "split")
    c2 = rk_consumer(broker.bootstrap, "split")
    try:
        c1.subscribe(["orders"])
        assert poll_until([c1], lambda: assigned(c1) == {0, 1, 2})
        c2.subscribe(["orders"])
        assert poll_until([c1, c2], lambda: assigned(c1) and assigned(c2)
                          and assigned(c1) | assigned(c2) == {0, 1, 2} and not assigned(c1) & assigned(c2))
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        desc = admin.describe_consumer_groups(["split"])["split"].result(15)
        assert len(desc.members) == 2 and desc.state.name == "STABLE"
        c2.close()             # LeaveGroup: c1 takes every partition back
        assert poll_until([c1], lambda: assigned(c1) == {0, 1, 2})
    finally:
        c1.close()


def test_committed_offsets_survive_a_broker_restart(broker):
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition as KTP

    create_topic(broker.bootstrap, "ledger", 3)
    produce(broker.bootstrap, "ledger", 4, 3)
    # kafka-python consumes the first 2 records of every partition and commits.
    kc = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="durable", auto_offset_reset="earliest",
                       enable_auto_commit=False, session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500,
                       consumer_timeout_ms=1000)
    kc.subscribe(["ledger"])
    seen: dict[int, int] = {}
    deadline = time.monotonic() + 60
    while sum(seen.values()) < 12 and time.monotonic() < deadline:
        for tp, msgs in kc.poll(timeout_ms=500).items():
            seen[tp.partition] = seen.get(tp.partition, 0) + len(msgs)
    assert sum(seen.values()) == 12
    kc.commit({KTP("ledger", p): _offset_and_metadata(2) for p in range(3)})
    kc.close()

    broker.restart()

    # librdkafka, after the restart, sees the commits and resumes from them.
    c = rk_consumer(broker.bootstrap, "durable")
    try:
        committed = c.committed([TopicPartition("ledger", p) for p in range(3)], timeout=15)
        assert [tp.offset for tp in committed] == [2, 2, 2]
        c.subscribe(["ledger"])
        got = []
        deadline = time.monotonic() + 60
        while len(got) < 6 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append((m.partition(), m.offset()))
        assert sorted(got) == [(p, o) for p in range(3) for o in (2, 3)]
    finally:
        c.close()


def _offset_and_metadata(offset: int):
    from kafka.structs import OffsetAndMetadata

    try:
        return OffsetAndMetadata(offset, "", -1)
    except TypeError:      # older signature without leader epoch
        return OffsetAndMetadata(offset, "")


_MEMBER_SCRIPT = textwrap.dedent("""
    import json, sys, time
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "session.timeout.ms": %d,
                  "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([sys.argv[3]])
    last = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        c.poll(0.1)
        now = sorted(tp.partition for tp in c.assignment())
        if now != last:
            print(json.dumps(now), flush=True)
            last = now
""" % SESSION_MS)


def test_session_timeout_removes_a_killed_consumer(broker):
    create_topic(broker.bootstrap, "jobs", 3)
    proc = subprocess.Popen([sys.executable, "-c", _MEMBER_SCRIPT, broker.bootstrap, "expiry", "jobs"],
                            stdout=subprocess.PIPE, text=True)
    c1 = rk_consumer(broker.bootstrap, "expiry")
    try:
        # The other process joins first and takes everything.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line and json.loads(line) == [0, 1, 2]:
                break
        else:
            pytest.fail("the member process never got its assignment")
        c1.subscribe(["jobs"])
        assert poll_until([c1], lambda: len(assigned(c1)) in (1, 2))     # now they share
        proc.kill()            # SIGKILL: no LeaveGroup, only the session timeout can tell
        proc.wait(10)
        assert poll_until([c1], lambda: assigned(c1) == {0, 1, 2}, timeout=90)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        desc = admin.describe_consumer_groups(["expiry"])["expiry"].result(15)
        assert len(desc.members) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        c1.close()


def test_kafka_python_group_and_admin_views(broker):
    from kafka import KafkaAdminClient, KafkaConsumer

    create_topic(broker.bootstrap, "events", 2)
    kc = KafkaConsumer("events", bootstrap_servers=broker.bootstrap, group_id="kp-group",
                       auto_offset_reset="earliest", session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500)
    try:
        deadline = time.monotonic() + 60
        while len(kc.assignment()) < 2 and time.monotonic() < deadline:
            kc.poll(timeout_ms=200)
        assert {tp.partition for tp in kc.assignment()} == {0, 1}
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            listed = admin.list_groups(states_filter=["Stable"])
            print("list_groups:", listed)
            assert "kp-group" in json.dumps(listed, default=str)
            desc = admin.describe_groups(["kp-group"])["kp-group"]
            print("describe_groups:", desc)
            assert desc["group_state"] == "Stable" and len(desc["members"]) == 1
        finally:
            admin.close()
    finally:
        kc.close()
