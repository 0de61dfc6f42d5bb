"""The external target, pointed at a broker this test runs (Tansu, the cheapest real one)."""
from __future__ import annotations

import pytest

from conformance.targets import ExternalTarget, NotApplicable, TargetUnavailable, TopicSpec, Topology
from targets_helpers import producer, produce, read_partitions

pytestmark = pytest.mark.timeout(120)


def test_external_answers_questions_but_controls_nothing(start_target, tmp_path):
    tansu, tansu_bootstrap = start_target("tansu", Topology())
    (node_id,) = tansu.node_ids()
    with ExternalTarget(bootstrap=tansu_bootstrap) as target:
        bootstrap = target.start(Topology(topics=[TopicSpec("ext", 1)]), {"a.config": "1"}, tmp_path / "ext")
        assert target.node_ids() == [node_id]
        assert bootstrap == tansu_bootstrap
        assert target.capabilities.isdisjoint({"kill", "pause", "restart", "multi_node"})
        assert target.unappliable_configs(target.broker_configs) == {"a.config": "1"}
        assert target.transaction_coordinator("txn") == node_id
        assert target.partition_leader("ext", 0) == node_id
        produce(producer(bootstrap), "ext", [(0, "k", "v")])
        assert [(r.key, r.value) for r in read_partitions(bootstrap, "ext", [0], expect=1)] == [("k", "v")]
        for action in (target.kill, target.pause, target.resume, target.restart, target.stop_node):
            with pytest.raises(NotApplicable) as info:
                action(node_id)
            assert "external" in info.value.reason
    # stop() of the external target ended nothing: the cluster it pointed at still runs.
    assert tansu.procs[node_id].running()


def test_external_needs_a_bootstrap(tmp_path, monkeypatch):
    monkeypatch.delenv("KCONFORM_BOOTSTRAP", raising=False)
    assert ExternalTarget.availability()[0] is False
    with pytest.raises(TargetUnavailable, match="KCONFORM_BOOTSTRAP"):
        ExternalTarget().start(Topology(), {}, tmp_path)


def test_external_reports_too_few_brokers_as_not_applicable(start_target, tmp_path, monkeypatch):
    _, tansu_bootstrap = start_target("tansu", Topology())
    monkeypatch.setenv("KCONFORM_BOOTSTRAP", tansu_bootstrap)
    with ExternalTarget() as target:
        with pytest.raises(NotApplicable, match="1 live broker"):
            target.start(Topology(nodes=3), {}, tmp_path)
