"""The apache-kafka target, one node: real Kafka from Maven Central, driven by real clients."""
from __future__ import annotations

import pytest

from conformance.targets import ApacheKafkaTarget, NoLiveNode, TopicSpec, Topology, wire
from conformance.targets.apache_kafka import CONTROLLER_NODE_ID, read_properties
from targets_helpers import producer, produce, read_partitions

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(600)]

TOPICS = [TopicSpec("events", partitions=2), TopicSpec("txn", partitions=1), TopicSpec("durable", partitions=1)]


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    """One single-node cluster shared by this module's tests (each uses its own topic).

    The tests that kill or pause the node put it back before they end.
    """
    target = ApacheKafkaTarget()
    ok, reason = target._available()
    if not ok:
        pytest.skip(f"apache-kafka not available: {reason}")
    try:
        bootstrap = target.start(Topology(nodes=1, topics=TOPICS), {}, tmp_path_factory.mktemp("kafka1"))
        yield target, bootstrap
    finally:
        target.stop()


def test_single_node_starts_with_topics_and_answers_metadata(kafka):
    target, bootstrap = kafka
    assert target.node_ids() == [1]
    assert bootstrap == f"127.0.0.1:{target.addresses[1][1]}"
    assert [target.partition_leader("events", p) for p in (0, 1)] == [1, 1]
    # Kafka 4 offers the transaction admin APIs and finalizes transaction.version.
    assert {"kill", "pause", "restart", "multi_node", "describe_transactions", "transactions"} <= target.capabilities
    assert "transaction.version" in target.finalized_features
    assert target.group_coordinator("any-group") == 1
    assert all(f.exists() for f in target.log_files())


def test_produce_then_consume(kafka):
    target, bootstrap = kafka
    records = [(i % 2, f"k{i}", f"v{i}") for i in range(20)]
    produce(producer(bootstrap), "events", records)
    got = read_partitions(bootstrap, "events", [0, 1], expect=20)
    assert sorted((r.partition, r.key, r.value) for r in got) == sorted(records)
    for partition in (0, 1):
        offsets = [r.offset for r in got if r.partition == partition]
        assert offsets == list(range(10)), "each partition holds its 10 records once, in order"


def test_transaction_commit_and_abort(kafka):
    target, bootstrap = kafka
    p = producer(bootstrap, **{"transactional.id": "kconform-target-txn"})
    p.init_transactions(30)
    assert target.transaction_coordinator("kconform-target-txn") == 1
    p.begin_transaction()
    produce(p, "txn", [(0, f"c{i}", "committed") for i in range(5)])
    p.commit_transaction(30)
    p.begin_transaction()
    produce(p, "txn", [(0, f"a{i}", "aborted") for i in range(5)])
    p.abort_transaction(30)

    committed = read_partitions(bootstrap, "txn", [0], isolation="read_committed", expect=5)
    assert [r.key for r in committed] == [f"c{i}" for i in range(5)]
    uncommitted = read_partitions(bootstrap, "txn", [0], isolation="read_uncommitted", expect=10)
    assert [r.key for r in uncommitted] == [f"c{i}" for i in range(5)] + [f"a{i}" for i in range(5)]
    # Offsets 5 and 11 hold the COMMIT and ABORT markers, which no consumer returns.
    assert [r.offset for r in uncommitted] == [0, 1, 2, 3, 4, 6, 7, 8, 9, 10]


def test_pause_then_resume(kafka):
    target, bootstrap = kafka
    address = target.addresses[1]
    target.pause(1)
    try:
        with pytest.raises(wire.WireError):
            wire.api_versions(address, timeout=1.0)
        assert 1 in target.down
    finally:
        target.resume(1)
    assert wire.api_versions(address).api_versions
    assert target.down == set()


def test_kill_then_restart_keeps_the_data(kafka):
    target, bootstrap = kafka
    produce(producer(bootstrap), "durable", [(0, f"k{i}", f"v{i}") for i in range(5)])
    pid = target.procs[1].pid
    target.kill(1)
    assert target.procs[1].returncode() == -9
    with pytest.raises(wire.WireError):
        wire.api_versions(target.addresses[1], timeout=1.0)
    with pytest.raises(NoLiveNode):
        target.transaction_coordinator("anything", timeout=1)

    target.restart(1)
    assert target.procs[1].pid != pid
    assert target.addresses[1] == (bootstrap.split(":")[0], int(bootstrap.split(":")[1]))
    target.wait_topics_ready([TopicSpec("durable")])
    got = read_partitions(bootstrap, "durable", [0], expect=5)
    assert [(r.offset, r.key) for r in got] == [(i, f"k{i}") for i in range(5)]


def test_feature_levels_are_set_at_format_time(start_target):
    """transaction.version is a KRaft feature, not a broker config: it must reach the cluster."""
    target, bootstrap = start_target("apache-kafka", Topology(nodes=1), {"transaction.version": "1"})
    assert target.finalized_features["transaction.version"] == 1
    server_properties = (target.workdir / "node-1" / "server.properties").read_text()
    assert "transaction.version" not in server_properties


def test_each_node_is_formatted_as_its_own(start_target):
    """Nodes are formatted as copies of the storage tool's output for their kind of node: each
    copy must be that node's (node.id, its own directory.id, this cluster's id), and a copy made
    for one set of feature levels must never stand for another."""
    target, _ = start_target("apache-kafka", Topology(nodes=3, controller="dedicated"), {"transaction.version": "1"})
    assert target.finalized_features["transaction.version"] == 1
    metas = {i: read_properties(target.workdir / f"node-{i}" / "data" / "meta.properties")
             for i in (1, 2, 3, CONTROLLER_NODE_ID)}
    assert {i: m["node.id"] for i, m in metas.items()} == {i: str(i) for i in metas}
    assert {m["cluster.id"] for m in metas.values()} == {target.cluster_id}
    assert len({m["directory.id"] for m in metas.values()}) == len(metas)
    assert all((target.workdir / f"node-{i}" / "data" / "bootstrap.checkpoint").is_file() for i in metas)
    other, _ = start_target("apache-kafka", Topology(nodes=1))
    assert other.finalized_features["transaction.version"] == 2


def test_unknown_version_fails_with_maven_message(tmp_path, monkeypatch):
    monkeypatch.setenv("KCONFORM_CACHE", str(tmp_path / "cache"))
    target = ApacheKafkaTarget(version="0.0.0-no-such-release")
    ok, reason = target._available()
    if not ok:
        pytest.skip(f"apache-kafka not available: {reason}")
    with pytest.raises(RuntimeError, match="mvn dependency:copy-dependencies failed"):
        target.start(Topology(), {}, tmp_path / "work")
    assert target.procs == {}
