"""conformance/group_protocol.py: which rows a run under the KIP-848 protocol has, what its
consumers are given, and the check that they really were KIP-848 members."""
from __future__ import annotations

import pytest

from conformance import group_protocol as gp
from conformance.clients.registry import CLIENTS
from conformance.dsl import load_cases
from conformance.dsl.loader import parse_case
from conformance.dsl.model import ActorDef
from conformance.runner.actors import Actors
from conformance.runner.namespace import Namespace


def _case(actors: dict, steps=None):
    return parse_case({"title": "t", "topology": {"topics": [{"name": "in", "partitions": 1}]}, "actors": actors,
                       "steps": steps or [{"actor": next(iter(actors)), "op": "start"}]}, "x.yaml", "x")


SUBSCRIBER = {"c": {"role": "consumer", "inputs": ["in"]}}
RAW_ONLY = {"p": {"role": "producer"}}   # the raw actor is implicit: steps name it


def test_a_classic_run_changes_nothing():
    case = _case(SUBSCRIBER)
    assert gp.current() == gp.CLASSIC
    assert gp.case_reason(case) is None and gp.consumer_defaults() == {} and gp.row_protocol() is None
    assert gp.client_reason(case, "kafka-python", CLIENTS["kafka-python"].features) is None
    assert gp.target_reason(case, "tansu", frozenset()) is None
    assert gp.members_check(case, []) is None


def test_a_consumer_run_gives_every_consumer_the_protocol_and_drops_classic_only_keys(tmp_path):
    actors = Actors({}, "confluent", "127.0.0.1:1", Namespace(), tmp_path, {})
    d = ActorDef(name="c", role="copier", config={"group.id": "g", "session.timeout.ms": "6000",
                                                  "partition.assignment.strategy": "x", "transactional.id": "t"})
    with gp.use("consumer"):
        cfg = actors.consumer_config(d)
        assert cfg["group.protocol"] == "consumer" and gp.row_protocol() == "consumer"
        assert "session.timeout.ms" not in cfg and "partition.assignment.strategy" not in cfg
        assert "transactional.id" not in cfg      # the producer's half of a copier
    assert "group.protocol" not in actors.consumer_config(d)
    with pytest.raises(ValueError, match="classic, consumer"):
        with gp.use("kip848"):
            pass


@pytest.mark.parametrize("actors,reason", [
    (SUBSCRIBER, None),
    (RAW_ONLY, "no consumer driven by a client"),
    ({"c": {"role": "consumer", "inputs": ["in"], "config": {"session.timeout.ms": 6000}}},
     "actor 'c' sets session.timeout.ms"),
    ({"c": {"role": "copier", "inputs": ["in"],
            "config": {"partition.assignment.strategy": "org.apache.kafka.clients.consumer.RangeAssignor"}}},
     "actor 'c' sets partition.assignment.strategy"),
    ({"c": {"role": "consumer", "inputs": ["in"], "config": {"group.protocol": "classic"}}},
     "sets group.protocol=classic"),
])
def test_which_cases_have_a_row_under_the_consumer_protocol(actors, reason):
    with gp.use("consumer"):
        why = gp.case_reason(_case(actors))
    assert (why is None) if reason is None else (reason in why)


def test_clients_and_targets_without_kip848_have_no_row():
    case = _case(SUBSCRIBER)
    with gp.use("consumer"):
        for client in ("java", "confluent", "franz-go"):
            assert gp.client_reason(case, client, CLIENTS[client].features) is None
        for client in ("kafka-python", "aiokafka", "sarama", "kafkajs"):
            assert "no KIP-848 consumer" in gp.client_reason(case, client, CLIENTS[client].features)
        assert "ConsumerGroupHeartbeat" in gp.target_reason(case, "apache-kafka@3.9.1", frozenset({"transactions"}))
        assert gp.target_reason(case, "embedded", frozenset({gp.CAPABILITY})) is None


def test_a_case_that_sets_the_consumer_protocol_itself_needs_it_in_every_run():
    own = _case({"c": {"role": "consumer", "inputs": ["in"], "config": {"group.protocol": "consumer"}}})
    assert gp.uses_consumer_protocol(own)
    assert "no KIP-848 consumer" in gp.client_reason(own, "sarama", CLIENTS["sarama"].features)
    assert gp.target_reason(own, "kfake", frozenset()) is not None
    [library_case] = load_cases(["eos/consumer_protocol_rebalance"])
    assert gp.uses_consumer_protocol(library_case) and gp.case_reason(library_case) is None


def _frame(api_key: int, client_id: str = "consumer-1") -> dict:
    return {"dir": "c2b", "api_key": api_key, "client_id": client_id}


def test_the_members_check_fails_a_silent_fallback_to_the_classic_protocol():
    case = _case(SUBSCRIBER)
    with gp.use("consumer"):
        ok = gp.members_check(case, [_frame(18), _frame(68), _frame(68), _frame(11, "kconform-raw")])
        assert ok.passed and "2 ConsumerGroupHeartbeat and 0 JoinGroup" in ok.message
        assert not gp.members_check(case, [_frame(18), _frame(11), _frame(14)]).passed
        assert not gp.members_check(case, []).passed
        # assigned consumers join nothing: nothing to check
        assigned = _case({"c": {"role": "consumer", "inputs": ["in"], "assign": True}})
        assert gp.members_check(assigned, []) is None
