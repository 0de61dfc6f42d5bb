"""Transactions against the embedded broker (a subprocess) with confluent-kafka (librdkafka:
InitProducerId v4, EndTxn v1/v3, Produce v10 -> TV1 rules on a TV2 broker, as on Kafka 4)."""

from __future__ import annotations

import time

import pytest

from broker_impl.protocol.messages import API

from .ck_helpers import ck, commit_into_crash, consume_all, create_topics, open_txn, txn_producer
from .rawclient import RawConnection


def test_commit_and_abort_across_two_topics(broker):
    create_topics(broker.bootstrap, "a", "b")
    p = txn_producer(broker.bootstrap, "tx-basic")
    p.begin_transaction()
    for i in range(3):
        p.produce("a", value=b"c%d" % i)
        p.produce("b", value=b"c%d" % i)
    p.commit_transaction(15)
    p.begin_transaction()
    p.produce("a", value=b"aborted")
    p.produce("b", value=b"aborted")
    p.flush(10)
    p.abort_transaction(15)
    for t in ("a", "b"):
        assert consume_all(broker.bootstrap, t, "read_committed", 3) == [b"c0", b"c1", b"c2"]
        assert consume_all(broker.bootstrap, t, "read_uncommitted", 4) == [b"c0", b"c1", b"c2", b"aborted"]


def test_open_transaction_holds_back_lso(broker):
    long = open_txn(broker, "tx-long", "lso", (b"open",))
    short = txn_producer(broker.bootstrap, "tx-short")
    short.begin_transaction()
    short.produce("lso", value=b"done")
    short.commit_transaction(15)
    assert consume_all(broker.bootstrap, "lso", "read_committed", timeout=3) == []
    assert consume_all(broker.bootstrap, "lso", "read_uncommitted", 2) == [b"open", b"done"]
    long.commit_transaction(15)
    assert consume_all(broker.bootstrap, "lso", "read_committed", 2) == [b"open", b"done"]


def test_zombie_is_fenced(broker):
    old = open_txn(broker, "tx-zombie", "z", (b"zombie",))
    new = txn_producer(broker.bootstrap, "tx-zombie")   # aborts the zombie's open txn
    new.begin_transaction()
    new.produce("z", value=b"new")
    new.commit_transaction(15)
    with pytest.raises(ck.KafkaException) as exc:
        old.commit_transaction(15)
    err = exc.value.args[0]
    assert err.fatal() or err.code() in (ck.KafkaError._FENCED, ck.KafkaError.PRODUCER_FENCED,
                                        ck.KafkaError.INVALID_PRODUCER_EPOCH)
    assert consume_all(broker.bootstrap, "z", "read_committed", 1) == [b"new"]


def test_timed_out_transaction_is_aborted_and_fenced(broker_factory):
    b = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"})
    p = open_txn(b, "tx-timeout", "to", (b"late",), timeout_ms=1000)
    time.sleep(2.5)
    with pytest.raises(ck.KafkaException):
        p.commit_transaction(15)
    assert consume_all(b.bootstrap, "to", "read_committed", timeout=3) == []
    assert consume_all(b.bootstrap, "to", "read_uncommitted", 1) == [b"late"]


@pytest.mark.parametrize("point", ["after_prepare_durable", "after_some_markers", "after_all_markers",
                                   "after_complete", "before_end_txn_response"])
def test_crash_at_fault_point_then_restart_commits(broker_factory, point):
    b = broker_factory({"kconform.fault": point})
    p = open_txn(b, f"tx-{point}", "f", (b"x0", b"x1"))
    assert commit_into_crash(b, p) == 86, f"broker did not die at {point}"
    b.sets.pop("kconform.fault")
    b.start()
    got = consume_all(b.bootstrap, "f", "read_committed", 2, partitions=2)
    assert sorted(got) == [b"x0", b"x1"]


def last_stable_offset(bootstrap, topic, partition):
    """ListOffsets(latest) with read_committed: the partition's LSO."""
    L = API["ListOffsets"].Request
    req = L(replica_id=-1, isolation_level=1, topics=[L.ListOffsetsTopic(name=topic, partitions=[
        L.ListOffsetsTopic.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1, timestamp=-1)])])
    with RawConnection(bootstrap) as conn:
        return conn.request("ListOffsets", 7, req).topics[0].partitions[0].offset


def test_crash_before_prepare_then_timeout_aborts(broker_factory):
    """Killed before PrepareCommit reached the log: after restart the transaction is still Ongoing
    (nothing was decided), so, its producer gone, the coordinator aborts it at
    transaction.timeout.ms, as Kafka does (S10 with the client gone)."""
    b = broker_factory({"kconform.fault": "before_prepare_append",
                        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"})
    p = open_txn(b, "tx-before-prepare", "g", (b"y0", b"y1"), timeout_ms=3000)
    assert commit_into_crash(b, p) == 86, "broker did not die before Prepare"
    del p
    b.sets.pop("kconform.fault")
    b.start()
    # the abort marker (one per partition, after the record) moves the LSO to the log end: 2
    deadline = time.monotonic() + 20
    lsos = None
    while time.monotonic() < deadline:
        lsos = [last_stable_offset(b.bootstrap, "g", i) for i in range(2)]
        if lsos == [2, 2]:
            break
        time.sleep(0.2)
    assert lsos == [2, 2], f"LSO still held back: {lsos}"
    assert consume_all(b.bootstrap, "g", "read_committed", 0, timeout=20, partitions=2) == []
    assert sorted(consume_all(b.bootstrap, "g", "read_uncommitted", 2, partitions=2)) == [b"y0", b"y1"]


def test_consume_transform_produce_with_send_offsets(broker):
    create_topics(broker.bootstrap, "in", "out")
    src = ck.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(5):
        src.produce("in", value=b"m%d" % i)
    src.flush(10)
    group = "ctp"
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "isolation.level": "read_committed", "enable.auto.commit": False})
    c.subscribe(["in"])
    p = txn_producer(broker.bootstrap, "tx-ctp")
    got = []
    deadline = time.monotonic() + 20
    while len(got) < 5 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m)
    assert len(got) == 5
    p.begin_transaction()
    for m in got:
        p.produce("out", value=m.value().upper())
    p.send_offsets_to_transaction([ck.TopicPartition("in", 0, got[-1].offset() + 1)],
                                  c.consumer_group_metadata(), 15)
    p.commit_transaction(15)
    committed = c.committed([ck.TopicPartition("in", 0)], 10)
    assert committed[0].offset == 5
    c.close()
    assert consume_all(broker.bootstrap, "out", "read_committed", 5) == [b"M%d" % i for i in range(5)]
    # a zombie with the same id is fenced on sendOffsetsToTransaction
    zombie = p
    txn_producer(broker.bootstrap, "tx-ctp")
    with pytest.raises(ck.KafkaException):
        zombie.begin_transaction()
        zombie.send_offsets_to_transaction([ck.TopicPartition("in", 0, 5)],
                                           ck.Consumer({"bootstrap.servers": broker.bootstrap,
                                                        "group.id": group}).consumer_group_metadata(), 10)
        zombie.commit_transaction(10)
