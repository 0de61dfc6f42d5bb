"""free_ports(): a target's nodes get ports no outgoing connection is given (below the kernel's
ephemeral range), distinct, and never one handed out before in this process -- so a node killed
and restarted on its port finds it free (real sockets: the kernel's answer, not a mock)."""
from __future__ import annotations

import socket

import pytest

from conformance.targets.process import _listen_range, free_ports


def test_ports_are_distinct_bindable_and_never_handed_out_twice():
    first = free_ports(8)
    second = free_ports(8)
    assert len(set(first) | set(second)) == 16
    for port in first + second:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


@pytest.mark.skipif(_listen_range() is None, reason="no ephemeral port range below which to pick")
def test_ports_are_below_the_ephemeral_range_that_connections_take():
    low, high = _listen_range()
    assert all(low <= p <= high for p in free_ports(20))
    with socket.create_server(("127.0.0.1", 0)) as server:
        with socket.create_connection(server.getsockname()) as client:
            assert client.getsockname()[1] > high        # an outgoing connection's local port
