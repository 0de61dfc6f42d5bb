"""The proxy in front of the embedded broker, with confluent-kafka as the client.

Each fault is checked by what the client and the log show afterwards (a duplicate, a
reconnection, a held record not yet stored), and by the transcript showing the rule acted.
"""

from __future__ import annotations

import base64
import json
import threading
import time

import pytest

from broker_impl.codec import API, RESPONSE_HEADER
from conformance.proxy import run_proxy

from .helpers import high_watermark, produce, produce_kafka_python, read_partition

pytestmark = pytest.mark.slow

APIS_SEEN = ("ApiVersions", "Metadata", "Produce", "Fetch")


def test_transcript_names_every_frame_in_both_directions(proxied_broker):
    pb = proxied_broker
    values = [b"v%d" % i for i in range(50)]
    assert produce(pb.bootstrap, "names", values) == [None] * 50
    assert read_partition(pb.bootstrap, "names", 50) == values

    lines = pb.proxy.transcript.lines()
    seen = {(ln["dir"], ln["api_name"]) for ln in lines}
    for name in APIS_SEEN:
        assert ("c2b", name) in seen and ("b2c", name) in seen, f"{name} missing from {sorted(seen, key=str)}"

    # Every response is named after the request with its correlation id on its connection.
    requests = {(ln["conn"], ln["correlation_id"]): ln for ln in lines if ln["dir"] == "c2b"}
    responses = [ln for ln in lines if ln["dir"] == "b2c"]
    assert responses
    for r in responses:
        req = requests[(r["conn"], r["correlation_id"])]
        assert (r["api_key"], r["api_name"], r["api_version"]) == (req["api_key"], req["api_name"], req["api_version"])
        assert r["api_version"] is not None

    # Frames are kept whole (small ones) with their size prefix, src/dst are client and broker.
    broker_addr = pb.broker.bootstrap
    for ln in lines:
        data = base64.b64decode(ln["data"])
        assert ln["size"] == int.from_bytes(data[:4], "big") + 4
        assert ln["truncated"] == (len(data) < ln["size"])
        assert (ln["dst"] if ln["dir"] == "c2b" else ln["src"]) == broker_addr
        assert ln["rule"] is None and ln["action"] is None

    # Metadata told the client the proxy's port (advertised.listeners): it came back through it.
    meta = next(ln for ln in responses if ln["api_name"] == "Metadata" and not ln["truncated"])
    frame = base64.b64decode(meta["data"])
    api = API["Metadata"]
    _, pos = RESPONSE_HEADER.decode(api.response_header_version(meta["api_version"]), frame, 4)
    resp, _ = api.response.decode(meta["api_version"], frame, pos)
    assert [(b.host, b.port) for b in resp.brokers] == [("127.0.0.1", pb.node.port)]
    assert len(pb.proxy.events_of("open")) >= 2  # bootstrap connection, then the node's own

    # The file on disk holds the same lines.
    pb.proxy.transcript.flush()
    on_disk = [json.loads(x) for x in pb.transcript_path.read_text().splitlines()]
    assert len(on_disk) >= len(lines)
    assert on_disk[: len(lines)] == lines


# S28 (REFERENCE.md): the broker appended the Produce, the client never saw the response.
@pytest.mark.parametrize("idempotent,copies", [(False, 2), (True, 1)], ids=["non-idempotent", "idempotent"])
def test_s28_dropped_produce_response_kafka_python(proxied_broker, idempotent, copies):
    """A dropped response: the request times out (request_timeout_ms), the client reconnects and
    retries; only the idempotent producer's retry is recognised by the broker as a duplicate."""
    pb = proxied_broker
    rid = pb.proxy.add_rule({"api": "Produce", "direction": "response", "nth": 1, "action": "drop"})
    topic = f"s28-drop-{idempotent}"
    md = produce_kafka_python(pb.bootstrap, topic, b"once", enable_idempotence=idempotent, acks="all", retries=5,
                              request_timeout_ms=1500, delivery_timeout_ms=30000, retry_backoff_ms=100,
                              linger_ms=0)
    assert md.offset == copies - 1
    assert pb.proxy.rules.counts(rid) == (len(_frames(pb, "b2c", "Produce")), 1)
    assert len(_frames(pb, "c2b", "Produce")) == 2  # the original and the retry
    assert read_partition(pb.broker.bootstrap, topic, copies) == [b"once"] * copies


@pytest.mark.parametrize("idempotent,copies", [(False, 2), (True, 1)], ids=["non-idempotent", "idempotent"])
def test_s28_severed_before_produce_response_confluent(proxied_broker, idempotent, copies):
    """The connection is cut as the response comes back: librdkafka sees the disconnect, and
    retries the batch (MsgPossiblyPersisted) on a new connection."""
    pb = proxied_broker
    rid = pb.proxy.add_rule({"api": "Produce", "direction": "response", "nth": 1, "action": "sever"})
    topic = f"s28-sever-{idempotent}"
    reports = produce(pb.bootstrap, topic, [b"once"],
                      **{"enable.idempotence": idempotent, "acks": "all", "retries": 5,
                         "message.timeout.ms": 30000, "retry.backoff.ms": 100, "linger.ms": 0})
    assert reports == [None], f"delivery failed: {reports}"
    assert pb.proxy.rules.counts(rid)[1] == 1
    assert len(_frames(pb, "c2b", "Produce")) == 2
    closed = [e for e in pb.proxy.events_of("close") if e["reason"] == "severed by rule"]
    assert len(closed) == 1
    assert [e for e in pb.proxy.events_of("open") if e["t"] > closed[0]["t"]], "no reconnection after the sever"
    assert read_partition(pb.broker.bootstrap, topic, copies) == [b"once"] * copies


def test_dropped_produce_response_confluent_times_the_message_out(proxied_broker):
    """librdkafka bounds an in-flight Produce by message.timeout.ms, not request.timeout.ms (which
    it only sends to the broker as the acks timeout): a dropped response is never retried, the
    message fails as timed out (possibly persisted) -- and the broker did store it, once.
    So a case wanting S28's retry from librdkafka must sever, not drop."""
    pb = proxied_broker
    rid = pb.proxy.add_rule({"api": "Produce", "direction": "response", "nth": 1, "action": "drop"})
    reports = produce(pb.bootstrap, "drop-rdk", [b"once"],
                      **{"request.timeout.ms": 1000, "message.timeout.ms": 3000, "linger.ms": 0})
    assert [r.name() if r else None for r in reports] == ["_MSG_TIMED_OUT"]
    assert pb.proxy.rules.counts(rid)[1] == 1
    assert len(_frames(pb, "c2b", "Produce")) == 1
    assert read_partition(pb.broker.bootstrap, "drop-rdk", 1) == [b"once"]


def _frames(pb, direction: str, api_name: str) -> list[dict]:
    return [ln for ln in pb.proxy.transcript.lines() if ln["dir"] == direction and ln["api_name"] == api_name]


def test_sever_closes_the_client_connection_and_it_reconnects(proxied_broker):
    pb = proxied_broker
    assert produce(pb.bootstrap, "sev", [b"warm"]) == [None]
    # Cut the next Metadata request: the client loses that connection and must open another.
    rid = pb.proxy.add_rule({"api": "Metadata", "direction": "request", "action": "sever", "reset": True})
    opened_before = len(pb.proxy.events_of("open"))
    assert produce(pb.bootstrap, "sev", [b"after"], **{"enable.idempotence": True}) == [None]
    m = pb.proxy.wait_for_match(rid, timeout=10, acted=True)
    assert m is not None and m.api_name == "Metadata"
    assert any(e["reason"] == "severed by rule" and e["conn"] == m.conn for e in pb.proxy.events_of("close"))
    assert len(pb.proxy.events_of("open")) > opened_before
    assert read_partition(pb.broker.bootstrap, "sev", 2) == [b"warm", b"after"]


def test_delay_holds_the_response_back_at_least_that_long(proxied_broker):
    pb = proxied_broker
    assert produce(pb.bootstrap, "delay", [b"warm"]) == [None]
    rid = pb.proxy.add_rule({"api": "Produce", "direction": "response", "action": "delay", "delay_ms": 700})
    t0 = time.monotonic()
    assert produce(pb.bootstrap, "delay", [b"late"], **{"linger.ms": 0}) == [None]
    elapsed = time.monotonic() - t0
    assert pb.proxy.rules.counts(rid) == (1, 1)
    assert elapsed >= 0.7  # a lower bound only: a delay never makes anything faster
    assert read_partition(pb.broker.bootstrap, "delay", 2) == [b"warm", b"late"]


@pytest.mark.parametrize("corruption", [
    {"mode": "flip", "offset": 0, "length": 2},          # api key 0 -> -1: unknown API
    {"mode": "random", "offset": 0, "length": 4, "seed": 7},  # api key and version: nonsense
    {"mode": "flip", "length": 0, "size_prefix": "huge"},     # size prefix beyond socket.request.max.bytes
], ids=["flip-api-key", "random-header", "huge-size"])
def test_corrupt_request_makes_the_broker_close_and_the_client_recovers(proxied_broker, corruption):
    pb = proxied_broker
    assert produce(pb.bootstrap, "corrupt", [b"warm"]) == [None]
    rid = pb.proxy.add_rule({"api": "Produce", "direction": "request", "action": "corrupt", **corruption})
    assert produce(pb.bootstrap, "corrupt", [b"hit"],
                   **{"enable.idempotence": True, "request.timeout.ms": 5000, "retry.backoff.ms": 100}) == [None]
    m = pb.proxy.wait_for_match(rid, timeout=5, acted=True)
    assert m is not None
    hit = next(ln for ln in pb.proxy.transcript.lines() if ln["rule"] == rid)
    assert hit["action"] == "corrupt" and hit["sent"] != hit["data"]
    closes = [e for e in pb.proxy.events_of("close") if e["conn"] == m.conn]
    assert closes and closes[0]["reason"] == "broker closed"
    # The corrupted request was never appended; the retry was, once.
    assert read_partition(pb.broker.bootstrap, "corrupt", 2) == [b"warm", b"hit"]


def test_hold_until_released(proxied_broker):
    pb = proxied_broker
    assert produce(pb.bootstrap, "held", [b"warm"]) == [None]
    rid = pb.proxy.add_rule({"api": "Produce", "direction": "request", "action": "hold"})
    result: dict = {}
    t = threading.Thread(target=lambda: result.update(r=produce(pb.bootstrap, "held", [b"held"])), daemon=True)
    t.start()
    m = pb.proxy.wait_for_match(rid, timeout=20)
    assert m is not None and (m.api_name, m.direction) == ("Produce", "c2b")
    # Held: the broker has not seen it (asked directly, not through the proxy).
    assert high_watermark(pb.broker.bootstrap, "held") == 1
    assert pb.proxy.release(rid) == 1
    t.join(60)
    assert result.get("r") == [None]
    assert high_watermark(pb.broker.bootstrap, "held") == 2


def test_removing_a_hold_rule_lets_its_frames_go(proxied_broker):
    pb = proxied_broker
    assert produce(pb.bootstrap, "unheld", [b"warm"]) == [None]
    rid = pb.proxy.add_rule({"api": "Produce", "direction": "response", "action": "hold", "every": True})
    result: dict = {}
    t = threading.Thread(target=lambda: result.update(r=produce(pb.bootstrap, "unheld", [b"x"])), daemon=True)
    t.start()
    assert pb.proxy.wait_for_match(rid, timeout=20) is not None
    assert pb.proxy.remove_rule(rid) == 1
    t.join(60)
    assert result.get("r") == [None]
    assert pb.proxy.rules.active() == {}


def test_run_proxy_hook_in_front_of_a_plain_broker(broker):
    proxy = run_proxy({1: broker.bootstrap}, [{"api": "Metadata", "direction": "request", "action": "pass"}])
    try:
        from confluent_kafka.admin import AdminClient

        md = AdminClient({"bootstrap.servers": proxy.node(1).address, "log_level": 0}).list_topics(timeout=10)
        assert md.brokers  # answered through the proxy
        m = proxy.wait_for_match(1, timeout=5)
        assert m is not None and m.api_name == "Metadata" and m.node == 1
    finally:
        proxy.stop()
