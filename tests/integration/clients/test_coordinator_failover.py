"""Kill the TransactionCoordinator's node of a 3-broker Apache Kafka cluster in the middle of a
transaction, once per client driver: the coordinator moves, and we record what each driver sees.

Recorded (printed and written to ``failover-<client>.json`` under the test's tmp dir): the
coordinator before and after, how long commit_transaction() took and its normalised outcome,
and what a read_committed consumer then reads. REFERENCE.md measured with confluent-kafka on
Kafka 4.1: commit_transaction() succeeded in every run after 9-20 s.
"""

from __future__ import annotations

import json
import time

import pytest

from conformance.targets import TopicSpec, Topology, make_target

pytestmark = [pytest.mark.slow, pytest.mark.kafka]


@pytest.fixture
def cluster(tmp_path):
    target = make_target("apache-kafka")
    ok, reason = target.availability()
    if not ok:
        pytest.skip(f"apache-kafka unavailable: {reason}")
    try:
        target.start(Topology(nodes=3, topics=[TopicSpec("failover", 3, 3)]), {}, tmp_path / "kafka")
        yield target
    finally:
        target.stop()


def test_coordinator_killed_mid_transaction(cluster, client, spawn, h, tmp_path):
    tid = h.unique(f"failover-{client}")
    bootstrap = cluster.bootstrap
    producer = spawn(client, label="producer")
    h.ok(producer.call("create_producer", config={
        "bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 60000}))
    h.ok(producer.call("init_transactions", deadline_ms=60_000))
    h.ok(producer.call("begin_transaction"))
    for i in range(6):
        h.ok(producer.call("send", topic="failover", partition=i % 3, key=f"k{i}", value=f"v{i}"))
    before = cluster.transaction_coordinator(tid)
    cluster.kill(before)
    t0 = time.monotonic()
    commit = producer.call("commit_transaction", deadline_ms=45_000)
    commit_s = time.monotonic() - t0
    after = cluster.transaction_coordinator(tid, timeout=60, exclude=(before,))

    reader = spawn(client, label="reader")
    h.ok(reader.call("create_consumer", config={
        "bootstrap.servers": bootstrap, "group.id": h.unique("failover-reader"),
        "isolation.level": "read_committed", "auto.offset.reset": "earliest",
        "enable.auto.commit": "false"}))
    parts = [{"topic": "failover", "partition": p, "offset": 0} for p in range(3)]
    h.ok(reader.call("assign", partitions=parts))
    end = h.end_offsets(reader, "failover", 3, "read_committed")
    records = h.read_until_end(reader, [{"topic": "failover", "partition": p} for p in range(3)], end)
    seen = sorted(r["value"] for r in records)

    record = {"client": client, "kafka": cluster.version, "coordinator_before": before,
              "coordinator_after": after, "commit_seconds": round(commit_s, 2),
              "commit_outcome": commit.to_dict(), "read_committed": seen}
    (tmp_path / f"failover-{client}.json").write_text(json.dumps(record, indent=2))
    print("\nFAILOVER", json.dumps(record))

    assert after != before
    if commit.ok:
        assert seen == [f"v{i}" for i in range(6)]      # committed: every record, once
    else:
        assert seen == []                               # not committed: nothing visible
        assert commit.error is not None and commit.error.name
