"""The rewriting proxy: in front of brokers that advertise their own addresses, clients still
never bypass it, because the broker addresses in responses are rewritten to proxy ports.

Checked with real brokers and a real client: the embedded broker started WITHOUT the proxy's
`advertised.listeners`, and Tansu (its own node id 111, no way to advertise another address).
A client that bypassed the proxy after Metadata would show up as Produce/Fetch frames missing
from the transcript, and as a proxy fault that never acts.
"""

from __future__ import annotations

import base64

import pytest
from confluent_kafka import KafkaException, Producer

from broker_impl.codec import API, API_BY_KEY, RESPONSE_HEADER, FrameInfo
from conformance.proxy.rewrite import rewrite_response, rewritten_apis
from conformance.runner.proxying import ProxyFront
from conformance.targets import TopicSpec, Topology, make_target

from .helpers import produce, read_partition

pytestmark = pytest.mark.slow


def test_every_api_whose_response_names_brokers_is_rewritten():
    names = {API_BY_KEY[k].name for k in rewritten_apis()}
    # Metadata brokers, FindCoordinator coordinator(s), DescribeCluster brokers, and the
    # NodeEndpoints of Produce / Fetch (KIP-951): found in Kafka's schemas, not listed by hand.
    assert {"Metadata", "FindCoordinator", "DescribeCluster", "Produce", "Fetch"} <= names
    assert "ApiVersions" not in names and "EndTxn" not in names


def metadata_response(version: int, brokers: list[tuple[int, str, int]]) -> tuple[bytes, FrameInfo]:
    api = API["Metadata"]
    R = api.Response
    body = R(brokers=[R.MetadataResponseBroker(node_id=n, host=h, port=p) for n, h, p in brokers],
             cluster_id="c", controller_id=brokers[0][0], topics=[])
    frame = api.response_frame(version, 7, body)
    return frame, FrameInfo("b2c", len(frame), api.key, "Metadata", version, 7)


@pytest.mark.parametrize("version", [1, 9, 12])
def test_rewrite_changes_only_addresses_and_keeps_the_rest(version):
    frame, info = metadata_response(version, [(111, "127.0.0.1", 9092), (112, "localhost", 9093)])
    local = {111: ("127.0.0.1", 40001), 112: ("127.0.0.1", 40002)}
    new, changes = rewrite_response(frame, info, lambda n, h, p: local[n])
    api = API["Metadata"]
    header, pos = RESPONSE_HEADER.decode(api.response_header_version(version), new, 4)
    body, _ = api.response.decode(version, new, pos)
    assert header.correlation_id == 7
    assert [(b.node_id, b.host, b.port) for b in body.brokers] == [(111, "127.0.0.1", 40001), (112, "127.0.0.1", 40002)]
    assert body.controller_id == 111 and body.cluster_id == ("c" if version >= 2 else None)  # v2+ carries it
    assert changes == ["node 111: 127.0.0.1:9092 -> 127.0.0.1:40001", "node 112: localhost:9093 -> 127.0.0.1:40002"]
    # An address that already is the proxy's (an advertising broker): nothing to rewrite.
    assert rewrite_response(new, info, lambda n, h, p: (h, p)) is None


def assert_through_the_proxy(front: ProxyFront, target) -> None:
    lines = front.server.transcript.lines()
    real = {f"{h}:{p}" for h, p in target.addresses.values()}
    ports = {n.address for n in front.server.nodes.values()}
    rewritten = [ln for ln in lines if ln.get("rewritten")]
    assert rewritten, "no response was rewritten"
    for ln in rewritten:
        for change in ln["rewritten"]:
            before, _, after = change.partition(": ")[2].partition(" -> ")
            assert before in real and after in ports, change
    seen = {(ln["dir"], ln["api_name"]) for ln in lines}
    # The client produced and fetched through the proxy, after Metadata pointed it elsewhere.
    for name in ("Metadata", "Produce", "Fetch"):
        assert ("c2b", name) in seen and ("b2c", name) in seen, (name, sorted(seen, key=str))


def test_rewriting_proxy_in_front_of_an_embedded_broker_that_advertises_itself(tmp_path):
    with make_target("embedded") as target:
        target.start(Topology(topics=[TopicSpec("rw", 1)]), {"group.initial.rebalance.delay.ms": "0"}, tmp_path)
        front = ProxyFront.rewriting(target)
        try:
            values = [b"r%d" % i for i in range(20)]
            assert produce(front.bootstrap, "rw", values) == [None] * 20
            assert read_partition(front.bootstrap, "rw", 20) == values
            assert_through_the_proxy(front, target)
            # A proxy fault now acts on a target that advertises only itself.
            rid = front.server.add_rule({"api": "Produce", "direction": "response", "action": "sever"})
            p = Producer({"bootstrap.servers": front.bootstrap, "log_level": 0, "message.timeout.ms": 10000})
            p.produce("rw", b"after", partition=0)
            p.flush(15)
            assert front.server.rules.counts(rid)[1] == 1
        finally:
            front.stop()


def test_rewriting_proxy_in_front_of_tansu(tmp_path):
    ok, why = make_target("tansu").availability()
    if not ok:
        pytest.skip(why)
    with make_target("tansu") as target:
        target.start(Topology(topics=[TopicSpec("rw", 1)]), {}, tmp_path)
        front = ProxyFront.rewriting(target)
        try:
            values = [b"t%d" % i for i in range(10)]
            try:
                assert produce(front.bootstrap, "rw", values) == [None] * 10
            except KafkaException as exc:  # pragma: no cover - shows what Tansu said
                pytest.fail(f"produce through the proxy failed: {exc}")
            assert read_partition(front.bootstrap, "rw", 10) == values
            assert_through_the_proxy(front, target)
            assert set(front.server.nodes) == set(target.node_ids())  # 111: Tansu's own id
        finally:
            front.stop()


def test_transcript_keeps_what_the_broker_sent_and_what_the_client_got(tmp_path):
    with make_target("embedded") as target:
        target.start(Topology(topics=[TopicSpec("rw2", 1)]), {}, tmp_path)
        front = ProxyFront.rewriting(target)
        try:
            produce(front.bootstrap, "rw2", [b"x"])
            meta = next(ln for ln in front.server.transcript.lines()
                        if ln["api_name"] == "Metadata" and ln["dir"] == "b2c" and ln.get("rewritten"))
            sent, got = base64.b64decode(meta["data"]), base64.b64decode(meta["sent"])
            host, port = target.addresses[1]
            assert f"{host}:{port}" in meta["rewritten"][0]
            assert port.to_bytes(4, "big") in sent and port.to_bytes(4, "big") not in got
        finally:
            front.stop()
