"""apache-kafka@VERSION: the releases a run can compare (3.9.1, 4.2.0, 4.3.1), each in KRaft mode."""
from __future__ import annotations

import pytest

from conformance.targets import NotApplicable, Topology
from targets_helpers import check_contract

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(900)]  # first use resolves from Maven


@pytest.mark.parametrize("version", ["3.9.1", "4.2.0", "4.3.1"])
def test_release_starts_and_serves_clients(start_target, version):
    target, bootstrap = start_target(f"apache-kafka@{version}", Topology())
    assert (target.name, target.version) == (f"apache-kafka@{version}", version)
    check_contract(target, bootstrap, nodes=1)
    assert f"kafka_2.13-{version}.jar" in {p.name for p in target.lib.iterdir()}
    # Kafka 4 finalizes transaction.version (TV2 since 4.0); 3.9 has no stable level of it.
    assert ("transaction.version" in target.finalized_features) == (version != "3.9.1")
    server_log = target.workdir / "node-1" / "server.log"
    assert "Kafka Server started" in server_log.read_text(), "3.x logs through reload4j, 4.x through log4j2"


def test_3_9_three_combined_nodes(start_target):
    target, bootstrap = start_target("apache-kafka@3.9.1", Topology(nodes=3))
    check_contract(target, bootstrap, nodes=3)


def test_a_feature_level_the_release_lacks_is_not_applicable(start_target):
    with pytest.raises(NotApplicable, match=r"Kafka 3\.9\.1 cannot set the feature level.*transaction\.version"):
        start_target("apache-kafka@3.9.1", Topology(), {"transaction.version": "2"})
    with pytest.raises(NotApplicable, match="Unsupported feature: group.version"):
        start_target("apache-kafka@3.9.1", Topology(), {"group.version": "1"})


def test_a_storage_tool_without_feature_levels_and_a_kraft_release_without_authorizer(start_target):
    """3.0's kafka-storage has no --feature at all; KRaft before 3.2 has no StandardAuthorizer."""
    with pytest.raises(NotApplicable, match=r"Kafka 3\.0\.2 cannot set.*unrecognized arguments: '--feature'"):
        start_target("apache-kafka@3.0.2", Topology(), {"transaction.version": "1"})
    with pytest.raises(NotApplicable, match=r"3\.0\.2 in KRaft mode has no authorizer"):
        start_target("apache-kafka@3.0.2", Topology(),
                     {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})


def test_unclean_leader_election_before_3_9_in_kraft_is_not_applicable(start_target):
    from conformance.targets.topology import TopicSpec
    unclean = [TopicSpec("t", 1, 1, {"unclean.leader.election.enable": "true"})]
    target, _ = start_target("apache-kafka@3.8.1", Topology())
    assert "3.8.1's KRaft controller never elects an unclean leader" in target.topic_configs_reason(unclean)
    assert target.topic_configs_reason([TopicSpec("t", 1, 1)]) is None
    target.stop()
    target, _ = start_target("apache-kafka@3.8.1", Topology(), {"unclean.leader.election.enable": "true"})
    assert target.unappliable_configs({"unclean.leader.election.enable": "true"}) == \
        {"unclean.leader.election.enable": "true"}


def test_a_config_younger_than_the_release_is_unapplied(start_target):
    target, _ = start_target("apache-kafka@3.3.2", Topology(), {"producer.id.expiration.ms": "4000"})
    assert target.unappliable_configs({"producer.id.expiration.ms": "4000", "transaction.max.timeout.ms": "1"}) \
        == {"producer.id.expiration.ms": "4000"}
