"""`from: client|broker`: telling a client's request from one Kafka's brokers send each other.

The client ids are those a 3-node Kafka 4.3.1 cluster behind the proxy sent (replica fetchers,
the TransactionMarkerChannelManager, the AddPartitionsToTxnManager); a response is matched on
its request's client id. Also: how a case's proxy rule reaches the proxy (DSL -> ProxyFront ->
Rule), including `node: N` naming the N-th node's proxy port, and `from:` one broker by role
(the requests a coordinator about to die sends, resolved when the rule is added).
"""
from __future__ import annotations

import textwrap

import pytest

from broker_impl.codec import API, FrameInfo, request_info
from conformance.dsl import CaseError, load_case
from conformance.proxy.frames import PendingRequests
from conformance.dsl.model import NodeRef
from conformance.proxy.rules import Rule, RuleBook, RuleError, broker_of, source_of
from conformance.runner.faults import FaultRealiser
from conformance.runner.namespace import Namespace
from conformance.runner.proxying import ProxyFront
from conformance.targets.base import NotApplicable

KAFKA_INTER_BROKER_IDS = ["broker-2-fetcher-0", "broker-13-fetcher-3", "broker-1-txn-marker-sender",
                          "AddPartitionsManager-client-3"]
CLIENT_IDS = ["rdkafka", "producer-1", "consumer-app-1", "my-client-1", "broker-", "broker-x-fetcher-0",
              "kafka-python-producer-1", "", None]


def fetch_request(client_id: str | None, corr: int = 1) -> bytes:
    return API["Fetch"].request_frame(12, corr, client_id, API["Fetch"].Request())


@pytest.mark.parametrize("cid", KAFKA_INTER_BROKER_IDS)
def test_kafkas_inter_broker_clients_are_brokers(cid):
    assert source_of(cid) == "broker"
    assert request_info(fetch_request(cid)).client_id == cid


@pytest.mark.parametrize("cid", CLIENT_IDS)
def test_everything_else_is_a_client(cid):
    assert source_of(cid) == "client"


def test_from_broker_selects_replica_fetches_and_their_responses_only():
    book = RuleBook()
    rid = book.add({"api": "Fetch", "direction": "request", "from": "broker", "action": "drop", "every": True})
    client = request_info(fetch_request("rdkafka", 1))
    follower = request_info(fetch_request("broker-2-fetcher-0", 2))
    assert book.decide(1, 1, client, 0.0) is None
    assert book.decide(1, 2, follower, 0.0) == (rid, book.rule(rid), None)
    assert book.counts(rid) == (1, 1)

    # b2c: the response carries its request's client id, so it is matched the same way.
    resp_rule = book.add({"api": "Fetch", "direction": "response", "from": "client", "action": "pass"})
    pending = PendingRequests()
    pending.sent(follower)
    pending.sent(request_info(fetch_request("rdkafka", 3)))
    to_follower = pending.answer((8).to_bytes(4, "big") + (2).to_bytes(4, "big") + b"\0" * 4)
    to_client = pending.answer((8).to_bytes(4, "big") + (3).to_bytes(4, "big") + b"\0" * 4)
    assert (to_follower.client_id, to_client.client_id) == ("broker-2-fetcher-0", "rdkafka")
    book.decide(1, 2, to_follower, 0.1)
    assert book.counts(resp_rule) == (0, 0)
    book.decide(1, 1, to_client, 0.1)
    assert book.counts(resp_rule)[0] == 1


def test_no_source_matches_both_and_bad_sources_are_refused():
    rule = Rule.from_dict({"api": "Fetch", "action": "pass"})
    for cid in ("rdkafka", "broker-1-fetcher-0"):
        assert rule.selects(1, FrameInfo("c2b", 10, 1, "Fetch", 12, 1, cid))
    with pytest.raises(RuleError, match="client or broker"):
        Rule.from_dict({"api": "Fetch", "action": "pass", "from": "controller"})
    assert Rule.from_dict({"api": "Fetch", "action": "pass", "from": "broker"}).to_dict()["from"] == "broker"


# ----------------------------------------------------------------------------- case data
CASE = """
title: t
topology: {nodes: 3, topics: [t1]}
actors:
  p1: {role: producer}
steps:
  - {actor: p1, op: send, topic: t1, value: x}
"""


def load(tmp_path, fault: str):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(CASE) + f"  - fault: {fault}\n")
    return load_case(path, tmp_path)


def test_case_rule_from_broker_every_reaches_the_proxy(tmp_path):
    case = load(tmp_path, "{proxy: hold, api: Fetch, direction: request, from: broker, every: true, node: 3}")
    rule = case.steps[1].fault.proxy
    assert (rule.source, rule.every, rule.node) == ("broker", True, 3)
    assert "from broker" in case.steps[1].fault.describe()
    front = ProxyFront(3)
    try:
        configs = front.node_configs()
        listeners = {i: c["advertised.listeners"] for i, c in configs.items()}
        assert sorted(listeners) == [1, 2, 3] and len(set(listeners.values())) == 3
        assert front.server.bootstrap == ",".join(n.address for n in front.nodes.values())
        rid = front.add_rule(rule)
        made = front.server.rules.rule(rid)
        assert (made.action, made.api, made.direction, made.source, made.every, made.node) == (
            "hold", 1, "request", "broker", True, 3)
        [check] = front.fault_checks()
        assert not check.passed and "from broker #1+" in check.name
    finally:
        front.stop()


def test_case_rule_naming_a_node_the_proxy_does_not_front_is_not_applicable(tmp_path):
    rule = load(tmp_path, "{proxy: drop, api: Produce, node: 3}").steps[1].fault.proxy
    front, two = ProxyFront(1), ProxyFront(2)
    try:
        with pytest.raises(NotApplicable, match="node 3"):
            front.add_rule(rule)
        assert front.broker_configs() == {"advertised.listeners": front.node.listener}
        with pytest.raises(ValueError, match="node_configs"):
            two.broker_configs()
    finally:
        front.stop()
        two.stop()


@pytest.mark.parametrize("fault, field", [
    ("{proxy: hold, api: Fetch, from: controller}", "steps[1].fault.from"),
    ("{proxy: hold, api: Fetch, every: yes-please}", "steps[1].fault.every"),
    # from: a broker by role needs its `of`; `node` is the proxy node a frame crosses, not a sender
    ("{proxy: drop, api: WriteTxnMarkers, from: node, node: 1}", "steps[1].fault.from"),
    ("{proxy: drop, api: WriteTxnMarkers, from: coordinator}", "steps[1].fault.of"),
    ("{proxy: drop, api: WriteTxnMarkers, of: txn-1}", "steps[1].fault.of"),
])
def test_bad_case_rules(tmp_path, fault, field):
    with pytest.raises(CaseError) as info:
        load(tmp_path, fault)
    assert info.value.field == field


# ------------------------------------------------------------- one broker's requests (by role)
def test_broker_of_reads_the_node_id_kafkas_inter_broker_clients_carry():
    assert [broker_of(c) for c in KAFKA_INTER_BROKER_IDS] == [2, 13, 1, 3]
    assert {broker_of(c) for c in CLIENT_IDS} == {None}


def test_source_node_selects_the_requests_one_broker_sends():
    rule = Rule.from_dict({"api": "WriteTxnMarkers", "action": "drop", "every": True, "source_node": 2})
    assert rule.on_broker_traffic()
    mine, other = (FrameInfo("c2b", 10, 27, "WriteTxnMarkers", 1, 1, f"broker-{n}-txn-marker-sender") for n in (2, 12))
    assert rule.selects(1, mine) and not rule.selects(1, other)
    assert not rule.selects(1, FrameInfo("c2b", 10, 27, "WriteTxnMarkers", 1, 1, "rdkafka"))
    with pytest.raises(RuleError, match="from: client"):
        Rule.from_dict({"api": "Fetch", "action": "pass", "from": "client", "source_node": 1})


def test_case_rule_from_a_broker_by_role_is_resolved_when_added_and_waited_for(tmp_path):
    """`from: coordinator, of: txn-1`: the realiser resolves the role when the rule is added
    and the rule then drops only that broker's requests; `wait_fault` waits until it acted."""
    case = load(tmp_path, "{proxy: drop, api: WriteTxnMarkers, every: true, from: coordinator, of: txn-1}\n"
                          "  - wait_fault: {timeout_ms: 1000}")
    f = case.steps[1].fault
    assert (f.target, f.proxy.source) == (NodeRef("coordinator", of="txn-1"), "broker")
    assert "from coordinator of txn-1" in f.describe()

    class Coordinated:
        name = "coordinated"

        def transaction_coordinator(self, txn_id, timeout):
            assert txn_id == "txn-1-x"  # the case namespace
            return 2

    front = ProxyFront(3)
    try:
        realiser = FaultRealiser(Coordinated(), Namespace("x"), front)
        event = realiser.apply(f)
        assert event["node"] == 2
        assert front.server.rules.rule(event["rule"]).source_node == 2
        with pytest.raises(TimeoutError, match="acted on no frame"):
            realiser.wait_fired(50)
        other = FrameInfo("c2b", 10, 27, "WriteTxnMarkers", 1, 1, "broker-3-txn-marker-sender")
        mine = FrameInfo("c2b", 10, 27, "WriteTxnMarkers", 1, 2, "broker-2-txn-marker-sender")
        assert front.server.rules.decide(3, 1, other, 0.0) is None
        assert front.server.rules.decide(2, 2, mine, 0.0)[0] == event["rule"]
        assert realiser.wait_fired(1000)["fired"]
    finally:
        front.stop()

