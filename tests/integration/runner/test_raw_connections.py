"""The raw actor's kept connections (conformance.raw.Connections) against a real embedded broker:
reused while they answer, replaced when the broker closed them, dropped when an answer did not
come, never used for the APIs that depend on their place on a connection."""
from __future__ import annotations

import os
import signal

from conformance.raw import Connections, send_request

BODY = {"transactional_id": "raw-conn", "transaction_timeout_ms": 60000}


def _init(broker, pool, timeout_s=10.0, retry=("COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR",
                                               "COORDINATOR_NOT_AVAILABLE")):
    return send_request(("127.0.0.1", broker.port), "InitProducerId", 4, BODY, timeout_s, retry=retry, pool=pool)


def _kept(pool) -> list:
    return [s for idle in pool._idle.values() for s in idle]


def test_requests_reuse_one_connection(broker):
    pool = Connections()
    try:
        first = _init(broker, pool)
        assert first.ok and first.data["error"] == "NONE", first
        (sock,) = _kept(pool)
        local = sock.getsockname()
        for epoch in range(first.data["producer_epoch"] + 1, first.data["producer_epoch"] + 4):
            out = _init(broker, pool)
            assert out.ok and out.data["producer_epoch"] == epoch, out
        (again,) = _kept(pool)
        assert again is sock and again.getsockname() == local
    finally:
        pool.close()
    assert _kept(pool) == []


def test_a_connection_the_broker_closed_is_replaced(broker):
    pool = Connections()
    try:
        assert _init(broker, pool).data["error"] == "NONE"
        (sock,) = _kept(pool)
        local = sock.getsockname()
        broker.restart()   # same port; the kept connection was closed by the stopping broker
        out = _init(broker, pool, timeout_s=30.0)
        assert out.ok and out.data["error"] == "NONE", out
        (fresh,) = _kept(pool)
        assert fresh.getsockname() != local
    finally:
        pool.close()


def test_a_request_left_unanswered_drops_its_connection(broker):
    pool = Connections()
    try:
        assert _init(broker, pool).data["error"] == "NONE"
        os.kill(broker.proc.pid, signal.SIGSTOP)
        try:
            out = _init(broker, pool, timeout_s=0.5, retry=())
        finally:
            os.kill(broker.proc.pid, signal.SIGCONT)
        assert not out.ok and out.error.name == "REQUEST_TIMED_OUT", out
        # the late answer to it must not be read as the answer to the next request
        assert _kept(pool) == []
        nxt = _init(broker, pool)
        assert nxt.ok and nxt.data["error"] == "NONE", nxt
        assert len(_kept(pool)) == 1
    finally:
        pool.close()


def test_connection_level_apis_take_a_fresh_connection(broker):
    pool = Connections()
    try:
        out = send_request(("127.0.0.1", broker.port), "ApiVersions", 3,
                           {"client_software_name": "kconform", "client_software_version": "1"}, pool=pool)
        assert out.ok and out.data["error"] == "NONE", out
        assert _kept(pool) == []
    finally:
        pool.close()
