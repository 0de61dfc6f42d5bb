"""Driver for confluent-kafka-python (librdkafka): ``python -m conformance.clients.confluent``.

librdkafka reports its own view of every error through ``KafkaError``: ``retriable()``,
``txn_requires_abort()`` (abortable) and ``fatal()``; those flags are passed through unchanged. Only the
*name* is normalised: broker codes (>= -1) become Kafka's enum name for the code, local codes (< -1) are
mapped by ``LOCAL_CODE_NAMES`` where Kafka has an equivalent.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conformance.clients.driver import (ASSIGNMENT_STRATEGY, POLL_STEP_S, BaseDriver, Deadline, OpError,
                                        ReportedError, assignor_names, enables_auto_commit, offset_spec,
                                        read_committed, record_row, serve, timestamp_or_none)
from conformance.clients.errors import kafka_code, kafka_name
from conformance.clients.protocol import decode_bytes

# librdkafka local error (code < -1) -> normalised name. Timeouts map to REQUEST_TIMED_OUT because that
# is what Kafka's Errors.forException gives for the Java client's TimeoutException.
LOCAL_CODE_NAMES: dict[str, str] = {
    "_FENCED": "PRODUCER_FENCED",
    "_TIMED_OUT": "REQUEST_TIMED_OUT",
    "_MSG_TIMED_OUT": "REQUEST_TIMED_OUT",
    "_TIMED_OUT_QUEUE": "REQUEST_TIMED_OUT",
    "_TRANSPORT": "NETWORK_EXCEPTION",
    "_ALL_BROKERS_DOWN": "NETWORK_EXCEPTION",
    "_UNKNOWN_TOPIC": "UNKNOWN_TOPIC_OR_PARTITION",
    "_UNKNOWN_PARTITION": "UNKNOWN_TOPIC_OR_PARTITION",
    "_UNSUPPORTED_FEATURE": "UNSUPPORTED_VERSION",
    "_STATE": "ILLEGAL_STATE",
    "_CONFLICT": "ILLEGAL_STATE",
    "_INVALID_ARG": "INVALID_ARGUMENT",
    "_INVALID_TYPE": "INVALID_ARGUMENT",
    "_PURGE_QUEUE": "TRANSACTION_ABORTED",
    "_PURGE_INFLIGHT": "TRANSACTION_ABORTED",
}

OFFSET_INVALID = -1001  # librdkafka's "no offset"

#: librdkafka's assignors: their names are Java's protocol names; it has no eager "sticky".
LIBRDKAFKA_ASSIGNORS = ("range", "roundrobin", "cooperative-sticky")


def normalise_kafka_error(err: KafkaError, *, client_class: str | None = None) -> dict[str, Any]:
    code, lname = err.code(), err.name()
    if code >= -1 and kafka_name(code):
        name, kcode = kafka_name(code), code
    else:
        name = LOCAL_CODE_NAMES.get(lname, "CLIENT_ERROR")
        kcode = kafka_code(name)
    return {
        "name": name, "code": kcode, "retriable": bool(err.retriable()),
        "abortable": bool(err.txn_requires_abort()), "fatal": bool(err.fatal()),
        "fenced": name == "PRODUCER_FENCED" or lname == "_FENCED",
        "message": err.str(), "client_class": client_class or f"KafkaError.{lname}", "origin": "client",
        "client_code": code,
    }


def tp(d: dict[str, Any], with_offset: bool = False) -> TopicPartition:
    if with_offset:
        t = TopicPartition(d["topic"], int(d["partition"]), int(d["offset"]))
        if d.get("metadata") is not None:
            t.metadata = d["metadata"]
        return t
    return TopicPartition(d["topic"], int(d["partition"]))


def raise_partition_errors(tps: list[TopicPartition]) -> None:
    for t in tps:
        if t.error is not None:
            raise KafkaException(t.error)


class ConfluentDriver(BaseDriver):
    client_name = "confluent"
    UNSUPPORTED = {"describe_transactions":
                   f"confluent-kafka {confluent_kafka.__version__} AdminClient has no DescribeTransactions"}
    # An older release (confluent@VERSION) lacks what came later: AdminClient.list_offsets came with 2.3.0.
    if not hasattr(AdminClient, "list_offsets"):
        UNSUPPORTED["list_offsets"] = f"confluent-kafka {confluent_kafka.__version__} AdminClient has no list_offsets (2.3.0+)"

    def __init__(self) -> None:
        super().__init__()
        self.producer: Producer | None = None
        self.consumer: Consumer | None = None
        self.admin: AdminClient | None = None
        #: The partitions the group assigned to a subscribed consumer, as its rebalance callbacks
        #: tell (None: not subscribed).
        self.owned: set[tuple[str, int]] | None = None

    def hello_data(self) -> dict[str, Any]:
        return {"client": "confluent", "library": "librdkafka", "library_version": confluent_kafka.libversion()[0],
                "client_version": confluent_kafka.__version__}

    def normalise(self, exc: BaseException, op: str) -> dict[str, Any]:
        if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
            return normalise_kafka_error(exc.args[0])
        if isinstance(exc, KafkaError):
            return normalise_kafka_error(exc)
        if isinstance(exc, BufferError):
            return {"name": "CLIENT_ERROR", "code": None, "retriable": True, "abortable": False, "fatal": False,
                    "fenced": False, "message": str(exc), "client_class": "BufferError", "origin": "client"}
        if isinstance(exc, (TypeError, ValueError)):
            return OpError("INVALID_ARGUMENT", f"{type(exc).__name__}: {exc}", origin="client",
                           client_class=type(exc).__name__).info
        return OpError("DRIVER_ERROR", f"{type(exc).__name__}: {exc}", client_class=type(exc).__name__).info

    @staticmethod
    def _error_cb(err: KafkaError) -> None:
        """librdkafka's asynchronous errors (connection loss, fatal errors) go to stderr for diagnosis;
        the op that runs into them reports them itself."""
        print(f"librdkafka error_cb: {normalise_kafka_error(err)}", file=sys.stderr, flush=True)

    # -- lifecycle ---------------------------------------------------------------------------------
    def _config(self, args: dict[str, Any]) -> dict[str, Any]:
        config = {**self.security.librdkafka_config(), **(args.get("config") or {})}
        if "bootstrap.servers" in config:
            self.bootstrap = str(config["bootstrap.servers"])
        config.setdefault("error_cb", self._error_cb)
        return config

    def op_create_producer(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        self._ensure_new("producer")
        self.producer = Producer(self._config(args))
        return {"client_id": (args.get("config") or {}).get("client.id")}

    def op_create_consumer(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        self._ensure_new("consumer")
        config = self._config(args)
        config.setdefault("enable.partition.eof", False)
        if ASSIGNMENT_STRATEGY in config:
            # Java's class names -> librdkafka's assignor names (the JoinGroup protocol names);
            # group.instance.id is librdkafka's own property. The driver's rebalance callbacks
            # (op_subscribe) never assign: confluent-kafka's rebalance handler then calls
            # incremental_assign/unassign itself under the COOPERATIVE protocol (assign/unassign
            # under EAGER), so a cooperative rebalance keeps the retained partitions.
            config[ASSIGNMENT_STRATEGY] = ",".join(assignor_names(
                config[ASSIGNMENT_STRATEGY], LIBRDKAFKA_ASSIGNORS,
                f"librdkafka {confluent_kafka.libversion()[0]} has no such assignor"))
        self.consumer = Consumer(config)
        self.auto_commit = enables_auto_commit(args.get("config"))
        return {"client_id": (args.get("config") or {}).get("client.id")}

    def op_create_admin(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        config = {**self.security.librdkafka_config(), **(args.get("config") or {})}
        if not config.get("bootstrap.servers"):
            config["bootstrap.servers"] = self._admin_bootstrap()
        self.admin = AdminClient(config)
        return {}

    def close_client(self, kind: str, client: Any, deadline: Deadline) -> None:
        # librdkafka's AdminClient has no close: dropping the handle ends it.
        if kind != "admin":
            client.close()

    # -- transactions ------------------------------------------------------------------------------
    def op_init_transactions(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        self._producer().init_transactions(deadline.remaining())
        return {}

    def op_begin_transaction(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        self._producer().begin_transaction()
        return {}

    def op_commit_transaction(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        self._producer().commit_transaction(deadline.remaining())
        return {}

    def op_abort_transaction(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        self._producer().abort_transaction(deadline.remaining())
        return {}

    def op_send_offsets_to_transaction(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        producer = self._producer()
        offsets = [tp(o, with_offset=True) for o in args["offsets"]]
        if self.consumer is not None:
            producer.send_offsets_to_transaction(offsets, self.consumer.consumer_group_metadata(),
                                                 deadline.remaining())
            return {}
        if not args.get("group_id"):
            raise OpError("ILLEGAL_STATE", "send_offsets_to_transaction needs a consumer or a group_id")
        if not self.bootstrap:
            raise OpError("ILLEGAL_STATE", "no bootstrap.servers known for the group_id form")
        # librdkafka's group metadata is opaque and only a consumer makes one. A consumer that never
        # joins gives generation -1 and no member id, as Java's `new ConsumerGroupMetadata(groupId)`.
        scratch = Consumer({**self.security.librdkafka_config(), "bootstrap.servers": self.bootstrap,
                            "group.id": args["group_id"]})
        try:
            producer.send_offsets_to_transaction(offsets, scratch.consumer_group_metadata(), deadline.remaining())
        finally:
            scratch.close()
        return {}

    # -- produce -----------------------------------------------------------------------------------
    def op_send(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        producer = self._producer()
        wait = args.get("wait", True)
        box: dict[str, Any] = {}
        done = threading.Event()
        seq = None if wait else self.deliveries.new()

        def on_delivery(err: KafkaError | None, msg: Any) -> None:
            if err is not None:
                result = {"topic": msg.topic(), "partition": msg.partition(), "error": normalise_kafka_error(err)}
            else:
                ts_type, ts = msg.timestamp()
                result = {"topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset(),
                          "timestamp_ms": ts if ts_type != confluent_kafka.TIMESTAMP_NOT_AVAILABLE else None}
            if seq is None:
                box.update(result)
                done.set()
            else:
                self.deliveries.complete(seq, result)

        kwargs: dict[str, Any] = {"value": decode_bytes(args.get("value")), "key": decode_bytes(args.get("key")),
                                  "on_delivery": on_delivery}
        if args.get("partition") is not None:
            kwargs["partition"] = int(args["partition"])
        if args.get("headers") is not None:
            kwargs["headers"] = [(h[0], decode_bytes(h[1])) for h in args["headers"]]
        if args.get("timestamp_ms") is not None:
            kwargs["timestamp"] = int(args["timestamp_ms"])
        try:
            producer.produce(args["topic"], **kwargs)
        except BaseException:
            if seq is not None:
                self.deliveries.cancel(seq)
            raise
        if seq is not None:
            producer.poll(0)
            return {"queued": True, "seq": seq}
        while not done.is_set() and not deadline.expired:
            producer.poll(min(0.05, deadline.remaining()))
        if not done.is_set():
            raise OpError("DEADLINE_EXCEEDED", "no delivery report before the deadline")
        if "error" in box:
            raise ReportedError(box["error"])
        return box

    def op_flush(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        pending = self._producer().flush(deadline.remaining())
        deliveries, outstanding = self.deliveries.take()
        if pending or outstanding:
            raise OpError("DEADLINE_EXCEEDED", f"{max(pending, outstanding)} records undelivered at the deadline",
                          deliveries=deliveries, pending=max(pending, outstanding))
        return {"deliveries": deliveries}

    # -- consume -----------------------------------------------------------------------------------
    def op_subscribe(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        """subscribe with rebalance callbacks that only record what the group assigned and took:
        librdkafka runs them inside the application's poll, and confluent-kafka's handler then makes
        the assign()/unassign() call itself (incremental under COOPERATIVE), as without callbacks
        (Consumer_rebalance_cb's fallback when the callback assigned nothing)."""
        self.owned = set()

        def on_assign(consumer: Any, parts: list[TopicPartition]) -> None:
            self.owned.update((p.topic, p.partition) for p in parts)

        def on_revoke(consumer: Any, parts: list[TopicPartition]) -> None:
            self.owned.difference_update((p.topic, p.partition) for p in parts)
            self.note_revoked(parts)

        self._consumer().subscribe(list(args["topics"]), on_assign=on_assign, on_revoke=on_revoke,
                                   on_lost=on_revoke)
        return {}

    def op_assign(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        parts = []
        for p in args["partitions"]:
            t = TopicPartition(p["topic"], int(p["partition"]))
            if p.get("offset") is not None:
                t.offset = int(p["offset"])
            parts.append(t)
        self._consumer().assign(parts)
        return {}

    def poll_once(self, consumer: Any, max_records: int, window: Deadline,
                  errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One poll(), one message at most. librdkafka serves rebalance callbacks inside
        poll()/consume(), and one consume() batch can hold records read before a revocation and
        after the reassignment (its fetch-queue barrier drops the old ones only when the barrier
        is served before the batch ends), so the driver reads one message per call: each is read
        after every callback before it (BaseDriver.op_poll)."""
        msg = consumer.poll(min(POLL_STEP_S, window.remaining()))
        if msg is None:
            return []
        err = msg.error()
        if err is not None:
            if err.code() != KafkaError._PARTITION_EOF:
                info = normalise_kafka_error(err)
                if info["fatal"]:
                    raise KafkaException(err)
                errors.append(info)
            return []
        if self.owned is not None and (msg.topic(), msg.partition()) not in self.owned:
            # fetched before a revocation, not yet dropped by librdkafka (its barrier op is served
            # by the broker thread after the unassign)
            return []
        ts_type, ts = msg.timestamp()
        return [record_row(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(),
                           msg.headers(), ts if ts_type != confluent_kafka.TIMESTAMP_NOT_AVAILABLE else None)]

    def op_commit(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        consumer = self._consumer()
        if args.get("offsets"):
            result = consumer.commit(offsets=[tp(o, with_offset=True) for o in args["offsets"]], asynchronous=False)
        else:
            result = consumer.commit(asynchronous=False)
        raise_partition_errors(result or [])
        return {}

    def op_committed(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        result = self._consumer().committed([tp(p) for p in args["partitions"]], timeout=deadline.remaining())
        raise_partition_errors(result)
        return {"offsets": [{"topic": t.topic, "partition": t.partition,
                             "offset": None if t.offset < 0 else t.offset, "metadata": t.metadata}
                            for t in result]}

    def op_position(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        consumer = self._consumer()
        parts = [tp(p) for p in args["partitions"]] if args.get("partitions") else consumer.assignment()
        result = consumer.position(parts)
        return {"positions": [{"topic": t.topic, "partition": t.partition,
                               "offset": None if t.offset < 0 else t.offset} for t in result]}

    # -- admin -------------------------------------------------------------------------------------
    def op_list_offsets(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        from confluent_kafka import IsolationLevel
        from confluent_kafka.admin import OffsetSpec
        spec = offset_spec(args, earliest=OffsetSpec.earliest(), latest=OffsetSpec.latest(), at=OffsetSpec.for_timestamp)
        level = IsolationLevel.READ_COMMITTED if read_committed(args) else IsolationLevel.READ_UNCOMMITTED
        request = {tp(p): spec for p in args["partitions"]}
        futures = self._admin(deadline).list_offsets(request, isolation_level=level,
                                                     request_timeout=max(0.001, deadline.remaining()))
        out = []
        for part, fut in futures.items():
            row: dict[str, Any] = {"topic": part.topic, "partition": part.partition}
            try:
                info = fut.result(timeout=deadline.remaining())
                row.update(offset=info.offset, timestamp_ms=timestamp_or_none(info.timestamp))
            except KafkaException as exc:
                row["error"] = self.normalise(exc, "list_offsets")
            out.append(row)
        out.sort(key=lambda r: (r["topic"], r["partition"]))
        return {"offsets": out}

    def op_create_topics(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        topics = [NewTopic(t["name"], num_partitions=int(t.get("partitions", 1)),
                           replication_factor=int(t.get("replication_factor", 1)),
                           config={k: str(v) for k, v in (t.get("config") or {}).items()})
                  for t in args["topics"]]
        futures = self._admin(deadline).create_topics(
            topics, operation_timeout=max(0.001, deadline.remaining()), request_timeout=max(0.001, deadline.remaining()))
        out = []
        for name, fut in futures.items():
            try:
                fut.result(timeout=deadline.remaining())
                out.append({"name": name, "error": None})
            except KafkaException as exc:
                out.append({"name": name, "error": self.normalise(exc, "create_topics")})
        return {"topics": out}


def main() -> None:
    status = serve(ConfluentDriver())
    # Skip interpreter teardown: librdkafka handle destructors may block on unfinished work, and a driver
    # whose stdin closed has nothing left to report.
    os._exit(status)


if __name__ == "__main__":
    main()
