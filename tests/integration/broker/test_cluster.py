"""The embedded broker as a 3-node cluster (EmbeddedTarget: three broker processes and a
controller process), with confluent-kafka: replication and leader failover with truncation,
the transaction coordinator and the group coordinator failing over, and the combined topology's
quorum. Real processes, real sockets, kill -9."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from conformance.targets import EmbeddedTarget, Topology, wire
from conformance.targets.topology import TopicSpec

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture
def cluster(tmp_path):
    started = []

    def start(topics, controller="dedicated", **configs):
        target = EmbeddedTarget()
        started.append(target)
        bootstrap = target.start(Topology(nodes=3, topics=topics, controller=controller), configs,
                                 tmp_path / f"cluster-{len(started)}")
        return target, bootstrap

    try:
        yield start
    finally:
        for t in started:
            t.stop()


def _produce(bootstrap, topic, values, **config):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "log_level": 0,
                  **config})
    delivered = []
    for v in values:
        p.produce(topic, v.encode(), partition=0,
                  on_delivery=lambda err, msg: delivered.append((err, msg.offset() if err is None else None)))
    assert p.flush(60) == 0
    assert all(err is None for err, _ in delivered), delivered
    return [o for _, o in delivered]


def _consume(bootstrap, topic, count, isolation="read_uncommitted", timeout=30.0):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.time_ns()}", "log_level": 0,
                  "enable.auto.commit": False, "isolation.level": isolation})
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append((m.offset(), m.value().decode()))
        # nothing more than expected
        m = c.poll(1.0)
        assert m is None or m.error() is not None, f"unexpected record at {m.offset()}"
    finally:
        c.close()
    return out


def _wait(what, probe, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = probe()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_acks_all_survives_leader_failover_and_the_old_leader_catches_up(cluster):
    target, bootstrap = cluster([TopicSpec("t", 1, 3, {"min.insync.replicas": "2"})])
    assert _produce(bootstrap, "t", ["a", "b", "c"]) == [0, 1, 2]
    old = target.partition_leader("t", 0)
    target.kill(old)
    assert _produce(bootstrap, "t", ["d"]) == [3]
    new, _replicas, isr = target.partition_replicas("t", 0)
    assert new != old and old not in isr
    target.restart(old)
    _wait("the old leader back in the ISR", lambda: old in target.partition_replicas("t", 0)[2])
    # only the old leader left: it leads, and holds exactly what was acknowledged
    for n in target.node_ids():
        if n != old:
            target.kill(n)
    _wait("the old leader leading again", lambda: target.partition_leader("t", 0) == old)
    live = ",".join(f"{h}:{p}" for n, (h, p) in target.addresses.items() if n == old)
    assert _consume(live, "t", 4) == [(0, "a"), (1, "b"), (2, "c"), (3, "d")]


def test_the_transaction_coordinator_fails_over(cluster):
    target, bootstrap = cluster([TopicSpec("t", 1, 3)])
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-1", "log_level": 0})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("t", b"1", partition=0)
    p.flush(10)
    coordinator = target.transaction_coordinator("tx-1")
    target.kill(coordinator)
    p.commit_transaction(60)
    assert target.transaction_coordinator("tx-1", exclude={coordinator}) != coordinator
    p.begin_transaction()
    p.produce("t", b"2", partition=0)
    p.commit_transaction(60)
    assert [v for _, v in _consume(bootstrap, "t", 2, "read_committed")] == ["1", "2"]


def test_committed_offsets_survive_the_group_coordinator(cluster):
    target, bootstrap = cluster([TopicSpec("t", 1, 3)])
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g1", "log_level": 0, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("t", 0, 42)], asynchronous=False)
    coordinator = target.group_coordinator("g1")
    c.close()
    target.kill(coordinator)
    assert target.group_coordinator("g1", exclude={coordinator}) != coordinator
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g1", "log_level": 0, "enable.auto.commit": False})
    try:
        assert [tp.offset for tp in c.committed([TopicPartition("t", 0)], timeout=30)] == [42]
    finally:
        c.close()


def test_combined_quorum_freezes_the_metadata_without_a_majority(cluster):
    target, _ = cluster([TopicSpec("t", 1, 3)], controller="combined")
    leader = target.partition_leader("t", 0)
    others = [n for n in target.node_ids() if n != leader]
    target.kill(others[0])
    _wait("one follower out of the ISR", lambda: others[0] not in target.partition_replicas("t", 0)[2])
    target.kill(leader)
    time.sleep(4.5)            # past the 3 s session: no quorum decides anything now
    md = wire.metadata(target.addresses[others[1]], ["t"])
    assert md.topics["t"].partitions[0].leader == leader
    target.restart(others[0])  # a majority again: the controller moves on
    _wait("a new leader", lambda: target.partition_leader("t", 0) in others, timeout=30)


def test_a_consumer_group_fails_over_with_its_coordinator(cluster):
    """KIP-848: the consumer group's records are replicated with __consumer_offsets; when its
    coordinator is killed, the new one loads them and the member goes on with its epoch and
    assignment (raw ConsumerGroupHeartbeat to whichever node coordinates the group)."""
    from broker_impl.protocol.errors import Errors
    from broker_impl.protocol.messages import API
    from tests.integration.broker.rawclient import RawConnection

    target, _bootstrap = cluster([TopicSpec("t", 2, 3)])
    HB = API["ConsumerGroupHeartbeat"].Request

    def heartbeat(node, **fields):
        body = dict(group_id="kg", member_id="m1", member_epoch=0, instance_id=None, rack_id=None,
                    rebalance_timeout_ms=30000, subscribed_topic_names=["t"], server_assignor=None,
                    topic_partitions=[])
        body.update(fields)
        host, port = target.addresses[node]
        with RawConnection(f"{host}:{port}") as c:
            return c.request("ConsumerGroupHeartbeat", 1, HB(**body))

    coordinator = target.group_coordinator("kg")
    r = _wait("an assignment", lambda: (lambda a: a if a.error_code == 0 and a.assignment
                                        and a.assignment.topic_partitions else None)(heartbeat(coordinator)))
    tid, epoch = r.assignment.topic_partitions[0].topic_id, r.member_epoch
    assert sorted(r.assignment.topic_partitions[0].partitions) == [0, 1]
    target.kill(coordinator)
    successor = target.group_coordinator("kg", exclude={coordinator})
    assert successor != coordinator
    owned = [HB.TopicPartitions(topic_id=tid, partitions=[0, 1])]
    r = _wait("the new coordinator", lambda: (lambda a: a if a.error_code == 0 else None)(heartbeat(
        successor, member_epoch=epoch, rebalance_timeout_ms=-1, subscribed_topic_names=None, topic_partitions=owned)))
    assert (r.error_code, r.member_epoch) == (Errors.NONE, epoch)


def test_a_restarted_broker_answers_only_once_it_caught_up_with_the_metadata(cluster):
    """Kafka's broker opens request processing only after its first catch-up with the metadata
    log: a client that reaches a restarted node early waits for its answer, and never hears
    UNKNOWN_TOPIC_OR_PARTITION for a topic the cluster has (found by
    apps/streams_broker_bounce: TxnOffsetCommit and Produce refused that way right after a
    bounce). Metadata is asked on the node's own port, again and again, while it restarts."""
    target, _ = cluster([TopicSpec("t", 1, 3)])
    node = target.node_ids()[-1]
    address = target.addresses[node]
    target.kill(node)
    answers: list[int] = []
    done = threading.Event()

    def probe() -> None:
        for _ in range(2000):                      # bounded: the restart ends it well before
            if done.is_set():
                return
            try:
                answers.append(wire.metadata(address, ["t"], timeout=20.0).topics["t"].error_code)
            except wire.WireError:
                time.sleep(0.01)                   # not listening yet

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    target.restart(node)
    time.sleep(1.0)
    done.set()
    prober.join(30)
    assert answers and set(answers) == {0}, answers[:10]
