"""Real-client helpers for the target tests: produce with confluent-kafka, read partitions back.

Every loop is bounded by a deadline; nothing here asserts on time.
"""
from __future__ import annotations

import logging
import os
import time
import uuid
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from conformance.targets import Target, TopicSpec, Topology, wire


#: librdkafka's connection errors while a node is down are expected here: keep them off stderr.
LIBRDKAFKA_LOG = logging.getLogger("kconform.tests.librdkafka")


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: str
    value: str


def producer(bootstrap: str, **extra) -> Producer:
    conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "logger": LIBRDKAFKA_LOG}
    conf.update(extra)
    return Producer(conf)


def produce(p: Producer, topic: str, records: list[tuple[int, str, str]], timeout: float = 30.0) -> None:
    """Produce (partition, key, value) records and wait until every one is acknowledged."""
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)

    for partition, key, value in records:
        p.produce(topic, key=key.encode(), value=value.encode(), partition=partition, on_delivery=on_delivery)
    remaining = p.flush(timeout)
    assert remaining == 0, f"{remaining} records not acknowledged within {timeout}s"
    assert not errors, f"delivery errors: {errors}"


def read_partitions(
    bootstrap: str,
    topic: str,
    partitions: list[int],
    *,
    isolation: str = "read_uncommitted",
    expect: int,
    timeout: float = 30.0,
    settle: float = 1.0,
) -> list[Record]:
    """Read the partitions from the beginning until `expect` records arrived (or `timeout`),
    then keep polling `settle` seconds more so that extra records (duplicates) show up too."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"kconform-read-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
            "logger": LIBRDKAFKA_LOG,
        }
    )
    out: list[Record] = []
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        deadline = time.monotonic() + timeout
        settle_until = None
        while True:
            now = time.monotonic()
            if settle_until is None and len(out) >= expect:
                settle_until = now + settle
            if now >= (settle_until or deadline):
                break
            msg = c.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(msg.error())
            out.append(Record(msg.partition(), msg.offset(), msg.key().decode(), msg.value().decode()))
    finally:
        c.close()
    return out


def kafka_error_summary(exc: KafkaException) -> dict:
    """The normalised outcome of a failed client call: name, code, and the client's classes."""
    err = exc.args[0]
    return {
        "outcome": "error",
        "error": err.name(),
        "code": err.code(),
        "retriable": err.retriable(),
        "txn_requires_abort": err.txn_requires_abort(),
        "fatal": err.fatal(),
        "message": err.str(),
    }


def check_contract(target: Target, bootstrap: str, nodes: int, topic: str = "contract") -> None:
    """What every target must do once started: Metadata lists its nodes, a topic is made and
    led, a real client produces and consumes through it, coordinators are found."""
    assert len(target.node_ids()) == nodes
    for _, address in target.live_addresses():
        assert sorted(wire.metadata(address, []).brokers) == target.node_ids()
    target.create_topics([TopicSpec(topic, partitions=2)])
    assert all(target.partition_leader(topic, p) in target.node_ids() for p in (0, 1))
    records = [(0, "k0", "v0"), (1, "k1", "v1")]
    produce(producer(bootstrap), topic, records)
    got = read_partitions(bootstrap, topic, [0, 1], expect=2)
    assert sorted((r.partition, r.key, r.value) for r in got) == records
    assert target.group_coordinator("contract-group") in target.node_ids()
    if "transactions" in target.capabilities:
        assert target.transaction_coordinator("contract-txn") in target.node_ids()


def pids_of(target) -> list[int]:
    return [p.pid for p in getattr(target, "procs", {}).values() if p.pid]


def assert_all_ended(pids: list[int]) -> None:
    """Every PID is gone (reaped by the target), none left running."""
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        raise AssertionError(f"process {pid} still exists after stop()")


def check_addresses_filled_in_place(target: Target, workdir, nodes: int) -> None:
    """The proxy follows target.addresses as the dict it was before start (it is started before
    the target): start() must fill that very dict, never bind a new one."""
    followed = target.addresses
    try:
        target.start(Topology(nodes=nodes), {}, workdir)
        assert followed is target.addresses and len(followed) == nodes
    finally:
        target.stop()
