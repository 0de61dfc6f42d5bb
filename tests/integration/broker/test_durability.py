"""What the broker acknowledged, it keeps: kill -9 and restarts lose nothing."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from broker_impl.log.records import build_batch
from broker_impl.protocol.messages import API

from .rawclient import RawConnection


def _read_all(bootstrap: str, topic: str, partitions: int, expect: int, timeout: float = 60.0):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.time_ns()}",
                  "enable.auto.commit": False, "log_level": 0})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    deadline = time.monotonic() + timeout
    idle_until = None
    while time.monotonic() < deadline:
        msgs = c.consume(1000, 0.5)
        for m in msgs:
            if m.error() is None:
                out.append((m.partition(), m.offset(), m.value()))
        if len(out) >= expect:
            # keep reading briefly: anything beyond `expect` would be a duplicate
            idle_until = idle_until or time.monotonic() + 1.0
            if time.monotonic() > idle_until:
                break
    c.close()
    return out


def test_kill_9_during_acks_all_produce_loses_no_acknowledged_record(broker_factory):
    broker = broker_factory({"num.partitions": "3"})
    topic = "durable"
    acked: list[bytes] = []
    lock = threading.Lock()
    stop = threading.Event()

    def produce_forever():
        p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 1,
                      "enable.idempotence": False, "retries": 0, "message.timeout.ms": 5000,
                      "log_level": 0})

        def on_delivery(err, msg):
            if err is None:
                with lock:
                    acked.append(msg.value())

        i = 0
        deadline = time.monotonic() + 60
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                p.produce(topic, value=b"r-%08d" % i, on_delivery=on_delivery)
                i += 1
            except BufferError:
                pass
            p.poll(0)
            if i % 200 == 0:
                time.sleep(0.001)
        p.flush(10)

    t = threading.Thread(target=produce_forever, daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while len(acked) < 5000 and time.monotonic() < deadline:
        time.sleep(0.01)
    broker.kill()                      # kill -9 while the producer is mid-stream
    stop.set()
    t.join(30)
    with lock:
        acknowledged = set(acked)
    assert len(acknowledged) >= 5000
    broker.start()                     # same data dir, same port
    stored = _read_all(broker.bootstrap, topic, 3, len(acknowledged))
    values = [v for _, _, v in stored]
    missing = acknowledged - set(values)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:3]}"
    assert len(values) == len(set(values)), "a record is stored twice"


def test_idempotent_retry_is_stored_once_even_across_restart(broker):
    """The same idempotent batch sent again (a lost response, retried) gets the original offset."""
    P = API["Produce"].Request
    with RawConnection(broker.bootstrap) as conn:
        init = conn.request("InitProducerId", 4, API["InitProducerId"].Request(
            transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
        assert init.error_code == 0
        pid, epoch = init.producer_id, init.producer_epoch
        conn.request("CreateTopics", 5, API["CreateTopics"].Request(
            topics=[API["CreateTopics"].Request.CreatableTopic(name="idem", num_partitions=1, replication_factor=1)],
            timeout_ms=5000))

        def send(seq: int, values: list[bytes]):
            batch = build_batch([(None, v) for v in values], base_timestamp=int(time.time() * 1000),
                                producer_id=pid, producer_epoch=epoch, base_sequence=seq)
            req = P(acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(
                name="idem", partition_data=[P.TopicProduceData.PartitionProduceData(index=0, records=batch)])])
            r = conn.request("Produce", 9, req).responses[0].partition_responses[0]
            return r.error_code, r.base_offset

        assert send(0, [b"a", b"b"]) == (0, 0)
        assert send(2, [b"c"]) == (0, 2)
        assert send(0, [b"a", b"b"]) == (0, 0)     # retry of the first batch: deduplicated
        assert send(5, [b"x"])[0] == 45             # a gap: OUT_OF_ORDER_SEQUENCE_NUMBER
    broker.kill()
    broker.start()
    with RawConnection(broker.bootstrap) as conn:
        batch = build_batch([(None, b"c")], base_timestamp=int(time.time() * 1000),
                            producer_id=pid, producer_epoch=epoch, base_sequence=2)
        req = P(acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(
            name="idem", partition_data=[P.TopicProduceData.PartitionProduceData(index=0, records=batch)])])
        r = conn.request("Produce", 9, req).responses[0].partition_responses[0]
        assert (r.error_code, r.base_offset) == (0, 2)   # still recognised after kill -9 + restart
    stored = _read_all(broker.bootstrap, "idem", 1, 3)
    assert [v for _, _, v in stored] == [b"a", b"b", b"c"]


def test_confluent_idempotent_producer_round_trip(broker):
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "log_level": 0})
    for i in range(2000):
        p.produce("idem-rdk", value=b"%d" % i, partition=0)
    assert p.flush(30) == 0
    stored = _read_all(broker.bootstrap, "idem-rdk", 1, 2000)
    assert [v for _, _, v in stored] == [b"%d" % i for i in range(2000)]
