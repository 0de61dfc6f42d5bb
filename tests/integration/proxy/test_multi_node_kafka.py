"""Three Apache Kafka nodes, the proxy in front of every one of them (the runner's ProxyFront).

Each node advertises its own proxy port, so clients reconnect through the proxy after Metadata
and the brokers' own connections to each other (inter.broker.listener.name is the advertised
PLAINTEXT listener) cross it too: the transcript shows replica Fetch between brokers on every
node, and a `from: broker` rule acts on those frames and never on a client's.
"""
from __future__ import annotations

import re
import time

import pytest

from conformance.runner.proxying import ProxyFront
from conformance.targets import TARGETS, TopicSpec, Topology
from conformance.targets import wire

from .helpers import produce, read_partition

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(600)]

FETCHER = re.compile(r"broker-(\d+)-fetcher-\d+$")


class Cluster:
    def __init__(self, front: ProxyFront, target, bootstrap: str, start_seconds: float) -> None:
        self.front, self.target, self.bootstrap, self.start_seconds = front, target, bootstrap, start_seconds

    @property
    def proxy(self):
        return self.front.server


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    target = TARGETS["apache-kafka"]()
    ok, reason = target._available()
    if not ok:
        pytest.skip(f"apache-kafka not available: {reason}")
    front = ProxyFront(3)
    try:
        t0 = time.monotonic()
        front.follow(target)
        target.start(Topology(nodes=3), {}, tmp_path_factory.mktemp("kafka3"), node_configs=front.node_configs())
        bootstrap = front.attach(target)
        yield Cluster(front, target, bootstrap, time.monotonic() - t0)
    finally:
        front.stop()
        target.stop()


def fetcher_lines(proxy, node: int, since: float = 0.0) -> list[dict]:
    """Replica Fetch requests that crossed ``node``'s proxy port (from the other brokers)."""
    return [line for line in proxy.transcript.lines()
            if line["node"] == node and line["dir"] == "c2b" and line["api_name"] == "Fetch"
            and FETCHER.match(line["client_id"] or "") and line["t"] >= since]


def wait_for(what: str, probe, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_every_node_advertises_its_proxy_port(cluster, record_property):
    record_property("start_seconds_3_nodes_behind_proxy", round(cluster.start_seconds, 2))
    ports = {i: n.port for i, n in cluster.front.nodes.items()}
    assert cluster.bootstrap.split(",") == [f"127.0.0.1:{ports[i]}" for i in (1, 2, 3)]
    for i in (1, 2, 3):
        md = wire.metadata(("127.0.0.1", ports[i]), [])          # asked through the proxy
        assert {b: port for b, (_host, port) in md.brokers.items()} == ports
        assert cluster.proxy.node(i).upstream == cluster.target.addresses[i] != ("127.0.0.1", ports[i])


def test_clients_produce_and_consume_through_the_proxy_and_brokers_replicate_through_it(cluster, record_property):
    topic = "replicated"
    cluster.target.create_topics([TopicSpec(topic, 1, 3, {"min.insync.replicas": "3"})])
    leader = cluster.target.partition_leader(topic, 0)
    since = cluster.proxy.transcript.now()
    values = [b"v%d" % i for i in range(20)]
    # acks=all with min ISR 3: acknowledged only once both followers fetched the records --
    # through the proxy, since they fetch from the leader's advertised (proxy) port.
    assert produce(cluster.bootstrap, topic, values, acks="all") == [None] * len(values)
    assert read_partition(cluster.bootstrap, topic, len(values)) == values

    lines = cluster.proxy.transcript.lines()
    produced = [ln for ln in lines if ln["api_name"] == "Produce" and ln["dir"] == "c2b" and ln["t"] >= since]
    assert produced and {ln["node"] for ln in produced} == {leader}
    assert all(FETCHER.match(ln["client_id"]) is None for ln in produced)
    # Every node serves replica fetches from both other brokers (the internal topics have
    # partitions led by each node), and the leader of this topic from both its followers.
    for node in (1, 2, 3):
        fetchers = {int(FETCHER.match(ln["client_id"]).group(1)) for ln in fetcher_lines(cluster.proxy, node)}
        assert fetchers == {1, 2, 3} - {node}, f"node {node} saw replica fetches from {fetchers}"
    record_property("frames_seen", len(lines))
    record_property("replica_fetch_requests_seen", sum(len(fetcher_lines(cluster.proxy, n)) for n in (1, 2, 3)))


def test_a_from_broker_rule_acts_on_replica_fetches_not_on_a_consumers(cluster):
    topic = "held"
    cluster.target.create_topics([TopicSpec(topic, 1, 3)])
    leader = cluster.target.partition_leader(topic, 0)
    assert produce(cluster.bootstrap, topic, [b"a", b"b"], acks="all") == [None, None]
    held = cluster.proxy.add_rule({"api": "Fetch", "direction": "request", "from": "broker", "node": leader,
                                   "action": "hold"})
    watch = cluster.proxy.add_rule({"api": "Fetch", "direction": "request", "from": "client", "action": "pass",
                                    "every": True})
    try:
        match = cluster.proxy.wait_for_match(held, timeout=30, acted=True)
        assert match is not None, "no replica Fetch reached the leader's proxy port"
        # A follower's fetch to the leader is held; a consumer still reads from that leader.
        assert read_partition(cluster.bootstrap, topic, 2) == [b"a", b"b"]
        lines = cluster.proxy.transcript.lines()
        acted = [ln for ln in lines if ln["rule"] == held]
        assert len(acted) == 1 and FETCHER.match(acted[0]["client_id"]) and acted[0]["node"] == leader
        assert acted[0]["action"] == "hold"
        consumer_fetches = [ln for ln in lines if ln["api_name"] == "Fetch" and ln["dir"] == "c2b"
                            and not FETCHER.match(ln["client_id"] or "") and ln["t"] >= match.t]
        assert consumer_fetches and all(ln["rule"] is None for ln in consumer_fetches)
        assert cluster.proxy.rules.counts(watch)[0] >= len(consumer_fetches)
        assert cluster.proxy.rules.counts(held)[1] == 1   # one frame held: nth 1, not every
    finally:
        cluster.proxy.remove_rule(watch)
        assert cluster.proxy.remove_rule(held) in (0, 1)


def test_a_restarted_node_keeps_its_port_and_replicates_through_the_proxy_again(cluster):
    before = dict(cluster.target.addresses)
    cluster.target.restart(2)
    assert cluster.target.addresses == before
    assert cluster.proxy.node(2).upstream == before[2]
    since = cluster.proxy.transcript.now()
    # Node 2's fetchers come back through nodes 1 and 3's proxy ports; clients reach node 2.
    for node in (1, 3):
        wait_for(f"broker-2 fetching from node {node} again",
                 lambda node=node: [ln for ln in fetcher_lines(cluster.proxy, node, since)
                                    if ln["client_id"].startswith("broker-2-")])
    md = wire.metadata(("127.0.0.1", cluster.front.nodes[2].port), [])
    assert 2 in md.brokers
    topic = "after-restart"
    cluster.target.create_topics([TopicSpec(topic, 1, 3)])
    assert produce(cluster.bootstrap, topic, [b"x"], acks="all") == [None]
    assert read_partition(cluster.bootstrap, topic, 1) == [b"x"]
