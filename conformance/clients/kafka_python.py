"""Driver for kafka-python 3.x (pure Python): ``python -m conformance.clients.kafka_python``.

Config keys arrive in Java spelling (``transactional.id``) and become kafka-python keyword arguments
(``transactional_id``); a consumer's ``partition.assignment.strategy`` (Java's class names) becomes
kafka-python's assignor classes of the same protocol name (``consumer_kwargs``). kafka-python's own classification of an error: the exception's ``retriable``
attribute, and for producer ops its TransactionManager's state right after the failure
(``has_abortable_error()`` / ``has_fatal_error()``), which is what decides whether the library will
accept an abort. kafka-python wraps an earlier transactional error in a bare ``KafkaError``
("... in an error state"); the wrapped error gives the normalised name, as Java's cause does.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import kafka
import kafka.errors as Errors
from kafka import ConsumerRebalanceListener, KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.structs import OffsetAndMetadata

from conformance.clients.driver import (ASSIGNMENT_STRATEGY, POLL_STEP_S, PRODUCER_OPS, BaseDriver, Deadline,
                                        OpError, assignor_names, await_settled, enables_auto_commit, offset_spec,
                                        python_kwargs, read_committed, record_row, serve, timestamp_or_none,
                                        without_partitions)
from conformance.clients.errors import kafka_code, kafka_name
from conformance.clients.protocol import decode_bytes as _payload

# kafka-python exception class (by name, most specific first) -> normalised name, for errors that are
# not BrokerResponseErrors (those carry Kafka's code in `errno`).
LOCAL_CLASS_NAMES: list[tuple[type[BaseException], str]] = [
    (getattr(Errors, cls), name) for cls, name in (
        ("KafkaTimeoutError", "REQUEST_TIMED_OUT"),
        ("IllegalStateError", "ILLEGAL_STATE"),
        ("IllegalArgumentError", "INVALID_ARGUMENT"),
        ("KafkaConfigurationError", "INVALID_ARGUMENT"),
        ("TransactionAbortedError", "TRANSACTION_ABORTED"),   # 3.0+ (kafka-python@VERSION may lack it)
        ("CommitFailedError", "COMMIT_FAILED"),
        ("KafkaConnectionError", "NETWORK_EXCEPTION"),
        ("NodeNotReadyError", "NETWORK_EXCEPTION"))
    if hasattr(Errors, cls)] + [
    (AssertionError, "INVALID_ARGUMENT"),  # kafka-python asserts on unknown config keys
    (TypeError, "INVALID_ARGUMENT"),
    (ValueError, "INVALID_ARGUMENT"),
]


#: Java's protocol names -> kafka-python's assignors of that name (``name``). kafka-python's
#: cooperative-sticky speaks only the COOPERATIVE protocol, so a list mixing it with an eager one is
#: refused by kafka-python itself (Java's falls back to EAGER).
ASSIGNORS = {a.name: a for a in (RangePartitionAssignor, RoundRobinPartitionAssignor, StickyPartitionAssignor)}
try:  # 3.0+; an older release (kafka-python@2.2.15) has no cooperative assignor
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    ASSIGNORS[CooperativeStickyAssignor.name] = CooperativeStickyAssignor
except ImportError:
    pass


def consumer_kwargs(config: dict[str, Any]) -> dict[str, Any]:
    """A consumer's Java properties as kafka-python keyword arguments: partition.assignment.strategy's
    class names become kafka-python's assignor classes of the same protocol name;
    group.instance.id is kafka-python's group_instance_id (static membership) as it stands."""
    config = dict(config or {})
    strategy = config.pop(ASSIGNMENT_STRATEGY, None)
    kw = python_kwargs(config)
    if strategy is not None:
        kw["partition_assignment_strategy"] = tuple(ASSIGNORS[n] for n in assignor_names(strategy, ASSIGNORS))
    return kw


def _tp(d: dict[str, Any]) -> TopicPartition:
    return TopicPartition(d["topic"], int(d["partition"]))


def _offsets(rows: list[dict[str, Any]]) -> dict[TopicPartition, OffsetAndMetadata]:
    return {_tp(r): OffsetAndMetadata(int(r["offset"]), r.get("metadata") or "", -1) for r in rows}


def _await_error_state(tm: Any) -> None:
    """A failed send's future fails in the sender thread, which then sets the TransactionManager's
    state (measured here as fatal True/False between identical runs): read the settled
    classification (``driver.await_settled``)."""
    if tm is None or not getattr(tm, "transactional_id", None):
        return
    await_settled(lambda: tm.has_abortable_error() or tm.has_fatal_error())


class RevocationListener(ConsumerRebalanceListener):
    """Tells ``poll`` which partitions a rebalance took from the consumer (BaseDriver.op_poll).
    kafka-python runs it on its IO loop while the application's poll() waits for the rejoin, and
    reads the records of that poll() after it.

    Under the EAGER protocol kafka-python revokes every partition before it rejoins but keeps the
    position of each partition assigned back (``assign_from_subscribed`` preserves its state: it
    does not restart from the committed offset, as Java does): the records it reads next continue
    those gathered before, and nobody else read them in between, so those are kept -- dropping
    them would lose them. So a partition revoked while kafka-python still holds it is held until
    the assignment: given back, its records stay; given to another member, they go. A partition
    revoked after kafka-python dropped it (COOPERATIVE: at the assignment) or lost (kafka-python
    drops every position) goes at once."""

    def __init__(self, driver: KafkaPythonDriver, consumer: KafkaConsumer) -> None:
        self.driver = driver
        self.consumer = consumer

    def on_partitions_revoked(self, revoked: Any) -> None:
        held = self.consumer.assignment() or set()
        with self.driver.held_lock:
            self.driver.held.update(tp for tp in revoked if tp in held)
        self.driver.note_revoked([tp for tp in revoked if tp not in held])

    def on_partitions_assigned(self, assigned: Any) -> None:
        with self.driver.held_lock:
            held, self.driver.held = self.driver.held, set()
            rewind, self.driver.rewind = self.driver.rewind, {}
            for tp, offset in rewind.items():
                if tp in assigned:
                    self.consumer.seek(tp, offset)
        self.driver.note_revoked([tp for tp in held if tp not in assigned])

    def on_partitions_lost(self, lost: Any) -> None:
        with self.driver.held_lock:
            self.driver.held.difference_update(lost)
            for tp in lost:
                self.driver.rewind.pop(tp, None)
        self.driver.note_revoked(lost)


class KafkaPythonDriver(BaseDriver):
    client_name = "kafka-python"
    # An older release (kafka-python@VERSION) lacks what came later (both came with 3.0).
    UNSUPPORTED = {op: f"kafka-python {kafka.__version__}'s KafkaAdminClient has no {method}"
                   for op, method in (("describe_transactions", "describe_transactions"),
                                      ("list_offsets", "list_partition_offsets"))
                   if not hasattr(KafkaAdminClient, method)}

    def __init__(self) -> None:
        super().__init__()
        self.producer: KafkaProducer | None = None
        self.consumer: KafkaConsumer | None = None
        self.admin: KafkaAdminClient | None = None
        # A rebalance under the EAGER protocol (RevocationListener): the partitions it revoked while
        # kafka-python still holds their positions, and of those, where `poll` dropped records
        # (the first offset it dropped) before the new assignment came.
        self.held: set[TopicPartition] = set()
        self.rewind: dict[TopicPartition, int] = {}
        self.held_lock = threading.Lock()

    def hello_data(self) -> dict[str, Any]:
        return {"client": "kafka-python", "library": "kafka-python", "library_version": kafka.__version__,
                "client_version": kafka.__version__}

    # -- errors ------------------------------------------------------------------------------------
    def _base_info(self, exc: BaseException) -> dict[str, Any]:
        errno = getattr(exc, "errno", None)
        if isinstance(exc, Errors.BrokerResponseError) and errno is not None and kafka_name(errno):
            name = kafka_name(errno)
        else:
            name = next((n for cls, n in LOCAL_CLASS_NAMES if isinstance(exc, cls)), "CLIENT_ERROR")
            if name == "CLIENT_ERROR" and "Invalid transition attempted" in str(exc):
                name = "ILLEGAL_STATE"
        return {"name": name, "code": kafka_code(name), "retriable": bool(getattr(exc, "retriable", False))}

    def normalise(self, exc: BaseException, op: str) -> dict[str, Any]:
        if isinstance(exc, (Errors.KafkaError, AssertionError, TypeError, ValueError)):
            cause = self._wrapped_cause(exc)
            info = self._base_info(cause or exc)
            info["retriable"] = bool(getattr(exc, "retriable", False))
            tm = getattr(self.producer, "_transaction_manager", None) if op in PRODUCER_OPS else None
            _await_error_state(tm)
            abortable = bool(tm and tm.has_abortable_error())
            fatal = bool(tm and tm.has_fatal_error())
            fenced = isinstance(cause or exc, Errors.ProducerFencedError) or info["name"] == "PRODUCER_FENCED"
            return {**info, "abortable": abortable, "fatal": fatal, "fenced": fenced,
                    "message": str(exc), "client_class": type(exc).__name__, "origin": "client",
                    **({"cause_class": type(cause).__name__} if cause is not None else {})}
        return OpError("DRIVER_ERROR", f"{type(exc).__name__}: {exc}", client_class=type(exc).__name__).info

    def _wrapped_cause(self, exc: BaseException) -> BaseException | None:
        """kafka-python wraps an earlier transactional failure in a bare KafkaError; find that failure."""
        if type(exc) is not Errors.KafkaError:
            return None
        for arg in exc.args[1:]:
            if isinstance(arg, BaseException):
                return arg
        if exc.__cause__ is not None:
            return exc.__cause__
        tm = getattr(self.producer, "_transaction_manager", None)
        if tm is not None and "error state" in str(exc) and tm.last_error is not None:
            return tm.last_error
        return None

    # -- lifecycle ---------------------------------------------------------------------------------
    def _kwargs(self, args: dict[str, Any], deadline: Deadline, consumer: bool = False) -> dict[str, Any]:
        kw = {**self.security.python_kwargs(),
              **(consumer_kwargs if consumer else python_kwargs)(args.get("config") or {})}
        # kafka-python's constructors block until they reach a broker (bootstrap_timeout_ms, 30 s by
        # default); unless the case set it, that wait gets the op's deadline like every other call.
        # (3.0+: an older release has no such setting and refuses it.)
        if "bootstrap_timeout_ms" in KafkaProducer.DEFAULT_CONFIG:
            kw.setdefault("bootstrap_timeout_ms", max(1, min(30_000, deadline.remaining_ms())))
        return kw

    def _client_kwargs(self, args: dict[str, Any], deadline: Deadline, consumer: bool = False) -> dict[str, Any]:
        """A producer's/consumer's kwargs; its bootstrap_servers becomes create_admin's default."""
        kw = self._kwargs(args, deadline, consumer)
        if kw.get("bootstrap_servers"):
            self.bootstrap = kw["bootstrap_servers"]
        return kw

    def op_create_producer(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        self._ensure_new("producer")
        self.producer = KafkaProducer(**self._client_kwargs(args, deadline))
        return {"client_id": self.producer.config.get("client_id")}

    def op_create_consumer(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        self._ensure_new("consumer")
        self.consumer = KafkaConsumer(**self._client_kwargs(args, deadline, consumer=True))
        self.auto_commit = enables_auto_commit(args.get("config"))
        return {"client_id": self.consumer.config.get("client_id")}

    def op_create_admin(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        kw = self._kwargs(args, deadline)
        if not kw.get("bootstrap_servers"):
            kw["bootstrap_servers"] = self._admin_bootstrap()
        self.admin = KafkaAdminClient(**kw)
        return {}

    def close_client(self, kind: str, client: Any, deadline: Deadline) -> None:
        if kind == "producer":
            client.close(timeout=deadline.remaining())
        elif kind == "consumer":
            client.close(autocommit=False, timeout_ms=deadline.remaining_ms())
        else:
            client.close()

    # -- transactions ------------------------------------------------------------------------------
    def op_init_transactions(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        self._producer().init_transactions()
        return {}

    def op_begin_transaction(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        self._producer().begin_transaction()
        return {}

    def op_commit_transaction(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        self._producer().commit_transaction()
        return {}

    def op_abort_transaction(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        self._producer().abort_transaction()
        return {}

    def op_send_offsets_to_transaction(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        producer = self._producer()
        if self.consumer is not None:
            metadata: Any = self.consumer.group_metadata()
        elif args.get("group_id"):
            metadata = args["group_id"]  # kafka-python accepts a bare group id (generation -1)
        else:
            raise OpError("ILLEGAL_STATE", "send_offsets_to_transaction needs a consumer or a group_id")
        producer.send_offsets_to_transaction(_offsets(args["offsets"]), metadata)
        return {}

    # -- produce -----------------------------------------------------------------------------------
    def op_send(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        producer = self._producer()
        headers = [(h[0], _payload(h[1])) for h in args["headers"]] if args.get("headers") is not None else None
        future = producer.send(args["topic"], value=_payload(args.get("value")), key=_payload(args.get("key")),
                               headers=headers, partition=args.get("partition"),
                               timestamp_ms=args.get("timestamp_ms"))
        if not args.get("wait", True):
            seq = self.deliveries.new()
            future.add_callback(lambda md: self.deliveries.complete(seq, self._metadata(md)))
            future.add_errback(lambda exc: self.deliveries.complete(
                seq, {"topic": args["topic"], "partition": args.get("partition"),
                      "error": self.normalise(exc, "send")}))
            return {"queued": True, "seq": seq}
        try:
            metadata = future.get(timeout=deadline.remaining())
        except Errors.KafkaTimeoutError:
            if not future.is_done:
                raise OpError("DEADLINE_EXCEEDED", "no delivery result before the deadline") from None
            raise
        return self._metadata(metadata)

    @staticmethod
    def _metadata(md: Any) -> dict[str, Any]:
        return {"topic": md.topic, "partition": md.partition, "offset": md.offset,
                "timestamp_ms": timestamp_or_none(md.timestamp)}

    def op_flush(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        try:
            self._producer().flush(timeout=deadline.remaining())
        except Errors.KafkaTimeoutError:
            pass  # judged below by what is still outstanding
        deliveries, outstanding = self.deliveries.take()
        if outstanding:
            raise OpError("DEADLINE_EXCEEDED", f"{outstanding} records undelivered at the deadline",
                          deliveries=deliveries, pending=outstanding)
        return {"deliveries": deliveries}

    # -- consume -----------------------------------------------------------------------------------
    def op_subscribe(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        consumer = self._consumer()
        # with enable.auto.commit poll drops nothing (BaseDriver.note_revoked): no listener
        listener = None if self.auto_commit else RevocationListener(self, consumer)
        consumer.subscribe(list(args["topics"]), listener=listener)
        return {}

    def drop_unsettled(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The op ends while an eager rebalance is still in progress (its poll's timeout ended
        during the JoinGroup/SyncGroup, which kafka-python finishes in the background): the held
        partitions may move to another member, so their records are not handed out; if they come
        back, the listener seeks them to the first record dropped (kafka-python keeps its
        position past them)."""
        with self.held_lock:
            gone = set()
            for r in records:
                tp = TopicPartition(r["topic"], r["partition"])
                if tp in self.held:
                    gone.add((tp.topic, tp.partition))
                    self.rewind[tp] = min(self.rewind.get(tp, r["offset"]), r["offset"])
        return without_partitions(records, gone)

    def op_assign(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        consumer = self._consumer()
        parts = [_tp(p) for p in args["partitions"]]
        consumer.assign(parts)
        for p in args["partitions"]:
            if p.get("offset") is not None:
                consumer.seek(_tp(p), int(p["offset"]))
        return {}

    def poll_once(self, consumer: Any, max_records: int, window: Deadline,
                  errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
        batch = consumer.poll(timeout_ms=min(int(POLL_STEP_S * 1000), window.remaining_ms()), max_records=max_records)
        return [record_row(r.topic, r.partition, r.offset, r.key, r.value, r.headers, timestamp_or_none(r.timestamp))
                for part_records in batch.values() for r in part_records]

    def op_commit(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        offsets = _offsets(args["offsets"]) if args.get("offsets") else None
        self._consumer().commit(offsets=offsets, timeout_ms=deadline.remaining_ms())
        return {}

    def op_committed(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        consumer = self._consumer()
        out = []
        for p in args["partitions"]:
            om = consumer.committed(_tp(p), metadata=True, timeout_ms=deadline.remaining_ms())
            out.append({"topic": p["topic"], "partition": int(p["partition"]),
                        "offset": None if om is None or om.offset < 0 else om.offset,
                        "metadata": None if om is None else om.metadata})
        return {"offsets": out}

    def op_position(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        consumer = self._consumer()
        parts = [_tp(p) for p in args["partitions"]] if args.get("partitions") else sorted(consumer.assignment())
        return {"positions": [{"topic": t.topic, "partition": t.partition,
                               "offset": consumer.position(t, timeout_ms=deadline.remaining_ms())} for t in parts]}

    # -- admin -------------------------------------------------------------------------------------
    def op_describe_transactions(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        admin = self._admin(deadline)
        out = []
        for txn_id in args["ids"]:
            # kafka-python raises for the whole call on a per-id error, so ask per id.
            try:
                d = admin.describe_transactions([txn_id])[txn_id]
            except Errors.KafkaError as exc:
                out.append({"transactional_id": txn_id, "error": self.normalise(exc, "describe_transactions")})
                continue
            out.append({
                "transactional_id": txn_id, "state": getattr(d.state, "value", str(d.state)),
                "producer_id": d.producer_id, "producer_epoch": d.producer_epoch,
                "timeout_ms": d.transaction_timeout_ms, "coordinator_id": d.coordinator_id,
                "partitions": sorted(({"topic": t.topic, "partition": t.partition} for t in d.topic_partitions),
                                     key=lambda r: (r["topic"], r["partition"])),
            })
        return {"transactions": out}

    def op_list_offsets(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        from kafka import IsolationLevel
        from kafka.admin import OffsetSpec
        spec = offset_spec(args, earliest=OffsetSpec.EARLIEST, latest=OffsetSpec.LATEST, at=int)
        level = IsolationLevel.READ_COMMITTED if read_committed(args) else IsolationLevel.READ_UNCOMMITTED
        result = self._admin(deadline).list_partition_offsets(
            {_tp(p): spec for p in args["partitions"]}, isolation_level=level, timeout_ms=deadline.remaining_ms())
        out = [{"topic": t.topic, "partition": t.partition, "offset": v.offset,
                "timestamp_ms": timestamp_or_none(v.timestamp)}
               for t, v in result.items()]
        out.sort(key=lambda r: (r["topic"], r["partition"]))
        return {"offsets": out}

    def op_create_topics(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        request = {t["name"]: {"num_partitions": int(t.get("partitions", 1)),
                               "replication_factor": int(t.get("replication_factor", 1)),
                               "configs": {k: str(v) for k, v in (t.get("config") or {}).items()}}
                   for t in args["topics"]}
        result = self._admin(deadline).create_topics(request, timeout_ms=deadline.remaining_ms(), raise_errors=False)
        out = []
        for topic in result["topics"]:
            code = topic.get("error_code", 0)
            if code:
                exc = Errors.for_code(code)(topic.get("error_message") or "")
                out.append({"name": topic["name"], "error": self.normalise(exc, "create_topics")})
            else:
                out.append({"name": topic["name"], "error": None})
        return {"topics": out}


def main() -> None:
    status = serve(KafkaPythonDriver())
    os._exit(status)


if __name__ == "__main__":
    main()
