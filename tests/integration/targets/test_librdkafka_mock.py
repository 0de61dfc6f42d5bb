"""The librdkafka-mock target: librdkafka's mock cluster in a host process, driven by real clients."""
from __future__ import annotations

import pytest

from conformance.targets import LibrdkafkaMockTarget, NotApplicable, TopicSpec, Topology, wire
from conformance.targets.librdkafka_mock import MockCommandError
from targets_helpers import (assert_all_ended, check_addresses_filled_in_place, check_contract, pids_of, producer,
                             produce, read_partitions)

pytestmark = pytest.mark.timeout(120)

#: Kafka's error codes, as the mock returns them.
NOT_COORDINATOR = 16
INIT_PRODUCER_ID = 22

def test_three_nodes_serve_clients(start_target):
    target, bootstrap = start_target(
        "librdkafka-mock", Topology(nodes=3), {"transaction.max.timeout.ms": "60000"})
    check_contract(target, bootstrap, nodes=3)
    assert target.node_ids() == [1, 2, 3] and len(target.procs) == 1
    assert "transactions" in target.capabilities
    # The mock has no broker configs: what the case asks for is said to be unapplied.
    assert target.unapplied_configs == {"transaction.max.timeout.ms": "60000"}
    pids = pids_of(target)
    target.stop()
    assert_all_ended(pids)

def test_topics_come_from_the_mock_api(start_target):
    target, bootstrap = start_target("librdkafka-mock", Topology(nodes=2, topics=[TopicSpec("t", 4)]))
    assert len(wire.metadata(target.addresses[1], ["t"]).topics["t"].partitions) == 4
    target.create_topics([TopicSpec("t", 4)])  # exists with the same partitions: accepted
    with pytest.raises(RuntimeError, match="already exists with 4 partitions"):
        target.create_topics([TopicSpec("t", 2)])
    with pytest.raises(NotApplicable, match="cannot give topics configs"):
        target.create_topics([TopicSpec("c", 1, configs={"min.insync.replicas": "2"})])

def test_kill_is_set_down_and_restart_brings_the_data_back(start_target):
    target, bootstrap = start_target("librdkafka-mock", Topology(nodes=3, topics=[TopicSpec("d", 1)]))
    produce(producer(bootstrap), "d", [(0, f"k{i}", f"v{i}") for i in range(3)])
    leader = target.partition_leader("d", 0)
    address = target.addresses[leader]
    target.kill(leader)
    with pytest.raises(wire.WireError):
        wire.api_versions(address, timeout=1.0)
    others = [n for n in target.node_ids() if n != leader]
    assert sorted(wire.metadata(target.addresses[others[0]], []).brokers) == others
    with pytest.raises(NotApplicable, match="no clean shutdown"):
        target.stop_node(others[0])
    with pytest.raises(NotApplicable, match="while it runs"):
        target.restart(others[0])
    target.restart(leader)
    assert target.down == set()
    got = read_partitions(bootstrap, "d", [0], expect=3)
    assert [r.key for r in got] == ["k0", "k1", "k2"]

def test_pause_only_on_one_node(start_target):
    target, bootstrap = start_target("librdkafka-mock", Topology(nodes=1))
    (node,) = target.node_ids()
    target.pause(node)
    try:
        with pytest.raises(wire.WireError):
            wire.api_versions(target.addresses[node], timeout=1.0)
    finally:
        target.resume(node)
    assert wire.api_versions(target.addresses[node]).api_versions
    target.stop()
    target, bootstrap = start_target("librdkafka-mock", Topology(nodes=2))
    with pytest.raises(NotApplicable, match="share one process"):
        target.pause(1)

def test_the_mocks_own_controls(start_target):
    target, bootstrap = start_target("librdkafka-mock", Topology(nodes=3, topics=[TopicSpec("m", 1)]))
    target.set_partition_leader("m", 0, 2)
    assert target.partition_leader("m", 0) == 2
    target.set_coordinator("transaction", "txn-m", 3)
    assert target.transaction_coordinator("txn-m") == 3
    target.set_coordinator("group", "grp-m", 1)
    assert target.group_coordinator("grp-m") == 1
    # The next InitProducerId is answered NOT_COORDINATOR; the client looks again and retries.
    target.push_request_errors(INIT_PRODUCER_ID, [NOT_COORDINATOR])
    p = producer(bootstrap, **{"transactional.id": "txn-m"})
    p.init_transactions(30)
    target.set_apiversion(INIT_PRODUCER_ID, -1, -1)
    assert INIT_PRODUCER_ID not in wire.api_versions(target.addresses[1]).api_versions
    with pytest.raises(MockCommandError, match="BROKER_NOT_AVAILABLE"):
        target.set_partition_leader("m", 0, 99)

def test_advertised_listeners_become_the_advertised_address(start_target):
    target, bootstrap = start_target("librdkafka-mock", Topology(nodes=1),
                                     {"advertised.listeners": "PLAINTEXT://127.0.0.1:1"})
    (node,) = target.node_ids()
    assert wire.metadata(target.addresses[node], []).brokers[node] == ("127.0.0.1", 1)
    assert "advertised.listeners" not in target.unapplied_configs


def test_availability_names_the_bundled_librdkafka():
    import confluent_kafka

    ok, detail = LibrdkafkaMockTarget.availability()
    assert ok and f"librdkafka {confluent_kafka.libversion()[0]}" in detail


def test_addresses_are_filled_in_place(tmp_path):
    check_addresses_filled_in_place(LibrdkafkaMockTarget(), tmp_path, nodes=3)
