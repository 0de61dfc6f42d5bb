"""A transactional copier (consume-transform-produce, exactly once) for the soak test: reads
``--input`` with read_committed, writes every record to the same partition of ``--output`` and
the consumed offsets in the same transaction (sendOffsetsToTransaction), commits, again. On an
abortable error it aborts and rewinds to the group's committed offsets; on a fatal one it exits
(status 3) and the soak starts a new copier with the same transactional.id, which fences the old
one and resumes from the committed offsets. The soak also SIGKILLs it at random.

    python copier.py --bootstrap HOST:PORT --input in --output out --partitions 2 --txn-id copier
"""
from __future__ import annotations

import argparse
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition


def committed_positions(consumer, topic, partitions):
    tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    return [TopicPartition(topic, tp.partition, tp.offset if tp.offset >= 0 else 0) for tp in tps]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--txn-id", required=True)
    ap.add_argument("--batch", type=int, default=50)
    args = ap.parse_args()
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": f"{args.txn_id}-group",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "log_level": 0})
    producer = Producer({"bootstrap.servers": args.bootstrap, "transactional.id": args.txn_id,
                         "transaction.timeout.ms": 20000, "log_level": 0})
    producer.init_transactions(60)
    consumer.assign(committed_positions(consumer, args.input, args.partitions))
    print("copier started", flush=True)
    while True:
        msgs = [m for m in consumer.consume(args.batch, 1.0) if m.error() is None]
        if not msgs:
            continue
        try:
            producer.begin_transaction()
            for m in msgs:
                producer.produce(args.output, m.value(), key=m.key(), partition=m.partition())
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 60)
            producer.commit_transaction(60)
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if err.fatal():
                print(f"copier fatal: {err}", flush=True)
                return 3
            print(f"copier aborts: {err}", flush=True)
            try:
                producer.abort_transaction(60)
            except KafkaException as exc2:
                if exc2.args[0].fatal():
                    print(f"copier fatal on abort: {exc2.args[0]}", flush=True)
                    return 3
                return 4
            for tp in committed_positions(consumer, args.input, args.partitions):
                consumer.seek(tp)
            time.sleep(0.1)


if __name__ == "__main__":
    sys.exit(main())
