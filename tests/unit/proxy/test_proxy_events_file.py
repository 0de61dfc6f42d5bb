"""A connection the proxy resets because the broker behind it refused leaves no frame in the
transcript; the case's proxy events (ProxyFront.end_case, proxy-events.jsonl) keep it, and only
the events since the case began."""
from __future__ import annotations

import json
import socket
import time

from conformance.runner.proxying import EVENTS_FILE, ProxyFront


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def connect_and_wait(bootstrap: str) -> None:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    c = socket.create_connection((host, int(port)), timeout=5)
    c.settimeout(5)
    try:
        c.recv(1)         # the proxy resets it: nothing, or ECONNRESET
    except OSError:
        pass
    finally:
        c.close()


def test_a_refused_upstream_is_in_the_case_events_and_earlier_cases_are_not(tmp_path) -> None:
    front = ProxyFront()
    try:
        bootstrap = front.attach(("127.0.0.1", closed_port()))
        connect_and_wait(bootstrap)              # before the case: not its event
        deadline = time.monotonic() + 10
        while not front.server.events_of("refused") and time.monotonic() < deadline:
            time.sleep(0.05)
        front.begin_case()
        front.node_up(1)                         # the refusal closed the port; the case finds it open
        deadline = time.monotonic() + 10
        while front.server.nodes[1].down and time.monotonic() < deadline:
            time.sleep(0.05)
        connect_and_wait(bootstrap)
        while len(front.server.events_of("refused")) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        front.end_case(tmp_path / "transcript.jsonl")
    finally:
        front.stop()
    events = [json.loads(line) for line in (tmp_path / EVENTS_FILE).read_text().splitlines()]
    refused = [e for e in events if e["event"] == "refused"]
    assert len(refused) == 1 and refused[0]["node"] == 1 and refused[0]["conn"] == 2
    assert "connect" in refused[0]["reason"]
    assert all(e["t"] >= 0 for e in events)


def test_node_up_while_the_port_is_still_closing_opens_it_again() -> None:
    """A refusal marks the node down and its accept loop closes the port; the runner's node_up
    may come before the port is closed (a node restarted at once): the port opens again once
    it is closed (server._mark_up), where it used to stay closed for good."""
    front = ProxyFront()
    try:
        bootstrap = front.attach(("127.0.0.1", closed_port()))
        server = front.server
        node = server.nodes[1]
        server._call_in_loop(lambda: (server._mark_down(node), server._mark_up(node)))   # one loop step
        deadline = time.monotonic() + 10
        while (node.down or node.closed) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not node.down and not node.closed
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        socket.create_connection((host, int(port)), timeout=5).close()      # the port accepts
    finally:
        front.stop()
