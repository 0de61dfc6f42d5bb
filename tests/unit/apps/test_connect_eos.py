"""Kafka Connect's exactly-once source as an application case: the worker's and the connector's
configurations, and the section's validation (the file, the field and what was expected)."""
from __future__ import annotations

from pathlib import Path

import pytest

from conformance.apps.connect_eos import connector_config, worker_properties
from conformance.dsl import parse_case
from conformance.dsl.loader import CaseError


def test_the_worker_has_exactly_once_source_support_and_namespaced_topics():
    props = dict(line.split("=", 1)
                 for line in worker_properties("127.0.0.1:9", lambda n: f"{n}-ab12", 1, 8083).splitlines())
    assert props["exactly.once.source.support"] == "enabled"
    assert props["group.id"] == "connect-cluster-ab12"
    assert {props[k] for k in ("config.storage.topic", "offset.storage.topic", "status.storage.topic")} == {
        "connect-configs-ab12", "connect-offsets-ab12", "connect-status-ab12"}
    assert props["config.storage.replication.factor"] == "1"
    assert props["listeners"] == "http://127.0.0.1:8083" and props["scheduled.rebalance.max.delay.ms"] == "0"
    three = worker_properties("x", str, 5, 1)
    assert "offset.storage.replication.factor=3" in three


def test_the_connector_requires_exactly_once_with_a_transaction_per_poll():
    cfg = connector_config(Path("/tmp/in.txt"), "out-ab12")
    assert cfg["exactly.once.support"] == "required" and cfg["transaction.boundary"] == "poll"
    assert cfg["connector.class"].endswith("FileStreamSourceConnector") and cfg["tasks.max"] == "1"
    assert (cfg["file"], cfg["topic"]) == ("/tmp/in.txt", "out-ab12")


def test_the_section_is_read():
    case = parse_case({"title": "t", "application": {"kind": "connect_eos_source", "lines": 900, "write_s": 5,
                                                     "kills": 2, "kill_every": 300}}, "c.yaml", "apps/c")
    app = case.application
    assert (app.lines, app.write_s, app.kills, app.kill_every) == (900, 5.0, 2, 300)
    assert case.topology.topics == ()


@pytest.mark.parametrize("section, field", [
    ({"kind": "connect_eos_source", "lines": 900, "kills": 3, "kill_every": 300}, "application.kill_every"),
    ({"kind": "connect_eos_source", "write_s": 0}, "application.write_s"),
    ({"kind": "connect_eos_source", "lines": "many"}, "application.lines"),
    ({"kind": "connect_eos_source", "crash": True}, "application.crash"),
    ({"kind": "transactions_test", "kills": 2}, "application.kills"),
    ({"kind": "connect_eos_source", "kills": 0}, "application.kills"),
    ({"kind": "connect_eos_source", "kills": 0, "bounce_target": "clients"}, "application.bounce_target"),
    ({"kind": "connect_eos_source", "bounce_target": "brokers", "bounces": 0}, "application.bounces"),
    ({"kind": "connect_eos_source", "bounce_target": "brokers"}, "topology.nodes"),
    ({"kind": "connect_eos_source", "failure_mode": "clean_bounce"}, "application.failure_mode"),
    ({"kind": "connect_eos_source", "bounce_target": "brokers", "failure_mode": "freeze"}, "application.failure_mode"),
    # a transactions_test cell bounces as transactions_test.py does: no pause
    ({"kind": "transactions_test", "bounce_target": "brokers", "failure_mode": "pause"}, "application.failure_mode"),
])
def test_a_bad_section_names_the_file_and_the_field(section, field):
    with pytest.raises(CaseError) as ei:
        parse_case({"title": "t", "application": section}, "c.yaml", "apps/c")
    assert "c.yaml" in str(ei.value) and field in str(ei.value)


def test_broker_bounces_without_worker_kills_ask_for_restart_and_kill():
    case = parse_case({"title": "t", "topology": {"nodes": 3},
                       "application": {"kind": "connect_eos_source", "kills": 0, "bounce_target": "brokers",
                                       "failure_mode": "clean_bounce", "bounces": 2}}, "c.yaml", "apps/c")
    app = case.application
    assert (app.kills, app.bounce_target, app.failure_mode, app.bounces) == (0, "brokers", "clean_bounce", 2)
    assert app.node_actions() == {"restart", "stop_node"}
