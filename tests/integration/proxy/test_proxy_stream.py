"""The proxy as a TCP relay: garbage, pipelining, timed holds, cuts by control call, a node
going away. Raw connections (the project's codec over a plain socket) and a real broker."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time

import pytest

from broker_impl.codec import API

from ..broker.rawclient import RawConnection
from .helpers import produce, wait_for_events

pytestmark = pytest.mark.slow


def _metadata(conn: RawConnection, version: int = 12):
    return conn.request("Metadata", version, API["Metadata"].Request(topics=None))


def test_garbage_is_passed_on_unframed_and_the_broker_closes(proxied_broker):
    pb = proxied_broker
    with RawConnection(pb.bootstrap) as conn:
        conn.send_raw(struct.pack(">i", -5) + b"not kafka at all")
        assert conn.recv_frame() is None  # the broker closed; the proxy closed the client's side too
    closes = wait_for_events(pb.proxy, "close")
    lines = pb.proxy.transcript.lines()
    assert lines and lines[0]["unframed"] and lines[0]["api_name"] is None
    assert lines[0]["size"] == 4 + len(b"not kafka at all")
    assert closes[0]["reason"] == "broker closed"


def test_pipelined_requests_are_answered_in_order_and_named(proxied_broker):
    pb = proxied_broker
    with RawConnection(pb.bootstrap) as conn:
        frames = [conn.encode_request("Metadata", v, API["Metadata"].Request(topics=None)) for v in (1, 4, 9, 12)]
        conn.send_raw(b"".join(frames))  # one write: the proxy splits it into four frames
        answers = [conn.recv_frame() for _ in frames]
    assert [struct.unpack_from(">i", a)[0] for a in answers] == [1, 2, 3, 4]
    lines = pb.proxy.transcript.lines()
    assert [(ln["dir"], ln["api_version"], ln["correlation_id"]) for ln in lines if ln["dir"] == "b2c"] == \
        [("b2c", 1, 1), ("b2c", 4, 2), ("b2c", 9, 3), ("b2c", 12, 4)]


def test_timed_hold_lets_go_by_itself(proxied_broker):
    pb = proxied_broker
    rid = pb.proxy.add_rule({"api": "Metadata", "direction": "response", "action": "hold", "delay_ms": 300})
    with RawConnection(pb.bootstrap) as conn:
        t0 = time.monotonic()
        resp = _metadata(conn)
        assert time.monotonic() - t0 >= 0.3
    assert resp is not None
    assert pb.proxy.rules.counts(rid) == (1, 1)
    assert pb.proxy.release(rid) == 0  # nothing left to release


def test_sever_connections_by_control_call(proxied_broker):
    pb = proxied_broker
    with RawConnection(pb.bootstrap) as conn:
        assert _metadata(conn) is not None
        assert [c["node"] for c in pb.proxy.connections()] == [1]
        assert pb.proxy.sever_connections(node_id=1, reset=True) == 1
        assert conn.recv_frame() is None
    assert wait_for_events(pb.proxy, "close")[0]["reason"] == "severed by control call"


def test_a_node_that_is_down_refuses_connections_and_comes_back(proxied_broker):
    pb = proxied_broker
    assert produce(pb.bootstrap, "bounce", [b"a"]) == [None]
    pb.broker.stop()
    # accepted by the proxy before it knew, nothing behind it: reset, not an orderly close -- seen
    # by the read, or already by the connect when the reset beats the handshake's completion to
    # the client (a loaded machine: a fresh-clone `make test` met it once in five)
    with pytest.raises(ConnectionResetError):
        with RawConnection(pb.bootstrap) as conn:
            conn.sock.recv(4)
    assert pb.proxy.events_of("refused")
    assert wait_for_events(pb.proxy, "node_down")
    # from now on the port is closed, as the dead broker's own: connections are refused
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", pb.node.port), timeout=5).close()
    pb.broker.start()  # same port (BrokerProcess keeps it), so the upstream stays right
    pb.node.set_upstream("127.0.0.1", pb.broker.port)
    assert wait_for_events(pb.proxy, "node_up")  # the proxy listens again once the node accepts
    assert produce(pb.bootstrap, "bounce", [b"b"]) == [None]


def test_node_up_listens_again_before_it_returns(proxied_broker):
    """The runner restarts a node and says so: the very next connection must be accepted (a
    client's next step must not meet a port the proxy has not reopened yet)."""
    pb = proxied_broker
    pb.broker.stop()
    pb.proxy.node_down(pb.node.node_id)
    assert wait_for_events(pb.proxy, "node_down")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", pb.node.port), timeout=5).close()
    pb.broker.start()
    pb.node.set_upstream("127.0.0.1", pb.broker.port)
    pb.proxy.node_up(pb.node.node_id)
    socket.create_connection(("127.0.0.1", pb.node.port), timeout=5).close()
    assert produce(pb.bootstrap, "bounce-up", [b"b"]) == [None]


def test_release_right_after_wait_for_match_always_finds_the_frame(proxied_broker):
    pb = proxied_broker
    for i in range(20):
        rid = pb.proxy.add_rule({"api": "Metadata", "direction": "request", "action": "hold"})
        with RawConnection(pb.bootstrap) as conn:
            sender = threading.Thread(target=lambda: conn.send_raw(
                conn.encode_request("Metadata", 12, API["Metadata"].Request(topics=None))), daemon=True)
            sender.start()
            assert pb.proxy.wait_for_match(rid, timeout=10) is not None
            assert pb.proxy.release(rid) == 1, f"round {i}"
            assert conn.recv_frame() is not None
        pb.proxy.remove_rule(rid)


def test_a_node_added_while_running_serves_at_once(proxied_broker):
    pb = proxied_broker
    extra = pb.proxy.add_node(7, ("127.0.0.1", pb.broker.port))
    with RawConnection(extra.address) as conn:
        assert _metadata(conn) is not None
    assert {ln["node"] for ln in pb.proxy.transcript.lines()} == {7}


def test_serve_inside_the_callers_trio_loop(broker):
    """A trio caller runs the proxy in its own loop (no thread), e.g. a trio-based runner."""
    import trio

    from conformance.proxy import ProxyServer

    proxy = ProxyServer()
    node = proxy.add_node(1, broker.bootstrap)

    async def main():
        async with trio.open_nursery() as nursery:
            await nursery.start(proxy.serve)
            stream = await trio.open_tcp_stream("127.0.0.1", node.port)
            encoder = RawConnection.__new__(RawConnection)  # only its encoder: no blocking socket here
            encoder.correlation_id = 0
            await stream.send_all(encoder.encode_request("Metadata", 12, API["Metadata"].Request(topics=None)))
            got = b""
            with trio.fail_after(10):
                while len(got) < 8:
                    got += await stream.receive_some(65536)
            await stream.aclose()
            proxy.stop()
            return got

    got = trio.run(main)
    assert struct.unpack_from(">i", got, 4)[0] == 1  # correlation id of our request
    assert [ln["api_name"] for ln in proxy.transcript.lines()][:2] == ["Metadata", "Metadata"]


def test_command_line_proxy(broker, tmp_path):
    import subprocess
    import sys

    from tests.conftest import REPO

    transcript = tmp_path / "cli.jsonl"
    rule = '{"api": "Metadata", "direction": "response", "action": "drop"}'
    proc = subprocess.Popen([sys.executable, "-m", "conformance.proxy", "--upstream", f"1={broker.bootstrap}",
                             "--rule", rule, "--transcript", str(transcript)],
                            stdout=subprocess.PIPE, cwd=REPO)
    try:
        line = proc.stdout.readline().decode()
        assert line.startswith("proxy 1 127.0.0.1:") and line.rstrip().endswith(f"-> {broker.bootstrap}")
        address = line.split()[2]
        with RawConnection(address, timeout=2) as conn:
            conn.send_raw(conn.encode_request("Metadata", 12, API["Metadata"].Request(topics=None)))
            with pytest.raises(TimeoutError):  # the rule dropped the answer
                conn.recv_frame()
            assert _metadata(conn) is not None  # nth 1 only: the next one is answered
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
    lines = [json.loads(x) for x in transcript.read_text().splitlines()]
    assert [(ln["dir"], ln["correlation_id"], ln["action"]) for ln in lines] == \
        [("c2b", 1, None), ("b2c", 1, "drop"), ("c2b", 2, None), ("b2c", 2, None)]
