"""CreatePartitions and (Incremental)AlterConfigs as the controller decides them
(broker_impl.cluster.topic_admin, QuorumController.create_partitions / alter_topic_configs):
placement over the alive brokers, Kafka's refusals with its messages, the config operations and
LogConfig's validation, the cluster-wide dynamic broker defaults, and that a validate-only
request changes nothing."""

from __future__ import annotations

import pytest

from broker_impl.cluster.controller import QuorumController
from broker_impl.cluster.topic_admin import APPEND, DELETE, SET, SUBTRACT, alter_topic_configs, new_partition_replicas
from broker_impl.config import BrokerConfig
from broker_impl.protocol.errors import Errors, KafkaError
from tests.unit.cluster.test_quorum_controller import _cluster


def _refused(fn, *args, **kw) -> tuple[Errors, str | None]:
    with pytest.raises(KafkaError) as exc:
        fn(*args, **kw)
    return exc.value.error, exc.value.message


def test_counts_not_above_the_current_are_invalid_partitions():
    assert _refused(new_partition_replicas, "t", 3, 1, 3, None, [1], [1]) == (
        Errors.INVALID_PARTITIONS, "Topic already has 3 partition(s).")
    assert _refused(new_partition_replicas, "t", 3, 1, 2, None, [1], [1]) == (
        Errors.INVALID_PARTITIONS, "The topic t currently has 3 partition(s); 2 would not be an increase.")


def test_manual_assignments_are_checked_as_kafka_checks_them():
    args = ("t", 1, 2, 2)
    assert _refused(new_partition_replicas, *args, [[1, 2], [2, 3]], [1, 2, 3], [1, 2, 3])[1] == (
        "Attempted to add 1 additional partition(s), but only 2 assignment(s) were specified.")
    assert _refused(new_partition_replicas, *args, [[1, 9]], [1, 2, 3], [1, 2, 3])[1] == (
        "The manual partition assignment includes broker 9, but no such broker is registered.")
    assert _refused(new_partition_replicas, *args, [[2, 2]], [1, 2, 3], [1, 2, 3])[1] == (
        "The manual partition assignment includes the broker 2 more than once.")
    assert _refused(new_partition_replicas, *args, [[1]], [1, 2, 3], [1, 2, 3])[0] == Errors.INVALID_REPLICA_ASSIGNMENT
    assert _refused(new_partition_replicas, *args, [[2, 3]], [1, 2, 3], [1])[1] == (
        "All brokers specified in the manual partition assignment for partition 1 are fenced or in controlled shutdown.")
    assert new_partition_replicas(*args, [[3, 1]], [1, 2, 3], [1, 2, 3]) == [[3, 1]]


def test_controller_places_new_partitions_over_alive_brokers_and_validate_only_changes_nothing(tmp_path):
    c = _cluster(tmp_path)
    c.create_topic("t1", 1, 2, {})
    offset = c.image.offset
    c.create_partitions("t1", 4, None, validate_only=True)
    assert len(c.image.topics["t1"].partitions) == 1 and c.image.offset == offset
    new = c.create_partitions("t1", 4, None)
    parts = c.image.topics["t1"].partitions
    assert len(parts) == 4 and parts[1:] == new and c.image.offset == offset + 1
    assert all(len(p.replicas) == 2 and p.isr == p.replicas and p.leader == p.replicas[0] and p.leader_epoch == 0
               for p in new)
    assert len({p.leader for p in new}) == 3           # spread over the three brokers
    assert _refused(c.create_partitions, "nope", 2, None) == (Errors.UNKNOWN_TOPIC_OR_PARTITION, None)


def test_config_operations_and_their_validation():
    cfg = BrokerConfig({})
    assert alter_topic_configs(cfg, "t", {}, [("cleanup.policy", APPEND, "compact")], None) == {
        "cleanup.policy": "delete,compact"}
    assert alter_topic_configs(cfg, "t", {"cleanup.policy": "delete,compact"},
                               [("cleanup.policy", SUBTRACT, "delete"), ("retention.ms", SET, "5")], None) == {
        "cleanup.policy": "compact", "retention.ms": "5"}
    assert alter_topic_configs(cfg, "t", {"retention.ms": "5"}, [("retention.ms", DELETE, None)], None) == {}
    assert alter_topic_configs(cfg, "t", {"retention.ms": "5"}, None, {"segment.ms": "100"}) == {"segment.ms": "100"}
    for ops, message in [
        ([("retention.ms", APPEND, "1")], "Can't APPEND to key retention.ms because its type is not LIST."),
        ([("x.y", SET, "1")], "Unknown topic config name: x.y"),
        ([("min.insync.replicas", SET, "abc")], "Invalid value abc for configuration min.insync.replicas: "
                                                 "Not a number of type INT"),
        ([("min.insync.replicas", SET, "0")], "Invalid value 0 for configuration min.insync.replicas: "
                                               "Value must be at least 1"),
        ([("preallocate", SET, "maybe")], "Invalid value maybe for configuration preallocate: "
                                          "Expected value to be either true or false"),
        ([("min.cleanable.dirty.ratio", SET, "1.5")], "Invalid value 1.5 for configuration "
                                                      "min.cleanable.dirty.ratio: Value must be no more than 1"),
        # measured on Kafka 4.3.1
        ([("segment.bytes", SET, "100")], "Invalid value 100 for configuration segment.bytes: "
                                          "Value must be at least 1048576"),
        ([("compression.gzip.level", SET, "10")], "Invalid value 10 for configuration compression.gzip.level: "
                                                  "Value must be between 1 and 9 or equal to -1"),
        ([("local.retention.ms", SET, "-3")], "Invalid value -3 for configuration local.retention.ms: "
                                              "Value must be at least -2"),
        ([("compression.lz4.level", SET, "0")], "Invalid value 0 for configuration compression.lz4.level: "
                                                "Value must be at least 1"),
        ([("min.compaction.lag.ms", SET, "100"), ("max.compaction.lag.ms", SET, "50")],
         "conflict topic config setting min.compaction.lag.ms (100) > max.compaction.lag.ms (50)"),
        ([("message.downconversion.enable", SET, "true")], "Unknown topic config name: message.downconversion.enable"),
    ]:
        assert _refused(alter_topic_configs, cfg, "t", {}, ops, None) == (Errors.INVALID_CONFIG, message)
    assert _refused(alter_topic_configs, cfg, "", {}, [], None) == (
        Errors.INVALID_REQUEST, "Default topic resources are not allowed.")


def test_controller_commits_a_config_change_once_and_checks_existence_after_validation(tmp_path):
    c = _cluster(tmp_path)
    c.create_topic("t1", 1, 3, {})
    offset = c.image.offset
    c.alter_topic_configs("t1", [("min.insync.replicas", SET, "2")], None, validate_only=True)
    assert c.image.topics["t1"].configs == {} and c.image.offset == offset
    c.alter_topic_configs("t1", [("min.insync.replicas", SET, "2")], None)
    c.alter_topic_configs("t1", [("min.insync.replicas", SET, "2")], None)   # unchanged: no new record
    assert c.image.topics["t1"].configs == {"min.insync.replicas": "2"} and c.image.offset == offset + 1
    assert _refused(c.alter_topic_configs, "nope", [("x.y", SET, "1")], None)[0] == Errors.INVALID_CONFIG
    assert _refused(c.alter_topic_configs, "nope", [("retention.ms", SET, "1")], None) == (
        Errors.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist.")


def test_cluster_wide_broker_defaults_only_for_topic_config_defaults(tmp_path):
    c = _cluster(tmp_path, **{"message.max.bytes": "5000"})
    offset = c.image.offset
    assert c.alter_broker_defaults([("log.retention.ms", SET, "1000")], validate_only=True) == {"log.retention.ms": "1000"}
    assert c.image.broker_defaults == {} and c.image.offset == offset
    c.alter_broker_defaults([("log.retention.ms", SET, "1000"), ("unclean.leader.election.enable", SET, "true")])
    assert c.image.broker_defaults == {"log.retention.ms": "1000", "unclean.leader.election.enable": "true"}
    assert c.image.offset == offset + 1
    assert c.config.str("unclean.leader.election.enable") == "true"      # the controller's elections follow it
    c.alter_broker_defaults([("log.retention.ms", DELETE, None), ("unclean.leader.election.enable", DELETE, None)])
    assert c.image.broker_defaults == {} and c.config.str("message.max.bytes") == "5000"
    assert _refused(c.alter_broker_defaults, [("message.max.bytes", SET, "abc")]) == (
        Errors.INVALID_REQUEST, "Invalid value abc for configuration message.max.bytes: Not a number of type INT")
    assert _refused(c.alter_broker_defaults, [("num.io.threads", SET, "4")])[0] == Errors.INVALID_REQUEST
    assert QuorumController(c.config, tmp_path / "ctl").image.broker_defaults == {}   # durable with the image
