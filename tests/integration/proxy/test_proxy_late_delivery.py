"""A delayed request still reaches the broker after the client went away.

In a real network a packet delayed on the way is not recalled when the sender gives up: a
client that times out a request, closes the connection and retries on a new one can still
have the first request applied late (S20: a delayed EndTxn applied to the next transaction).
The proxy must behave the same, also when it learns that the client is gone because writing a
response to it fails while the request is still being delayed.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest

from broker_impl.codec import API

from ..broker.rawclient import RawConnection
from .helpers import wait_for_events

pytestmark = pytest.mark.slow

REQUEST_DELAY_MS = 1500
RESPONSE_DELAY_MS = 400


def _create_topic_frame(conn: RawConnection, name: str) -> bytes:
    C = API["CreateTopics"].Request
    return conn.encode_request("CreateTopics", 5, C(
        topics=[C.CreatableTopic(name=name, num_partitions=1, replication_factor=1)], timeout_ms=5000))


def _topic_names(bootstrap: str) -> set[str]:
    with RawConnection(bootstrap) as conn:
        resp = conn.request("Metadata", 12, API["Metadata"].Request(topics=None))
    return {t.name for t in resp.topics}


def _wait_for_topic(bootstrap: str, name: str, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    for _ in range(int(timeout / 0.1) + 1):
        if name in _topic_names(bootstrap):
            return True
        if time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("reset", [False, True], ids=["fin", "rst"])
def test_a_delayed_request_reaches_the_broker_after_the_client_closed(proxied_broker, reset):
    """The client pipelines a Metadata request and a CreateTopics request, then goes away (a
    FIN, or a RST as a killed process or a timed-out client with SO_LINGER 0 leaves). The
    CreateTopics is delayed; the Metadata response, delayed less, is written to the client that
    is gone (with a RST that write fails). The topic is created all the same."""
    pb = proxied_broker
    name = "late-" + ("rst" if reset else "fin")
    delayed = pb.proxy.add_rule({"api": "CreateTopics", "direction": "request", "action": "delay",
                                 "delay_ms": REQUEST_DELAY_MS})
    pb.proxy.add_rule({"api": "Metadata", "direction": "response", "action": "delay", "delay_ms": RESPONSE_DELAY_MS})
    conn = RawConnection(pb.bootstrap)
    try:
        metadata = conn.encode_request("Metadata", 12, API["Metadata"].Request(topics=None))
        conn.send_raw(metadata + _create_topic_frame(conn, name))
        assert pb.proxy.wait_for_match(delayed, timeout=10.0) is not None
        if reset:
            conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    finally:
        conn.close()
    assert name not in _topic_names(pb.bootstrap)   # still on its way
    assert _wait_for_topic(pb.bootstrap, name)
    closes = wait_for_events(pb.proxy, "close")
    assert closes, "the client's proxied connection was never closed"
    assert pb.proxy.rules.counts(delayed) == (1, 1)


def test_a_delayed_request_and_the_bytes_behind_it_all_arrive_in_order(proxied_broker):
    """Two CreateTopics pipelined behind one another, the first delayed, then the client
    resets the connection: both topics are created (the second was queued behind the first on
    the same stream, as in TCP)."""
    pb = proxied_broker
    delayed = pb.proxy.add_rule({"api": "CreateTopics", "direction": "request", "action": "delay", "nth": 1,
                                 "delay_ms": REQUEST_DELAY_MS})
    conn = RawConnection(pb.bootstrap)
    try:
        conn.send_raw(_create_topic_frame(conn, "late-first") + _create_topic_frame(conn, "late-second"))
        assert pb.proxy.wait_for_match(delayed, timeout=10.0) is not None
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    finally:
        conn.close()
    assert _wait_for_topic(pb.bootstrap, "late-first")
    assert _wait_for_topic(pb.bootstrap, "late-second")
