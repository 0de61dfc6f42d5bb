"""ElectLeaders on the embedded broker through confluent-kafka's AdminClient.elect_leaders: on one
node (no election is ever needed), and on a 3-node cluster where a bounced preferred replica
leads again only once a preferred election asks for it. Real processes and sockets."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import ElectionType, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from conformance.targets import EmbeddedTarget, Topology
from conformance.targets.topology import TopicSpec

pytestmark = [pytest.mark.timeout(240)]


def _elect(bootstrap, election, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    result = admin.elect_leaders(election, partitions).result(30)   # (a timeout kwarg: SystemError in 2.x)
    # per partition None or the broker's error (a KafkaError: confluent-kafka 2.x's, not its documented exception)
    return {(tp.topic, tp.partition): (None if err is None else err.code()) for tp, err in result.items()}


def test_one_node_needs_no_election(broker):
    p = Producer({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    p.produce("el", b"x", partition=0)
    assert p.flush(30) == 0
    wanted = [TopicPartition("el", 0), TopicPartition("el", 3)]
    assert _elect(broker.bootstrap, ElectionType.PREFERRED, wanted) == {
        ("el", 0): KafkaError.ELECTION_NOT_NEEDED, ("el", 3): KafkaError.UNKNOWN_TOPIC_OR_PART}
    assert _elect(broker.bootstrap, ElectionType.UNCLEAN, wanted[:1]) == {("el", 0): KafkaError.ELECTION_NOT_NEEDED}


@pytest.mark.slow
def test_three_nodes_preferred_replica_leads_again_when_asked(tmp_path):
    target = EmbeddedTarget()
    try:
        bootstrap = target.start(Topology(nodes=3, topics=[TopicSpec("pl", 1, 3)]), {}, tmp_path / "c")
        preferred, replicas, _isr = target.partition_replicas("pl", 0)
        assert preferred == replicas[0]
        target.kill(preferred)
        deadline = time.monotonic() + 30
        while target.partition_leader("pl", 0) in (preferred, -1, None) and time.monotonic() < deadline:
            time.sleep(0.2)
        failover = target.partition_leader("pl", 0)
        assert failover not in (preferred, -1, None)
        target.restart(preferred)
        deadline = time.monotonic() + 30
        while len(target.partition_replicas("pl", 0)[2]) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(target.partition_replicas("pl", 0)[2]) == 3
        assert target.partition_leader("pl", 0) == failover      # back in sync, not leading
        assert _elect(bootstrap, ElectionType.PREFERRED, [TopicPartition("pl", 0)]) == {("pl", 0): None}
        deadline = time.monotonic() + 30
        while target.partition_leader("pl", 0) != preferred and time.monotonic() < deadline:
            time.sleep(0.2)
        assert target.partition_leader("pl", 0) == preferred
        assert _elect(bootstrap, ElectionType.PREFERRED, [TopicPartition("pl", 0)]) == {
            ("pl", 0): KafkaError.ELECTION_NOT_NEEDED}
    finally:
        target.stop()
