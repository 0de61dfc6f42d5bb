"""The proxy over TLS (a run over SASL_SSL): it ends the client's TLS and opens its own to the
broker, so frames are still seen, recorded and acted on; a plaintext client gets nowhere; a
severed TLS connection is closed at once and the client reconnects."""
from __future__ import annotations

import json
import socket
import ssl

import pytest

from conformance import security
from conformance.proxy import ProxyServer, ProxyTLS
from tests.conftest import BrokerProcess
from tests.integration.proxy.helpers import produce, wait_for_events


@pytest.fixture
def tls_proxied(tmp_path):
    ca, keystore = security.certificates(tmp_path)
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(str(keystore))
    proxy = ProxyServer(transcript_path=tmp_path / "transcript.jsonl",
                        tls=ProxyTLS(server=server, client=ssl.create_default_context(cafile=str(ca))))
    node = proxy.add_node(1)
    proxy.start_in_thread()
    broker = BrokerProcess(tmp_path / "broker", {
        "listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
        "advertised.listeners": node.listener.replace("PLAINTEXT://", "SSL://"),
        "group.initial.rebalance.delay.ms": "0"})
    try:
        broker.start()
        node.set_upstream("127.0.0.1", broker.port)
        yield proxy, node, ca, tmp_path / "transcript.jsonl"
    finally:
        proxy.stop()
        broker.stop()


def _apis(transcript) -> list[str]:
    return [json.loads(line).get("api_name") for line in transcript.read_text().splitlines() if line.strip()]


def test_a_tls_client_crosses_the_proxy_and_its_frames_are_seen(tls_proxied):
    proxy, node, ca, transcript = tls_proxied
    conf = {"security.protocol": "SSL", "ssl.ca.location": str(ca), "ssl.endpoint.identification.algorithm": "https"}
    assert produce(node.address, "tls-t", [b"a", b"b", b"c"], **conf) == [None, None, None]
    proxy.transcript.flush()
    assert _apis(transcript).count("Produce") >= 2     # requests and responses, decrypted
    rule = proxy.add_rule({"api": "Produce", "direction": "request", "action": "sever", "reset": True, "nth": 1})
    # the rule cuts the TLS connection at the first Produce (a RST, no close_notify); the client
    # reconnects through the proxy and its retry gets through
    errors = []
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": node.address, "log_level": 0, "error_cb": errors.append,
                  "message.timeout.ms": 30000, **conf})
    p.produce("tls-t", value=b"d", partition=0)
    assert proxy.wait_for_match(rule, timeout=20) is not None
    assert p.flush(30) == 0
    closes = wait_for_events(proxy, "close", 1)
    assert any("sever" in (e.get("reason") or "") for e in closes), closes


def test_a_plaintext_client_gets_no_answer_from_a_tls_proxy(tls_proxied):
    proxy, node, _, transcript = tls_proxied
    host, port = node.address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        # ApiVersions v0, plaintext: the proxy's TLS handshake fails on it and closes
        s.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\xff\xff")
        data = b""
        while True:
            try:
                chunk = s.recv(4096)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            data += chunk
    assert not data.startswith(b"\x00\x00")          # never a Kafka frame
    proxy.transcript.flush()
    assert "ApiVersions" not in _apis(transcript)
