"""Kafka Streams under broker bounces as an application case: the section validated (its keys,
the other kinds' keys named, a single node refused), the capabilities a target needs for it, and
the bounce helpers of every application run asked of a real target's answers (a fake target
object holds only what partition_replicas says)."""
from __future__ import annotations

import pytest

from conformance.apps import run_class
from conformance.apps.base import ApplicationRun
from conformance.apps.streams_bounce import StreamsBrokerBounceRun
from conformance.dsl import parse_case
from conformance.dsl.loader import CaseError


def _case(section: dict, nodes: int = 3):
    return parse_case({"title": "t", "topology": {"nodes": nodes}, "application": section}, "c.yaml", "apps/c")


def test_the_section_is_validated_and_asks_for_restart_and_kill():
    case = _case({"kind": "streams_broker_bounce", "processing_guarantee": "exactly_once_v2",
                  "failure_mode": "hard_bounce", "bounces": 3, "down_s": 1.5})
    app = case.application
    assert (app.kind, app.failure_mode, app.bounces, app.down_s) == ("streams_broker_bounce", "hard_bounce", 3, 1.5)
    assert app.node_actions() == {"restart", "kill"}
    assert _case({"kind": "streams_broker_bounce", "failure_mode": "clean_bounce"}).application.node_actions() == \
        {"restart", "stop_node"}
    assert case.topology.topics == ()
    assert run_class("streams_broker_bounce") is StreamsBrokerBounceRun


@pytest.mark.parametrize("section, nodes, field, words", [
    ({"kind": "streams_broker_bounce", "failure_mode": "shutdown"}, 3, "application.failure_mode", "hard_bounce"),
    ({"kind": "streams_broker_bounce", "bounces": 0}, 3, "application.bounces", ""),
    ({"kind": "streams_broker_bounce", "down_s": -1}, 3, "application.down_s", ">= 0"),
    ({"kind": "streams_broker_bounce", "crash": True}, 3, "application.crash", "a key of streams_smoke"),
    ({"kind": "streams_broker_bounce", "bounce_target": "brokers"}, 3, "application.bounce_target",
     "a key of transactions_test"),
    ({"kind": "streams_smoke", "down_s": 2}, 3, "application.down_s",
     "a key of transactions_test and streams_broker_bounce"),
    ({"kind": "streams_broker_bounce"}, 1, "topology.nodes", "2 or more"),
])
def test_a_bad_section_names_the_file_the_field_and_what_was_expected(section, nodes, field, words):
    with pytest.raises(CaseError) as ei:
        _case(section, nodes)
    assert "c.yaml" in str(ei.value) and field in str(ei.value) and words in str(ei.value)


class _Answers:
    """What a target's Metadata said, one answer per call (an exception: no live node answered)."""

    def __init__(self, answers):
        self.answers = list(answers)

    def partition_replicas(self, topic, partition):
        a = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(a, Exception):
            raise a
        return a


def _run(target, nodes=3):
    case = _case({"kind": "streams_broker_bounce"}, nodes)
    return ApplicationRun(case, target, "127.0.0.1:9", None, None)


def test_the_leader_is_asked_again_until_a_live_node_names_one():
    run = _run(_Answers([ConnectionError("down"), (-1, (1, 2, 3), (2, 3)), (2, (1, 2, 3), (2, 3))]))
    assert run.leader_of("data", 0) == 2


def test_the_isr_is_whole_only_when_every_replica_is_in_it():
    answers = _Answers([(1, (1, 2, 3), (1, 2)), KeyError("x"), (1, (1, 2, 3), (1, 2, 3))])
    assert _run(answers).isr_full([("data", 0, 3)]) is not None
    assert answers.answers == [(1, (1, 2, 3), (1, 2, 3))]   # asked until the third answer
