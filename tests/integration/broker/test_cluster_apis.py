"""DescribeCluster, OffsetForLeaderEpoch, ListOffsets and DescribeConfigs over real sockets."""

from __future__ import annotations

import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from broker_impl.protocol.messages import API

from .rawclient import RawConnection


def test_describe_cluster_and_leader_epoch(broker):
    p = Producer({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    for i in range(10):
        p.produce("epochs", value=b"%d" % i, partition=0, timestamp=1_000_000 + i * 1000)
    assert p.flush(30) == 0
    with RawConnection(broker.bootstrap) as conn:
        dc = conn.request("DescribeCluster", 1, API["DescribeCluster"].Request(endpoint_type=1))
        assert dc.error_code == 0 and [b.broker_id for b in dc.brokers] == [1]
        assert dc.brokers[0].port == broker.port
        Q = API["OffsetForLeaderEpoch"].Request
        req = Q(replica_id=-1, topics=[Q.OffsetForLeaderTopic(topic="epochs", partitions=[
            Q.OffsetForLeaderTopic.OffsetForLeaderPartition(partition=0, current_leader_epoch=0, leader_epoch=0),
            Q.OffsetForLeaderTopic.OffsetForLeaderPartition(partition=0, current_leader_epoch=0, leader_epoch=5),
            Q.OffsetForLeaderTopic.OffsetForLeaderPartition(partition=7, current_leader_epoch=-1, leader_epoch=0),
        ])])
        r = conn.request("OffsetForLeaderEpoch", 4, req).topics[0].partitions
        assert (r[0].error_code, r[0].leader_epoch, r[0].end_offset) == (0, 0, 10)
        assert (r[1].leader_epoch, r[1].end_offset) == (-1, -1)
        assert r[2].error_code == 3
        L = API["ListOffsets"].Request
        P = L.ListOffsetsTopic.ListOffsetsPartition

        def list_offset(ts):
            q = L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(name="epochs", partitions=[
                P(partition_index=0, current_leader_epoch=-1, timestamp=ts)])])
            x = conn.request("ListOffsets", 7, q).topics[0].partitions[0]
            return x.error_code, x.offset, x.timestamp

        assert list_offset(-2)[:2] == (0, 0)
        assert list_offset(-1)[:2] == (0, 10)
        assert list_offset(1_004_500) == (0, 5, 1_005_000)
        assert list_offset(-3) == (0, 9, 1_009_000)
        assert list_offset(int(time.time() * 1000) + 10**9)[1] == -1
        # A negative timestamp that names none of Kafka's special offsets: Kafka 4.3.1 answers
        # UNSUPPORTED_VERSION for the partition (measured with -7 and -100); the connection stays.
        assert list_offset(-7) == (35, -1, -1)
        assert list_offset(-100) == (35, -1, -1)
        assert list_offset(-2)[:2] == (0, 0)


def test_describe_configs_through_admin(broker_factory):
    broker = broker_factory({"log.segment.bytes": "1048576"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    from confluent_kafka.admin import NewTopic
    admin.create_topics([NewTopic("cfg", 1, 1, config={"retention.ms": "12345"})])["cfg"].result(10)
    res = admin.describe_configs([ConfigResource("topic", "cfg")])
    configs = list(res.values())[0].result(10)
    assert configs["retention.ms"].value == "12345"
    assert configs["segment.bytes"].value == "1048576"


def test_create_topics_over_the_controllers_limits_is_refused_whole(broker):
    """Kafka 4.3.1's QuorumController refuses a CreateTopics asking for more than 10000 partitions
    (or records) with POLICY_VIOLATION for every topic of it (measured); nothing is created."""
    from broker_impl.codec import API

    from .rawclient import RawConnection

    R = API["CreateTopics"].Request
    T = R.CreatableTopic
    with RawConnection(broker.bootstrap) as conn:
        for topics, message in (([T(name="huge", num_partitions=2**31 - 1, replication_factor=1)],
                                 "Excessively large number of partitions per request."),
                                ([T(name=f"half-{i}", num_partitions=6000, replication_factor=1) for i in range(2)],
                                 "Excessively large number of partitions per request."),
                                ([T(name="ten-k", num_partitions=10000, replication_factor=1)],
                                 "Unable to perform excessively large batch operation.")):
            resp = conn.request("CreateTopics", 7, R(topics=topics, timeout_ms=5000))
            assert [(t.error_code, t.error_message) for t in resp.topics] == [(44, message)] * len(topics)
        md = conn.request("Metadata", 12, API["Metadata"].Request(topics=None))
        assert not {t.name for t in md.topics} & {"huge", "half-0", "half-1", "ten-k"}
