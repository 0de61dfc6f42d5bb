"""A one-node broker's restart moves its partitions' leader epochs as Kafka's does.

Why: on Apache Kafka 4.3.1 with one node, each kill -9 or clean stop and restart moves a
partition's leader epoch by 2 (the controller fences the broker, the partitions go leaderless at
epoch + 1, and lead again at epoch + 2 once it is unfenced). A client holding the old epoch is
answered FENCED_LEADER_EPOCH and refreshes its metadata; a workload measured 2201 such answers on
Kafka and none on the embedded broker, whose epoch stayed 0 -- clients' recovery path after a
restart was never exercised here."""
from __future__ import annotations

import time

from broker_impl.protocol.errors import Errors
from broker_impl.protocol.messages import API

from .rawclient import RawConnection


def _leader_epoch(bootstrap: str, topic: str) -> int:
    """The partition's leader epoch in Metadata (auto-created on first ask, as Kafka does:
    the first answer may be UNKNOWN_TOPIC_OR_PARTITION with no partitions yet)."""
    M = API["Metadata"].Request
    deadline = time.monotonic() + 10
    while True:
        with RawConnection(bootstrap) as conn:
            resp = conn.request("Metadata", 12, M(topics=[M.MetadataRequestTopic(name=topic, topic_id=bytes(16))],
                                                  allow_auto_topic_creation=True,
                                                  include_topic_authorized_operations=False))
        [t] = resp.topics
        if t.partitions or time.monotonic() > deadline:
            return t.partitions[0].leader_epoch
        time.sleep(0.1)


def _fetch_error(bootstrap: str, topic: str, current_leader_epoch: int) -> int:
    F = API["Fetch"].Request
    T, P = F.FetchTopic, F.FetchTopic.FetchPartition
    req = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
            session_epoch=-1, topics=[T(topic=topic, partitions=[P(partition=0, current_leader_epoch=current_leader_epoch,
                                                                   fetch_offset=0, log_start_offset=-1,
                                                                   partition_max_bytes=1 << 20)])],
            forgotten_topics_data=[], rack_id="")
    with RawConnection(bootstrap) as conn:
        resp = conn.request("Fetch", 12, req)
    return resp.responses[0].partitions[0].error_code


def test_restarts_move_the_leader_epoch_by_two_and_fence_the_old_one(broker_factory):
    broker = broker_factory({"num.partitions": "1"})
    assert _leader_epoch(broker.bootstrap, "epochs") == 0
    assert _fetch_error(broker.bootstrap, "epochs", 0) == 0
    broker.kill()                                  # kill -9
    broker.start()
    assert _leader_epoch(broker.bootstrap, "epochs") == 2
    assert _fetch_error(broker.bootstrap, "epochs", 0) == Errors.FENCED_LEADER_EPOCH
    assert _fetch_error(broker.bootstrap, "epochs", 2) == 0
    assert _fetch_error(broker.bootstrap, "epochs", 3) == Errors.UNKNOWN_LEADER_EPOCH
    broker.stop()                                  # a clean stop counts the same
    broker.start()
    assert _leader_epoch(broker.bootstrap, "epochs") == 4
