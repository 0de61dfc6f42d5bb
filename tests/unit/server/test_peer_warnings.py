"""The broker's malformed-request warnings: a few per peer host per window, then a count."""
from __future__ import annotations

import logging

from broker_impl.server.connection import PeerWarnings


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_per_host_then_one_line_with_the_count(caplog):
    clock = Clock()
    w = PeerWarnings(burst=3, window_s=60, clock=clock)
    with caplog.at_level(logging.WARNING, logger="kconform.broker.connection"):
        for i in range(100):
            w.warn(f"127.0.0.1:{5000 + i}", "closing connection %d", i)
        w.warn("10.0.0.2:1", "closing connection from another host")
        assert [r.getMessage() for r in caplog.records] == [
            "closing connection 0", "closing connection 1", "closing connection 2",
            "closing connection from another host"]
        caplog.clear()
        clock.now = 61
        w.warn("127.0.0.1:9", "closing connection %d", 9)
    assert [r.getMessage() for r in caplog.records] == [
        "97 more malformed or refused requests from 127.0.0.1 in the last 61 s (not logged one by one)",
        "closing connection 9"]
