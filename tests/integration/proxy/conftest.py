"""A real embedded broker behind a real proxy.

The proxy port is reserved first, because the broker must advertise it (advertised.listeners)
from the moment it starts: then Metadata sends clients back through the proxy, and every frame
after bootstrap crosses it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from conformance.proxy import ProxyNode, ProxyServer
from tests.conftest import BrokerProcess


@dataclass
class ProxiedBroker:
    proxy: ProxyServer
    node: ProxyNode
    broker: BrokerProcess
    transcript_path: Path

    @property
    def bootstrap(self) -> str:
        """Where clients connect: the proxy."""
        return self.node.address


@pytest.fixture
def proxied_broker_factory(tmp_path):
    started: list[ProxiedBroker] = []

    def make(sets: dict[str, str] | None = None, name: str = "broker") -> ProxiedBroker:
        transcript_path = tmp_path / f"{name}.transcript.jsonl"
        proxy = ProxyServer(transcript_path=transcript_path)
        node = proxy.add_node(1)
        proxy.start_in_thread()
        broker = BrokerProcess(tmp_path / name, {"group.initial.rebalance.delay.ms": "0",
                                                 "advertised.listeners": node.listener, **(sets or {})})
        pb = ProxiedBroker(proxy, node, broker, transcript_path)
        started.append(pb)
        broker.start()
        node.set_upstream("127.0.0.1", broker.port)
        return pb

    yield make
    for pb in started:
        pb.proxy.stop()
        pb.broker.stop()


@pytest.fixture
def proxied_broker(proxied_broker_factory) -> ProxiedBroker:
    return proxied_broker_factory()
