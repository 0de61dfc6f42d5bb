"""A follower whose log ends below the leader's log start (it was down while DeleteRecords moved
it) restarts its log at the leader's start (server/replica_fetcher.py ``_reset_out_of_range``,
Kafka's fetchOffsetAndTruncate: ListOffsets latest, then earliest, as a replica), rejoins the
ISR, and once it leads serves from there. Real processes and sockets, three nodes.

Why: truncation on fetch reaches the leader's log start only through OFFSET_OUT_OF_RANGE; no
case of the library and no workload seed had got a follower there. The first run of this test
found the embedded broker's follower refusing the batch that holds the new start (based below
it, the DeleteRecords offset being inside the batch) for ever; Kafka's follower starts its empty
log at the batch's base (cluster/partition.py append_as_follower; the case
cluster/delete_records_mid_batch_follower_down shows both brokers doing it).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from conformance.targets.topology import TopicSpec

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def _state(address, topic="t"):
    """(leader, isr) of partition 0 as the broker at ``address`` sees it."""
    md = AdminClient({"bootstrap.servers": address, "log_level": 0}).list_topics(topic, timeout=10)
    p = md.topics[topic].partitions[0]
    return p.leader, sorted(p.isrs), sorted(p.replicas)


def _until(what, timeout=60.0):
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.3)


def test_a_follower_behind_the_leaders_log_start_restarts_there_and_leads_with_it(start):
    # a dedicated controller: with the quorum on the brokers (combined), two of three killed
    # freeze the metadata and nobody is elected -- as in Kafka's combined mode
    target, bootstrap = start(3, [TopicSpec("t", 1, 3)], controller="dedicated")
    address = dict((n, f"{h}:{p}") for n, (h, p) in target.addresses.items())
    leader, isr, replicas = _until(lambda: (s := _state(bootstrap)) and len(s[1]) == 3 and s)
    follower = next(r for r in replicas if r != leader)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 0})
    for i in range(2):                                # on every replica: the follower has an epoch
        p.produce("t", b"v%d" % i, partition=0)
    assert p.flush(30) == 0
    target.kill(follower)
    for i in range(2, 6):
        p.produce("t", b"v%d" % i, partition=0)
    assert p.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    done = admin.delete_records([TopicPartition("t", 0, 4)], request_timeout=30)
    assert next(iter(done.values())).result(30).low_watermark == 4
    target.restart(follower)
    assert _until(lambda: follower in _state(bootstrap)[1]), "the follower never rejoined the ISR"
    for other in replicas:
        if other != follower:
            target.kill(other)
    assert _until(lambda: _state(address[follower])[0] == follower), "the follower never led"
    c = Consumer({"bootstrap.servers": address[follower], "group.id": "g", "log_level": 0,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    assert c.get_watermark_offsets(TopicPartition("t", 0), timeout=10) == (4, 6)
    c.assign([TopicPartition("t", 0, -2)])
    got, deadline = [], time.monotonic() + 30
    while len(got) < 2 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append((m.offset(), m.value()))
    c.close()
    assert got == [(4, b"v4"), (5, b"v5")]
