"""Each client driver against a real broker: transactions, isolation, fencing, crashes.

Every test runs per (target, client). The drivers are real client libraries in their own processes;
nothing here talks to a mock. Waiting is always bounded by a count of polls, and "nothing more to read"
is decided by offsets (the consumer's position reached the partition's end), never by elapsed time.

Known incompatibility, measured on this machine: Tansu 0.6.0 closes the connection when kafka-clients 4.4
sends ApiVersions v5 with clusterId/nodeId to a broker it learned from metadata, so the Java client never
gets past coordinator lookup on Tansu (conftest.KNOWN_INCOMPATIBLE skips that pair with this reason).
"""

from __future__ import annotations

from typing import Any

import pytest


def consumer_config(bootstrap: str, isolation: str, group: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": isolation,
            "auto.offset.reset": "earliest", "enable.auto.commit": False}


# Sarama's InitProducerId gives up on CONCURRENT_TRANSACTIONS (its initProducerId retries only
# coordinator errors), which Kafka answers while it aborts the open transaction of the producer the
# new one fences: the driver builds the producer again, as a Sarama application must, and reports
# how often Sarama gave up.
INIT_GIVES_UP_ON_CONCURRENT_TRANSACTIONS = {"sarama"}


def started_producer(spawn, h, client: str, bootstrap: str, txid: str, label: str, *, fencing: bool = False):
    """A producer with transactions initialised. ``fencing``: another producer of ``txid`` has an
    open transaction, which a client in INIT_GIVES_UP_ON_CONCURRENT_TRANSACTIONS gives up on first."""
    proc = spawn(client, label=label)
    h.ok(proc.call("create_producer", config={"bootstrap.servers": bootstrap, "transactional.id": txid}))
    init = h.ok(proc.call("init_transactions", deadline_ms=60_000))
    if fencing and client in INIT_GIVES_UP_ON_CONCURRENT_TRANSACTIONS:
        assert init["concurrent_transactions"] >= 1, init
    return proc


def read(spawn, h, client: str, bootstrap: str, topic: str, partitions: int, isolation: str,
         end: dict[int, int]) -> list[tuple[int, Any, Any]]:
    """What a fresh consumer of ``client`` with ``isolation`` reads from every partition up to ``end``."""
    consumer = spawn(client, label=f"consumer-{isolation}")
    h.ok(consumer.call("create_consumer", config=consumer_config(bootstrap, isolation, h.unique("g"))))
    parts = [{"topic": topic, "partition": p} for p in range(partitions)]
    h.ok(consumer.call("assign", partitions=[{**p, "offset": 0} for p in parts]))
    records = h.read_until_end(consumer, parts, end)
    records.sort(key=lambda r: (r["partition"], r["offset"]))
    return [(r["partition"], r["key"], r["value"]) for r in records]


def test_commit_then_abort_visible_per_isolation_level(compatible, spawn, h):
    broker, client = compatible
    topic = broker.topic(2)
    producer = started_producer(spawn, h, client, broker.bootstrap, h.unique(f"txn-{client}"), "producer")

    h.ok(producer.call("begin_transaction"))
    first = h.ok(producer.call("send", topic=topic, partition=0, key="k0", value="committed-0",
                               headers=[["h", "v"], ["bin", {"base64": "AP8="}]]))
    second = h.ok(producer.call("send", topic=topic, partition=1, key="k1", value={"base64": "AP8A"}))
    assert (first["partition"], second["partition"]) == (0, 1)
    assert first["offset"] >= 0 and second["offset"] >= 0
    h.ok(producer.call("commit_transaction"))

    h.ok(producer.call("begin_transaction"))
    h.ok(producer.call("send", topic=topic, partition=0, key="k0", value="aborted-0"))
    queued = h.ok(producer.call("send", topic=topic, partition=1, key="k1", value="aborted-1", wait=False))
    assert queued["queued"] is True
    flushed = h.ok(producer.call("flush"))["deliveries"]
    assert [d["seq"] for d in flushed] == [queued["seq"]]
    assert flushed[0]["partition"] == 1 and flushed[0]["offset"] > second["offset"]
    h.ok(producer.call("abort_transaction"))

    end = h.end_offsets(producer, topic, 2, "read_uncommitted")
    uncommitted = read(spawn, h, client, broker.bootstrap, topic, 2, "read_uncommitted", end)
    assert uncommitted == [(0, "k0", "committed-0"), (0, "k0", "aborted-0"),
                           (1, "k1", {"base64": "AP8A"}), (1, "k1", "aborted-1")]
    broker.require("read_committed")
    committed = read(spawn, h, client, broker.bootstrap, topic, 2, "read_committed", end)
    assert committed == [(0, "k0", "committed-0"), (1, "k1", {"base64": "AP8A"})]


def test_headers_and_binary_payloads_round_trip(compatible, spawn, h):
    broker, client = compatible
    topic = broker.topic(1)
    producer = started_producer(spawn, h, client, broker.bootstrap, h.unique(f"hdr-{client}"), "producer")
    h.ok(producer.call("begin_transaction"))
    headers = [["a", "1"], ["a", "2"], ["bin", {"base64": "AP8="}], ["none", None]]
    outcome = producer.call("send", topic=topic, partition=0, key=None, value="v", headers=headers)
    if client in ("kafka-python", "kafkajs"):
        # Kafka allows a null header value; kafka-python 3.0.12 refuses it before sending, and so
        # does KafkaJS 2.2.4 (a TypeError from its record encoder).
        assert not outcome.ok and outcome.error.name == "INVALID_ARGUMENT", outcome.to_dict()
        assert outcome.error.origin == "client", outcome.to_dict()
        headers = headers[:-1]
        outcome = producer.call("send", topic=topic, partition=0, key=None, value="v", headers=headers)
    h.ok(outcome)
    h.ok(producer.call("commit_transaction"))
    consumer = spawn(client, label="consumer")
    h.ok(consumer.call("create_consumer", config=consumer_config(broker.bootstrap, "read_committed", h.unique("g"))))
    h.ok(consumer.call("assign", partitions=[{"topic": topic, "partition": 0, "offset": 0}]))
    end = h.end_offsets(producer, topic, 1, "read_committed")
    (record,) = h.read_until_end(consumer, [{"topic": topic, "partition": 0}], end)
    assert record["key"] is None and record["value"] == "v"
    assert record["headers"] == headers


def test_zombie_with_same_transactional_id_fences_the_first(compatible, spawn, h):
    broker, client = compatible
    broker.require("fencing")
    topic = broker.topic(1)
    txid = h.unique(f"zombie-{client}")
    first = started_producer(spawn, h, client, broker.bootstrap, txid, "first")
    h.ok(first.call("begin_transaction"))
    h.ok(first.call("send", topic=topic, partition=0, key="k", value="from-first"))

    second = started_producer(spawn, h, client, broker.bootstrap, txid, "second", fencing=True)  # the successor

    commit = first.call("commit_transaction", deadline_ms=30_000)
    assert not commit.ok, "the fenced producer's commit must fail"
    assert commit.error.origin == "client", commit.error.to_dict()
    if client == "kafkajs":
        # KafkaJS has no notion of fencing: it sends EndTxn v1, Kafka answers the old epoch with
        # INVALID_PRODUCER_EPOCH, and KafkaJS passes it on as a non-retriable protocol error.
        assert (commit.error.name, commit.error.fenced, commit.error.retriable) == (
            "INVALID_PRODUCER_EPOCH", False, False), commit.error.to_dict()
    else:
        assert commit.error.fenced, commit.error.to_dict()
    assert commit.error.name in ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"), commit.error.to_dict()

    h.ok(second.call("begin_transaction"))
    h.ok(second.call("send", topic=topic, partition=0, key="k", value="from-second"))
    h.ok(second.call("commit_transaction"))

    end = h.end_offsets(second, topic, 1, "read_uncommitted")
    assert read(spawn, h, client, broker.bootstrap, topic, 1, "read_committed", end) == [(0, "k", "from-second")]


def test_fenced_send_reports_the_clients_settled_classification(compatible, spawn, h):
    """A zombie's send after the fence fails with INVALID_PRODUCER_EPOCH, and the flags the driver
    reports are the client's settled ones, the same every time. kafka-clients completes the failed
    batch's future before its TransactionManager moves to ABORTABLE_ERROR (Sender.failBatch), so a
    driver reading the state at once saw abortable true or false by chance (zombie/fence_on_send
    diverged between targets); the Java driver now waits, bounded, for that transition."""
    broker, client = compatible
    broker.require("fencing")
    seen = []
    for attempt in range(3):
        topic = broker.topic(1)
        txid = h.unique(f"fenced-send-{client}-{attempt}")
        first = started_producer(spawn, h, client, broker.bootstrap, txid, f"first-{attempt}")
        h.ok(first.call("begin_transaction"))
        h.ok(first.call("send", topic=topic, partition=0, key="k", value="a"))
        started_producer(spawn, h, client, broker.bootstrap, txid, f"second-{attempt}", fencing=True)
        send = first.call("send", topic=topic, partition=0, key="k", value="b", deadline_ms=30_000)
        assert not send.ok, "the fenced producer's send must fail"
        assert send.error.name in ("INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED"), send.error.to_dict()
        seen.append((send.error.name, send.error.abortable, send.error.fatal))
    assert len(set(seen)) == 1, f"the client's classification changed between identical runs: {seen}"
    if client == "java":
        # TransactionManager.maybeTransitionToErrorState: an InvalidProducerEpochException leaves a
        # transactional producer in ABORTABLE_ERROR (abortTransaction is still accepted).
        assert seen[0] == ("INVALID_PRODUCER_EPOCH", True, False), seen


def test_send_offsets_to_transaction_commits_group_offsets(compatible, spawn, h):
    broker, client = compatible
    source, sink = broker.topic(1), broker.topic(1)
    group = h.unique("ctp")
    seeder = started_producer(spawn, h, client, broker.bootstrap, h.unique(f"seed-{client}"), "seeder")
    h.ok(seeder.call("begin_transaction"))
    for i in range(3):
        h.ok(seeder.call("send", topic=source, partition=0, key=f"k{i}", value=f"v{i}"))
    h.ok(seeder.call("commit_transaction"))

    # consume-transform-produce in ONE driver: its consumer's group metadata goes into the transaction
    worker = spawn(client, label="worker")
    h.ok(worker.call("create_consumer", config=consumer_config(broker.bootstrap, "read_committed", group)))
    h.ok(worker.call("assign", partitions=[{"topic": source, "partition": 0, "offset": 0}]))
    h.ok(worker.call("create_producer", config={"bootstrap.servers": broker.bootstrap,
                                                "transactional.id": h.unique(f"ctp-{client}")}))
    h.ok(worker.call("init_transactions", deadline_ms=60_000))
    end = h.end_offsets(seeder, source, 1, "read_committed")
    records = h.read_until_end(worker, [{"topic": source, "partition": 0}], end)
    assert [r["value"] for r in records] == ["v0", "v1", "v2"]
    h.ok(worker.call("begin_transaction"))
    for r in records:
        h.ok(worker.call("send", topic=sink, partition=0, key=r["key"], value=r["value"].upper()))
    next_offset = records[-1]["offset"] + 1
    h.ok(worker.call("send_offsets_to_transaction",
                     offsets=[{"topic": source, "partition": 0, "offset": next_offset}]))
    h.ok(worker.call("commit_transaction"))

    checker = spawn(client, label="checker")
    h.ok(checker.call("create_consumer", config=consumer_config(broker.bootstrap, "read_committed", group)))
    committed = h.ok(checker.call("committed", partitions=[{"topic": source, "partition": 0}]))["offsets"]
    assert [(c["partition"], c["offset"]) for c in committed] == [(0, next_offset)]
    sink_end = h.end_offsets(seeder, sink, 1, "read_uncommitted")
    assert read(spawn, h, client, broker.bootstrap, sink, 1, "read_committed", sink_end) == [
        (0, "k0", "V0"), (0, "k1", "V1"), (0, "k2", "V2")]


def test_describe_transactions_reports_coordinator_state(compatible, spawn, h):
    broker, client = compatible
    if "describe_transactions" not in broker.capabilities:
        pytest.skip(f"target {broker.name} does not serve DescribeTransactions")
    topic = broker.topic(1)
    txid = h.unique(f"desc-{client}")
    producer = started_producer(spawn, h, client, broker.bootstrap, txid, "producer")
    h.ok(producer.call("begin_transaction"))
    h.ok(producer.call("send", topic=topic, partition=0, key="k", value="v"))
    outcome = producer.call("describe_transactions", ids=[txid, h.unique("never-used")])
    if not outcome.ok and outcome.error.name == "UNSUPPORTED_BY_CLIENT":
        pytest.skip(f"{client}: {outcome.error.message}")
    ongoing, unknown = h.ok(outcome)["transactions"]
    assert ongoing["state"] == "Ongoing", ongoing
    assert ongoing["partitions"] == [{"topic": topic, "partition": 0}]
    assert ongoing["producer_id"] >= 0 and ongoing["producer_epoch"] >= 0
    assert unknown["error"]["name"] == "TRANSACTIONAL_ID_NOT_FOUND", unknown
    h.ok(producer.call("commit_transaction"))
    (done,) = h.ok(producer.call("describe_transactions", ids=[txid]))["transactions"]
    assert done["state"] in ("PrepareCommit", "CompleteCommit"), done
