"""DescribeLogDirs on the embedded broker over real sockets: kafka-python's
KafkaAdminClient.describe_log_dirs on one node, the raw request's versions and filters, the
authorizer's refusal, and on a 3-node cluster each broker describing only the replicas it holds."""

from __future__ import annotations

import os

import pytest
from confluent_kafka import Producer
from kafka.admin import KafkaAdminClient

from broker_impl.protocol.errors import Errors
from broker_impl.protocol.messages import API
from conformance.targets import EmbeddedTarget, Topology
from conformance.targets.topology import TopicSpec

from .rawclient import RawConnection

Q = API["DescribeLogDirs"].Request


def _produce(bootstrap, topic, values, partition=0):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 0, "linger.ms": 50})
    for v in values:
        p.produce(topic, v.encode(), partition=partition)
    assert p.flush(30) == 0


def _describe(conn, version, topics):
    body = Q(topics=None if topics is None else [Q.DescribableLogDirTopic(topic=t, partitions=ps)
                                                 for t, ps in topics.items()])
    return conn.request("DescribeLogDirs", version, body)


def _sizes(result) -> dict:
    return {(t.name, p.partition_index): p.partition_size for t in result.topics for p in t.partitions}


def _on_disk(broker, partition_dir: str) -> int:
    d = broker.data_dir / partition_dir
    return sum(f.stat().st_size for f in d.iterdir() if f.suffix == ".log")


def test_one_node_sizes_filters_and_versions(broker):
    _produce(broker.bootstrap, "dirs", ["a", "b", "c"])
    with RawConnection(broker.bootstrap) as conn:
        r = _describe(conn, 4, {"dirs": [0, 7], "nope": [0]})
        assert r.error_code == 0 and len(r.results) == 1
        res = r.results[0]
        assert res.error_code == 0 and res.log_dir == str(broker.data_dir.resolve())
        # the partition's size is its segment files' bytes on disk (cases/wire/describe_log_dirs_answers
        # checks the 85 bytes of one 3-record batch against Kafka 4.3.1)
        assert _sizes(res) == {("dirs", 0): _on_disk(broker, "dirs-0")} and _on_disk(broker, "dirs-0") > 61
        assert res.topics[0].partitions[0].offset_lag == 0 and not res.topics[0].partitions[0].is_future_key
        st = os.statvfs(res.log_dir)
        assert res.total_bytes == st.f_blocks * st.f_frsize and 0 < res.usable_bytes <= res.total_bytes
        assert _describe(conn, 4, {}).results[0].topics == []
        assert ("dirs", 0) in _sizes(_describe(conn, 4, None).results[0])
        old = _describe(conn, 1, {"dirs": [0]}).results[0]   # before v4: no volume sizes
        assert (old.total_bytes, old.usable_bytes) == (-1, -1) and _sizes(old) == _sizes(res)
    _produce(broker.bootstrap, "dirs", ["d"])
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        answer = admin.describe_log_dirs()
    finally:
        admin.close()
    # kafka-python 3's answer: per broker, its log dirs as dicts of the response's fields
    assert [(b["broker"], [d["log_dir"] for d in b["log_dirs"]]) for b in answer] == [(1, [res.log_dir])]
    sizes = {(t["name"], p["partition_index"]): p["partition_size"]
             for t in answer[0]["log_dirs"][0]["topics"] for p in t["partitions"]}
    assert sizes[("dirs", 0)] == _on_disk(broker, "dirs-0") > _sizes(res)[("dirs", 0)]


def test_refused_without_describe_on_the_cluster(broker_factory):
    broker = broker_factory({"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                             "allow.everyone.if.no.acl.found": "false"})
    with RawConnection(broker.bootstrap) as conn:
        r = _describe(conn, 4, None)
        assert (r.error_code, r.results) == (Errors.CLUSTER_AUTHORIZATION_FAILED, [])
        assert _describe(conn, 2, None).results == []   # v1-2 have no top-level error: an empty list


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_three_nodes_each_broker_describes_its_own_replicas(tmp_path):
    target = EmbeddedTarget()
    try:
        bootstrap = target.start(Topology(nodes=3, topics=[TopicSpec("r", 3, 2)]), {}, tmp_path / "c")
        for p in range(3):
            _produce(bootstrap, "r", ["x"] * (p + 1), partition=p)
        held = {n: set() for n in target.node_ids()}
        for p in range(3):
            _leader, replicas, _isr = target.partition_replicas("r", p)
            for n in replicas:
                held[n].add(p)
        for node, (host, port) in target.live_addresses():
            with RawConnection(f"{host}:{port}") as conn:
                res = _describe(conn, 4, {"r": [0, 1, 2]}).results[0]
            assert set(i for _t, i in _sizes(res)) == held[node], node
    finally:
        target.stop()
