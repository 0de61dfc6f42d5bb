"""The kfake target: franz-go's kfake, built from the pinned Go module, driven by real clients."""
from __future__ import annotations

import pytest

from conformance.targets import KfakeTarget, NotApplicable, TopicSpec, Topology, wire
from targets_helpers import (assert_all_ended, check_addresses_filled_in_place, check_contract, pids_of, producer,
                             produce, read_partitions)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]  # the first start builds kfake (~40 s)


def test_one_node_serves_clients_and_takes_its_configs(start_target):
    target, bootstrap = start_target(
        "kfake", Topology(), {"transaction.max.timeout.ms": "60000", "no.such.config": "1"})
    check_contract(target, bootstrap, nodes=1)
    assert target.node_ids() == [0]  # kfake numbers its brokers from 0
    assert {"transactions", "describe_transactions", "list_transactions"} <= target.capabilities
    # kfake keeps any key, but lists (and acts on) only its own broker configs.
    assert target.unapplied_configs == {"no.such.config": "1"}
    assert target.rss_bytes()[0] > 0
    assert "kfake.log" in [f.name for f in target.log_files()]
    pids = pids_of(target)
    target.stop()
    assert_all_ended(pids)


def test_kill_then_restart_keeps_the_data(start_target):
    target, bootstrap = start_target("kfake", Topology(topics=[TopicSpec("durable")]))
    address = target.addresses[0]
    produce(producer(bootstrap), "durable", [(0, f"k{i}", f"v{i}") for i in range(5)])
    pid = target.procs[0].pid
    target.kill(0)
    assert target.procs[0].returncode() == -9
    with pytest.raises(wire.WireError):
        wire.api_versions(address, timeout=1.0)
    target.restart(0)
    assert target.procs[0].pid != pid and target.addresses[0] == address
    got = read_partitions(bootstrap, "durable", [0], expect=5)
    assert [(r.offset, r.key) for r in got] == [(i, f"k{i}") for i in range(5)]


def test_pause_resume_and_clean_stop(start_target):
    target, bootstrap = start_target("kfake", Topology())
    address = target.addresses[0]
    target.pause(0)
    try:
        with pytest.raises(wire.WireError):
            wire.api_versions(address, timeout=1.0)
        assert target.down == {0}
    finally:
        target.resume(0)
    assert wire.api_versions(address).api_versions
    target.stop_node(0)
    assert target.procs[0].returncode() == 0, "SIGTERM: kfake closes and persists, then exits"
    target.restart(0)
    assert wire.api_versions(address).api_versions


def test_three_nodes_in_one_process(start_target):
    target, bootstrap = start_target("kfake", Topology(nodes=3))
    check_contract(target, bootstrap, nodes=3)
    assert target.node_ids() == [0, 1, 2] and len(target.procs) == 1
    for action in (target.kill, target.pause, target.stop_node, target.restart):
        with pytest.raises(NotApplicable, match="one process"):
            action(1)
    assert target.down == set()
    assert len(wire.metadata(target.addresses[2], []).brokers) == 3


def test_auto_topic_creation_follows_the_kafka_config(start_target):
    target, bootstrap = start_target("kfake", Topology(), {"auto.create.topics.enable": "false"})
    p = producer(bootstrap, **{"message.timeout.ms": 3000})
    p.produce("never-created", value=b"x")
    assert p.flush(10) == 0
    assert "never-created" not in wire.metadata(target.addresses[0], None).topics
    target.stop()
    target, bootstrap = start_target("kfake", Topology(), {"num.partitions": "3"})
    produce(producer(bootstrap), "auto-created", [(0, "k", "v")])
    assert len(wire.metadata(target.addresses[0], ["auto-created"]).topics["auto-created"].partitions) == 3


def test_availability_names_go(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("KCONFORM_CACHE", str(tmp_path / "cache"))  # nothing built there
    ok, reason = KfakeTarget.availability()
    assert not ok and "no `go` on PATH" in reason


def test_addresses_are_filled_in_place(tmp_path):
    check_addresses_filled_in_place(KfakeTarget(), tmp_path, nodes=3)
