"""Requests a broker sends itself: in-process when nothing stands between it and its own listener,
over the socket when it advertises another address (a proxy), and in both cases answered by the
same handler, which a sender that stops waiting does not cut short.

A real one-node broker on a loopback port (tests/unit/coordinators/txn_helpers.Node); the proxy
is the real one (conformance/proxy), so "crosses the socket" is what its transcript shows.
"""

from __future__ import annotations

import socket

import pytest
import trio

from broker_impl.cluster.network_client import InterBrokerClient, NetworkError
from broker_impl.coordinators.transaction_metadata import TV_0, TransactionState
from broker_impl.handlers import HANDLERS, Handler
from broker_impl.protocol.errors import Errors
from broker_impl.protocol.messages import API
from conformance.proxy.server import ProxyServer

from tests.unit.coordinators.txn_helpers import Node, eventually, open_txn, run, settle, started

MARKER_SENDER = "broker-1-txn-marker-sender"
VERIFIER = "AddPartitionsManager-client-1"


async def _commit_one(node) -> None:
    c = node.txn_coordinator
    _, pid, epoch = await open_txn(node, "tx", [("t", 0)])
    # the leader's KIP-890 check of this producer's first batch: AddPartitionsToTxn(verify_only)
    # from this broker's AddPartitionsToTxnManager to the coordinator, this broker
    assert await node.broker.add_partitions_manager._ask("tx", pid, epoch, [("t", 0)], add=False) == {
        ("t", 0): Errors.NONE}
    assert (await c.handle_end_transaction("tx", pid, epoch, True, TV_0)).error == Errors.NONE
    await settle(c)
    assert c.txn_manager.get("tx").state is TransactionState.COMPLETE_COMMIT
    plog = node.topics.partition("t", 0).log
    assert plog.last_stable_offset == plog.log_end_offset == 2   # the record and its COMMIT marker


@run
async def test_without_a_proxy_the_broker_answers_itself_in_process(tmp_path, nursery):
    node = await started(tmp_path, nursery, topics={"t": 1})
    await _commit_one(node)
    # no connection was opened: neither sender holds one, the listener never saw one
    assert node.txn_coordinator.markers.client._connections == {}
    assert node.broker.add_partitions_manager.client._connections == {}
    assert node.broker.connections == {}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_behind_a_proxy_the_requests_cross_it(tmp_path):
    port = _free_port()
    proxy = ProxyServer()
    front = proxy.add_node(1, upstream=f"127.0.0.1:{port}")
    proxy.start_in_thread()
    try:
        rules = {cid: proxy.add_rule({"action": "pass", "every": True, "client_id": cid})
                 for cid in (MARKER_SENDER, VERIFIER)}

        async def commit_behind_the_proxy():
            node = Node(tmp_path, port=port, **{"advertised.listeners": f"PLAINTEXT://{front.address}"})
            async with trio.open_nursery() as nursery:
                await nursery.start(node.run)
                await eventually(lambda: not node.txn_coordinator.txn_manager.loading)
                node.topics.create("t", 1)
                await _commit_one(node)
                nursery.cancel_scope.cancel()

        trio.run(commit_behind_the_proxy)
        assert proxy.wait_for_match(rules[MARKER_SENDER], 10, count=2)
        assert [(m.api_name, m.api_version) for m in proxy.matches(rules[MARKER_SENDER])] == [
            ("ApiVersions", 4), ("WriteTxnMarkers", 2)]
        assert proxy.wait_for_match(rules[VERIFIER], 10, count=2)
        assert [m.api_name for m in proxy.matches(rules[VERIFIER])] == ["ApiVersions", "AddPartitionsToTxn"]
    finally:
        proxy.stop()


def _patched(monkeypatch, api_name: str, fn) -> None:
    """Put ``fn(real_fn, broker, ctx, req)`` in place of ``api_name``'s handler for this test."""
    key = API[api_name].key
    real = HANDLERS[key]

    async def handler(broker, ctx, req):
        return await fn(real.fn, broker, ctx, req)

    monkeypatch.setitem(HANDLERS, key, Handler(real.api, handler, real.min_version, real.max_version,
                                               real.advertised_min))


def _with_local_sender(tmp_path, scenario) -> None:
    """``await scenario(client)`` with an InterBrokerClient of a running one-node broker that
    answers itself in process."""
    @run
    async def main(tmp_path, nursery):
        node = await started(tmp_path, nursery)
        await scenario(InterBrokerClient(node.broker.replica_manager.endpoint, "test-sender",
                                         local=node.broker.local_requests))

    main(tmp_path)


def test_the_sender_waits_for_the_handler_whatever_its_timeout(tmp_path, monkeypatch):
    """A handler's own waits end within request.timeout.ms, the sender's bound: in process the
    sender does not put a deadline of its own around it, so it never cuts a handler short."""
    finished = []

    async def slow_metadata(real, broker, ctx, req):
        await trio.sleep(0.3)
        resp = await real(broker, ctx, req)
        finished.append(ctx.client_id)
        return resp

    _patched(monkeypatch, "Metadata", slow_metadata)

    async def scenario(client):
        answer = await client.send(1, "Metadata", 12, API["Metadata"].Request(topics=[]), 0.05)
        assert finished == ["test-sender"] and [b.node_id for b in answer.brokers] == [1]

    _with_local_sender(tmp_path, scenario)


def test_a_handler_bug_is_logged_and_read_as_no_answer(tmp_path, monkeypatch, caplog):
    async def broken(real, broker, ctx, req):
        raise RuntimeError("a bug in a handler")

    _patched(monkeypatch, "Metadata", broken)

    async def scenario(client):
        with pytest.raises(NetworkError, match="internal error"):
            await client.send(1, "Metadata", 12, API["Metadata"].Request(topics=[]), 5)
        # the broker goes on: its next request to itself is answered
        answer = await client.send(1, "ApiVersions", 3, API["ApiVersions"].Request(
            client_software_name="t", client_software_version="1"), 5)
        assert answer.error_code == Errors.NONE and answer.api_keys

    _with_local_sender(tmp_path, scenario)
    assert any("a bug in a handler" in (r.exc_text or "") or (r.exc_info and "a bug" in str(r.exc_info[1]))
               for r in caplog.records)
