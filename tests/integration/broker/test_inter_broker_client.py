"""The frames a broker's inter-broker clients open a connection with, seen by the proxy.

Kafka 4.3.1's TransactionMarkerChannelManager and AddPartitionsToTxnManager send ApiVersions
(v4, their software name and version) first on every new connection, its replica fetchers do
not (a 3-node Kafka transcript); the embedded broker's clients do the same, so a proxy rule that
counts one broker's frames counts the same ones on both targets. A real broker behind a real
proxy: the proxy's transcript is what a case's rules would see.
"""
from __future__ import annotations

import pytest
import trio

from broker_impl.cluster.network_client import InterBrokerClient
from broker_impl.protocol.messages import API
from conformance.proxy.server import ProxyServer, parse_address

pytestmark = pytest.mark.slow


def frames_sent(broker, client_id: str, discover_versions: bool) -> list[tuple[str, int]]:
    proxy = ProxyServer()
    node = proxy.add_node(1, upstream=broker.bootstrap)
    proxy.start_in_thread()
    try:
        rid = proxy.add_rule({"action": "pass", "every": True, "client_id": client_id})
        client = InterBrokerClient(lambda node_id: parse_address(node.address), client_id, discover_versions)

        async def two_requests():
            for _ in range(2):   # the second one reuses the connection: no ApiVersions again
                answer = await client.send(1, "Metadata", 12, API["Metadata"].Request(topics=[]), 10)
                assert answer.brokers
            await client.close()

        trio.run(two_requests)
        assert proxy.wait_for_match(rid, 10, count=3 if discover_versions else 2)
        return [(m.api_name, m.api_version) for m in proxy.matches(rid)]
    finally:
        proxy.stop()


def test_marker_sender_opens_with_api_versions_v4(broker):
    assert frames_sent(broker, "broker-1-txn-marker-sender", True) == [
        ("ApiVersions", 4), ("Metadata", 12), ("Metadata", 12)]


def test_replica_fetcher_sends_its_request_first(broker):
    assert frames_sent(broker, "broker-1-fetcher-0", False) == [("Metadata", 12), ("Metadata", 12)]


def test_a_connection_the_node_closed_while_idle_is_replaced_before_the_next_request(broker):
    """A node restarted on the same address: the first request after it is answered (Kafka's
    NetworkClient saw the close and reconnected), not failed on the old connection's end."""
    client = InterBrokerClient(lambda node_id: ("127.0.0.1", broker.port), "broker-1-txn-marker-sender", True)

    async def across_a_restart():
        assert (await client.send(1, "Metadata", 12, API["Metadata"].Request(topics=[]), 10)).brokers
        broker.restart()              # blocks this trio loop: nothing else runs in it
        for _ in range(200):          # the old process's close has reached this socket
            if client._connections[1].closed_by_peer():
                break
            await trio.sleep(0.01)
        assert (await client.send(1, "Metadata", 12, API["Metadata"].Request(topics=[]), 10)).brokers
        await client.close()

    trio.run(across_a_restart)
