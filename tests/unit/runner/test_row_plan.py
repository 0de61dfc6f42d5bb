"""Which rows run on the run's shared Apache Kafka instance (row_plan).

Why: rows on the shared instance run at the same time as other rows. A case whose outcome
depends on broker-wide state says `topology.exclusive: true` and must get brokers of its own:
txn/produce_to_unadded_partition's Produce v9 was answered TRANSACTION_ABORTABLE instead of
INVALID_TXN_STATE when another row's Produce v11 opened the coordinator's verification batch
(Kafka's AddPartitionsToTxnManager keeps one expected operation per batch). No target starts
here: row_plan decides before anything runs.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

from conformance.dsl import load_case
from conformance.runner.row import row_plan

CASE = """
title: t
topology: {topics: [t1]%s}
actors:
  p1: {role: producer, config: {transactional.id: x}}
steps:
  - p1: init_transactions
"""


def plan(tmp_path: Path, topology_extra: str):
    path = tmp_path / "txn" / "c.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(CASE % topology_extra))
    case = load_case(path, tmp_path)
    return case, row_plan(case, "apache-kafka", "off")


def test_a_fault_free_case_shares_the_apache_kafka_instance(tmp_path):
    case, p = plan(tmp_path, "")
    assert case.topology.exclusive is False
    assert p.shared is True


def test_an_exclusive_case_gets_brokers_of_its_own(tmp_path):
    case, p = plan(tmp_path, ", exclusive: true")
    assert case.topology.exclusive is True
    assert p.shared is False


ACL_CASE = """
title: t
topology: {topics: [t1]}
actors: {}
steps:
  - {actor: raw, op: request, api: CreateAcls, version: 2, expect: any,
     body: {creations: [{resource_type: %d, resource_name: "%s", resource_pattern_type: 3, principal: "User:*",
                         host: "*", operation: 4, permission_type: 2}]}}
"""


def acl_plan(tmp_path: Path, rtype: int, name: str):
    path = tmp_path / "security" / "c.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(ACL_CASE % (rtype, name))
    case = load_case(path, tmp_path)
    return case, row_plan(case, "apache-kafka", "off")


def test_acls_on_the_wildcard_or_the_cluster_get_brokers_of_their_own(tmp_path):
    # A DENY on topic `*` or on kafka-cluster would decide every other row's authorizations on
    # that instance (security/idempotent_write_denied's wildcard READ made the next rows'
    # Produce TOPIC_AUTHORIZATION_FAILED); an ACL on a case's own (made unique) name would not.
    for rtype, name in ((2, "*"), (4, "kafka-cluster")):
        case, p = acl_plan(tmp_path, rtype, name)
        assert case.changes_broker_wide_state() and p.shared is False, name
    case, p = acl_plan(tmp_path, 5, "txn-1")
    assert not case.changes_broker_wide_state() and p.shared is True


BROKER_CONFIG_CASE = """
title: broker config
topology: {topics: [t1]}
steps:
  - {actor: raw, op: request, api: IncrementalAlterConfigs, version: 1,
     body: {resources: [{resource_type: %d, resource_name: "%s",
                         configs: [{name: message.max.bytes, config_operation: 0, value: "100"}]}],
            validate_only: %s}}
"""


def test_broker_config_changes_get_brokers_of_their_own(tmp_path):
    # wire/alter_broker_default_configs set the cluster-wide message.max.bytes 100 on the shared
    # Apache Kafka instance while wire/alter_configs_answers ran there: its topic described 100
    # (DYNAMIC_DEFAULT_BROKER_CONFIG) where Kafka's default was expected.
    def plan(rtype: int, name: str, validate_only: str):
        path = tmp_path / "wire" / f"c{rtype}{validate_only}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(BROKER_CONFIG_CASE % (rtype, name, validate_only))
        case = load_case(path, tmp_path)
        return case, row_plan(case, "apache-kafka", "off")

    for rtype, name in ((4, ""), (4, "1"), (8, "1")):
        case, p = plan(rtype, name, "false")
        assert case.changes_broker_wide_state() and p.shared is False, (rtype, name)
    for rtype, name, validate_only in ((2, "t1", "false"), (4, "", "true")):
        case, p = plan(rtype, name, validate_only)
        assert not case.changes_broker_wide_state() and p.shared is True, (rtype, name, validate_only)
