"""A Fetch held in long poll is answered as soon as one of its partitions can no longer be read
(Kafka's DelayedFetch: the partition gone, leadership moved), not max_wait_ms later -- and not
dropped with the connection when its broker stops cleanly meanwhile (a client's
NETWORK_EXCEPTION) when the fetch may only be served by the leader (a follower's, or a consumer's
before v11; a v11+ consumer may read from a follower, KIP-392, so its fetch stays held, on Kafka
too). Raw Fetch requests (no leader hints) with max_wait_ms far beyond the socket timeout: an
answer that waited for max_wait_ms fails the test by the timeout.
"""

from __future__ import annotations

import threading
import time

import pytest

from broker_impl.codec import API, RESPONSE_HEADER
from conformance.targets import Topology, make_target
from conformance.targets.topology import TopicSpec
from tests.integration.broker.rawclient import RawConnection

HELD_MS = 120_000      # max_wait_ms of the held fetch: far beyond ANSWER_TIMEOUT_S
ANSWER_TIMEOUT_S = 30.0
SETTLE_S = 0.5         # lets the held fetch reach the broker before the change (ordering only)


@pytest.fixture(params=[pytest.param("embedded", id="embedded"),
                        pytest.param("apache-kafka", id="kafka", marks=[pytest.mark.slow, pytest.mark.kafka])])
def start_on(request, tmp_path):
    """``start_on(nodes, topics) -> target``: the embedded broker, and Apache Kafka (the oracle)."""
    started = []

    def _start(nodes, topics):
        target = make_target(request.param)
        ok, reason = target.availability()
        if not ok:
            pytest.skip(f"target {request.param} unavailable: {reason}")
        started.append(target)
        target.start(Topology(nodes=nodes, topics=topics), {}, tmp_path / f"t{len(started)}")
        return target

    try:
        yield _start
    finally:
        for t in started:
            t.stop()


def _held_fetch(conn: RawConnection, topic: str, offset: int, version: int = 12) -> int:
    F = API["Fetch"].Request
    body = F(replica_id=-1, max_wait_ms=HELD_MS, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
             session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
             topics=[F.FetchTopic(topic=topic, partitions=[F.FetchTopic.FetchPartition(
                 partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                 log_start_offset=-1, partition_max_bytes=1 << 20)])])
    conn.send_raw(conn.encode_request("Fetch", version, body))
    return version


def _answer(conn: RawConnection, version: int):
    frame = conn.recv_frame()
    assert frame is not None, "the broker closed the connection with the fetch unanswered"
    api = API["Fetch"]
    _header, pos = RESPONSE_HEADER.decode(api.response_header_version(version), frame, 0)
    resp, _ = api.response.decode(version, frame, pos)
    return resp.responses[0].partitions[0]


def test_a_held_fetch_is_answered_when_its_topic_is_deleted(start_on):
    bootstrap = start_on(1, [TopicSpec("t", 1, 1)]).bootstrap
    with RawConnection(bootstrap, timeout=ANSWER_TIMEOUT_S) as held, RawConnection(bootstrap) as admin:
        version = _held_fetch(held, "t", 0)
        time.sleep(SETTLE_S)
        D = API["DeleteTopics"].Request
        resp = admin.request("DeleteTopics", 4, D(topic_names=["t"], timeout_ms=10_000))
        assert resp.responses[0].error_code == 0
        part = _answer(held, version)
    assert part.error_code == 3          # UNKNOWN_TOPIC_OR_PARTITION


def test_a_held_fetch_on_a_leader_that_stops_cleanly_is_told_it_moved(start_on):
    target = start_on(3, [TopicSpec("t", 1, 3, {"min.insync.replicas": "1"})])
    leader = target.partition_replicas("t", 0)[0]
    host, port = target.addresses[leader]
    with RawConnection(f"{host}:{port}", timeout=ANSWER_TIMEOUT_S) as held:
        version = _held_fetch(held, "t", 0, version=10)     # served by the leader only
        time.sleep(SETTLE_S)
        stopper = threading.Thread(target=target.stop_node, args=(leader,), daemon=True)
        stopper.start()           # controlled shutdown: leadership moves, then the node exits
        part = _answer(held, version)
        stopper.join(60)
    assert part.error_code == 6          # NOT_LEADER_OR_FOLLOWER
