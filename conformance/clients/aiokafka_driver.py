"""Driver for aiokafka (asyncio, its own protocol code): ``python -m conformance.clients.aiokafka_driver``.

Why a loop thread: aiokafka's objects belong to the asyncio loop they were created on, while the
driver protocol is one blocking request at a time with a deadline. The driver runs one loop in a
thread of its own; every op submits a coroutine to it and waits for the result, so BaseDriver's op
thread model still answers DEADLINE_EXCEEDED at the deadline while the coroutine carries on in the
loop (as a library call does in the other drivers). aiokafka takes a timeout only in ``getmany``;
the other calls are bounded by the deadline this way.

How aiokafka maps to the ops:

- ``init_transactions`` is ``AIOKafkaProducer.start()``: aiokafka has no initTransactions; start()
  bootstraps and its sender sends InitProducerId (retrying until it gets one) before returning.
  start() runs once per producer, so a second ``init_transactions`` is ILLEGAL_STATE (origin
  ``driver``: aiokafka does not guard it; a second start() would run a second sender task).
  Non-transactional producers start on their first ``send``.
- ``send_offsets_to_transaction`` is ``send_offsets_to_transaction(offsets, group_id)``: aiokafka
  has no consumer group metadata (no KIP-447), so TxnOffsetCommit carries the group id only
  (generation -1, no member id) -- the consumer's ``group.id``, or ``group_id`` without a consumer.
- Consumers start on the first op that needs a broker (subscribe, poll, commit, committed,
  position), so ``create_consumer`` and ``assign`` work without one, as in the other drivers; seeks
  made before the start are applied right after it.
- ``committed`` returns no metadata: aiokafka's ``committed()`` gives the offset only.
- ``list_offsets`` asks a group-less consumer of the requested isolation level (aiokafka's admin
  client has no ListOffsets; ``beginning_offsets``/``end_offsets``/``offsets_for_times`` do it).
- ``describe_transactions``: aiokafka's admin client has no DescribeTransactions.

Config: Java property names become aiokafka keyword arguments (``transactional.id`` ->
``transactional_id``); aiokafka's constructors reject an unknown one (TypeError, naming it). Two
keys have no aiokafka option of their name but one of their meaning: ``delivery.timeout.ms``
becomes ``request_timeout_ms``, which in aiokafka bounds each request and also, for a producer
without idempotence, a record's whole delivery (its batch expires after it; an idempotent or
transactional aiokafka producer retries a batch until it succeeds); when both are given the
delivery bound wins. ``retries`` is accepted when it is at least 1, because aiokafka retries a
failed produce until that bound and has no count (0 cannot be expressed and is refused).
``partition.assignment.strategy`` (Java's class names) becomes aiokafka's assignor classes of the
same protocol name -- range, roundrobin, sticky; aiokafka rebalances eagerly only, so Java's
CooperativeStickyAssignor is refused -- and ``group.instance.id`` is aiokafka's own
``group_instance_id`` (static membership: no LeaveGroup on stop).

Errors, aiokafka's own classification: ``retriable`` is the exception's ``retriable`` attribute;
``abortable``/``fatal`` are the producer's TransactionManager state right after the failure
(ABORTABLE_ERROR / FATAL_ERROR). aiokafka sets that state on its loop before the failed future's
awaiter resumes (the sender task fails, its done-callback fails the batches and then the
transaction), so the driver reads it once the op returned; it still waits, bounded
(ERROR_STATE_SETTLE_S), for an error state to appear after a failure that came from the broker, as
the Java and kafka-python drivers do. aiokafka wraps some broker errors in a bare ``KafkaError``
(``raise KafkaError(repr(err)) from err``); the innermost cause gives the name, ``cause_class`` says
so. ``fenced``: aiokafka's ProducerFenced (it raises that for INVALID_PRODUCER_EPOCH from
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from typing import Any, Awaitable

import aiokafka
import aiokafka.errors as Errors
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from aiokafka.producer.transaction_manager import TransactionState
from aiokafka.structs import OffsetAndMetadata

from conformance.clients.driver import (ASSIGNMENT_STRATEGY, LIBRARY_SLACK_S, POLL_STEP_S, PRODUCER_OPS,
                                        BaseDriver, Deadline, OpError, assignor_names, await_settled,
                                        enables_auto_commit, offset_spec, parse_config_value, python_kwargs,
                                        read_committed, record_row, serve, timestamp_or_none)
from conformance.clients.errors import kafka_code, kafka_name
from conformance.clients.protocol import decode_bytes as _payload

# aiokafka exception class -> normalised name, for errors that carry no Kafka code (``errno``).
LOCAL_CLASS_NAMES: list[tuple[type[BaseException], str]] = [
    (Errors.ProducerFenced, "PRODUCER_FENCED"),
    (Errors.KafkaTimeoutError, "REQUEST_TIMED_OUT"),
    (Errors.IllegalOperation, "ILLEGAL_STATE"),
    (Errors.IllegalStateError, "ILLEGAL_STATE"),
    (Errors.ConsumerStoppedError, "ILLEGAL_STATE"),
    (Errors.IllegalArgumentError, "INVALID_ARGUMENT"),
    (Errors.CommitFailedError, "COMMIT_FAILED"),
    (Errors.KafkaConnectionError, "NETWORK_EXCEPTION"),
    (Errors.NodeNotReadyError, "NETWORK_EXCEPTION"),
    (TypeError, "INVALID_ARGUMENT"),
    (ValueError, "INVALID_ARGUMENT"),
]

#: Errors aiokafka raises from its own state checks, before anything reaches the sender: no
#: transaction state change follows them, so the driver does not wait for one.
LOCAL_CHECKS = (Errors.IllegalOperation, Errors.IllegalStateError, AssertionError, TypeError, ValueError)

#: Java's protocol names -> aiokafka's assignors of that name. aiokafka rebalances eagerly only
#: (its coordinator revokes every partition before it rejoins: no KIP-429), so it has no
#: cooperative-sticky.
ASSIGNORS = {a.name: a for a in (RangePartitionAssignor, RoundRobinPartitionAssignor, StickyPartitionAssignor)}


def kwargs_from_config(config: dict[str, Any]) -> dict[str, Any]:
    """Java properties -> aiokafka keyword arguments (see the module docstring)."""
    config = dict(config or {})
    strategy = config.pop(ASSIGNMENT_STRATEGY, None)
    assignors = None if strategy is None else tuple(ASSIGNORS[n] for n in assignor_names(
        strategy, ASSIGNORS, f"aiokafka {aiokafka.__version__} rebalances eagerly only (no KIP-429 "
        "cooperative protocol) and has no assignor of that name"))
    retries = parse_config_value(config.pop("retries", 1))
    if not isinstance(retries, int) or retries < 1:
        raise OpError("INVALID_ARGUMENT", f"retries={retries!r}: aiokafka retries a produce until its "
                      "request_timeout_ms and cannot be told not to (retries >= 1 only)")
    if "delivery.timeout.ms" in config:
        # one aiokafka setting bounds both; the delivery bound is the one a send sees
        config["request.timeout.ms"] = config.pop("delivery.timeout.ms")
    kw = python_kwargs(config)
    if assignors is not None:
        kw["partition_assignment_strategy"] = assignors
    return kw


def _tp(d: dict[str, Any]) -> TopicPartition:
    return TopicPartition(d["topic"], int(d["partition"]))


def _offsets(rows: list[dict[str, Any]]) -> dict[TopicPartition, OffsetAndMetadata]:
    return {_tp(r): OffsetAndMetadata(int(r["offset"]), r.get("metadata") or "") for r in rows}


class RevocationListener(ConsumerRebalanceListener):
    """Tells ``poll`` which partitions a rebalance took (BaseDriver.op_poll). aiokafka calls it on its
    loop before it rejoins, with every partition (it rebalances eagerly, and a partition assigned
    back starts again at the committed offset)."""

    def __init__(self, driver: BaseDriver) -> None:
        self.driver = driver

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.driver.note_revoked(revoked)

    def on_partitions_assigned(self, assigned: Any) -> None:
        pass


class LoopThread:
    """One asyncio loop in a daemon thread; ``run`` executes a coroutine there within a deadline."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="aiokafka-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Awaitable[Any], deadline: Deadline) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)  # type: ignore[arg-type]
        try:
            return future.result(timeout=deadline.remaining() + LIBRARY_SLACK_S)
        except concurrent.futures.TimeoutError:
            raise OpError("DEADLINE_EXCEEDED", "the aiokafka call was still running at the deadline") from None

    def call(self, fn: Any, deadline: Deadline) -> Any:
        """Run a plain function on the loop (aiokafka objects are created and used there)."""
        async def wrapped() -> Any:
            return fn()
        return self.run(wrapped(), deadline)


class AiokafkaDriver(BaseDriver):
    client_name = "aiokafka"
    UNSUPPORTED = {"describe_transactions": f"aiokafka {aiokafka.__version__}'s admin client has no "
                                            "DescribeTransactions"}

    def __init__(self) -> None:
        super().__init__()
        self.aio = LoopThread()
        self.producer: AIOKafkaProducer | None = None
        self.consumer: AIOKafkaConsumer | None = None
        self.admin: AIOKafkaAdminClient | None = None
        self.producer_started = False
        self.consumer_started = False
        self.group_id: str | None = None
        #: seeks asked for before the consumer started (aiokafka's fetcher exists only after start)
        self.pending_seeks: dict[TopicPartition, int] = {}
        #: isolation level -> a started group-less consumer that answers list_offsets
        self.offset_readers: dict[str, AIOKafkaConsumer] = {}
        #: the running poll op's deadline (poll_once waits for getmany until it)
        self.poll_deadline: Deadline | None = None
        #: the partitions revoked before the last getmany's records were read (taken on the loop)
        self.revoked_before: set[tuple[str, int]] = set()

    def hello_data(self) -> dict[str, Any]:
        return {"client": "aiokafka", "library": "aiokafka", "library_version": aiokafka.__version__,
                "client_version": aiokafka.__version__}

    # -- errors ------------------------------------------------------------------------------------
    @staticmethod
    def _innermost(exc: BaseException) -> BaseException:
        """aiokafka wraps (``raise KafkaError(repr(err)) from err``): the innermost cause."""
        seen = 0
        while exc.__cause__ is not None and seen < 10:
            exc, seen = exc.__cause__, seen + 1
        return exc

    @staticmethod
    def _name(exc: BaseException) -> str:
        errno = getattr(exc, "errno", None)
        if isinstance(exc, Errors.BrokerResponseError) and errno is not None and kafka_name(errno):
            return kafka_name(errno)  # type: ignore[return-value]
        if isinstance(exc, AssertionError):
            # aiokafka asserts its transaction state transitions ("Invalid state transition") and
            # some arguments (a record with neither key nor value, an unknown partition)
            return "ILLEGAL_STATE" if "state transition" in str(exc) else "INVALID_ARGUMENT"
        return next((n for cls, n in LOCAL_CLASS_NAMES if isinstance(exc, cls)), "CLIENT_ERROR")

    def _txn_state(self, op: str, exc: BaseException, settle: bool) -> TransactionState | None:
        """The producer's TransactionManager state after a failed producer op (settled, bounded)."""
        tm = getattr(self.producer, "_txn_manager", None) if op in PRODUCER_OPS else None
        if tm is None or not tm.transactional_id:
            return None
        settled = (TransactionState.ABORTABLE_ERROR, TransactionState.FATAL_ERROR)
        if settle and not isinstance(exc, LOCAL_CHECKS):
            await_settled(lambda: tm.state in settled)
        return tm.state

    def normalise(self, exc: BaseException, op: str, settle: bool = True) -> dict[str, Any]:
        if isinstance(exc, concurrent.futures.CancelledError):
            return OpError("DRIVER_ERROR", f"{op}: the aiokafka call was cancelled").info
        known = (Errors.KafkaError, Errors.IllegalOperation, Errors.ConsumerStoppedError, AssertionError,
                 TypeError, ValueError)
        if not isinstance(exc, known):
            return OpError("DRIVER_ERROR", f"{type(exc).__name__}: {exc}", client_class=type(exc).__name__).info
        cause = self._innermost(exc)
        name = self._name(cause)
        state = self._txn_state(op, exc, settle)
        info = {"name": name, "code": kafka_code(name), "retriable": bool(getattr(exc, "retriable", False)),
                "abortable": state is TransactionState.ABORTABLE_ERROR,
                "fatal": state is TransactionState.FATAL_ERROR,
                "fenced": isinstance(cause, Errors.ProducerFenced) or name == "PRODUCER_FENCED",
                "message": str(exc), "client_class": type(exc).__name__, "origin": "client"}
        if cause is not exc:
            info["cause_class"] = type(cause).__name__
        if state is not None:
            info["txn_state"] = state.name
        return info

    # -- lifecycle ---------------------------------------------------------------------------------
    def _client_kwargs(self, args: dict[str, Any]) -> dict[str, Any]:
        kw = {**self.security.python_kwargs(), **kwargs_from_config(args.get("config") or {})}
        if kw.get("bootstrap_servers"):
            self.bootstrap = kw["bootstrap_servers"]
        return kw

    def op_create_producer(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        self._ensure_new("producer")
        kw = self._client_kwargs(args)
        self.producer = self.aio.call(lambda: AIOKafkaProducer(**kw), deadline)
        self.producer_started = False
        return {"client_id": self.producer.client._client_id}

    def op_create_consumer(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        self._ensure_new("consumer")
        kw = self._client_kwargs(args)
        self.consumer = self.aio.call(lambda: AIOKafkaConsumer(**kw), deadline)
        self.auto_commit = enables_auto_commit(args.get("config"))
        self.consumer_started = False
        self.group_id = kw.get("group_id")
        self.pending_seeks = {}
        return {"client_id": self.consumer._client._client_id}

    def op_create_admin(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        kw = {**self.security.python_kwargs(), **kwargs_from_config(args.get("config") or {})}
        if not kw.get("bootstrap_servers"):
            kw["bootstrap_servers"] = self._admin_bootstrap()
        admin = self.aio.call(lambda: AIOKafkaAdminClient(**kw), deadline)
        self.aio.run(admin.start(), deadline)
        self.admin = admin
        return {}

    def close_client(self, kind: str, client: Any, deadline: Deadline) -> None:
        if kind == "consumer":
            for reader in self.offset_readers.values():
                self.aio.run(reader.stop(), deadline)
            self.offset_readers = {}
        self.aio.run(client.close() if kind == "admin" else client.stop(), deadline)

    def _started_producer(self, deadline: Deadline) -> AIOKafkaProducer:
        producer = self._producer()
        if not self.producer_started:
            self.aio.run(producer.start(), deadline)
            self.producer_started = True
        return producer

    def _started_consumer(self, deadline: Deadline) -> AIOKafkaConsumer:
        consumer = self._consumer()
        if not self.consumer_started:
            self.aio.run(consumer.start(), deadline)
            self.consumer_started = True
            seeks, self.pending_seeks = self.pending_seeks, {}
            for tp, offset in seeks.items():
                self.aio.call(lambda tp=tp, offset=offset: consumer.seek(tp, offset), deadline)
        return consumer

    # -- transactions ------------------------------------------------------------------------------
    def op_init_transactions(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        if self._producer() is not None and self.producer_started:
            raise OpError("ILLEGAL_STATE", "aiokafka initialises the producer id in start(), which runs once "
                          "per producer; this producer has started")
        self._started_producer(deadline)
        return {}

    def op_begin_transaction(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        self.aio.run(self._started_producer(deadline).begin_transaction(), deadline)
        return {}

    def op_commit_transaction(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        self.aio.run(self._started_producer(deadline).commit_transaction(), deadline)
        return {}

    def op_abort_transaction(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        self.aio.run(self._started_producer(deadline).abort_transaction(), deadline)
        return {}

    def op_send_offsets_to_transaction(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        producer = self._started_producer(deadline)
        group_id = self.group_id if self.consumer is not None else args.get("group_id")
        if not group_id:
            raise OpError("ILLEGAL_STATE", "send_offsets_to_transaction needs a consumer with a group.id or a group_id")
        self.aio.run(producer.send_offsets_to_transaction(_offsets(args["offsets"]), group_id), deadline)
        return {"group_id": group_id}

    # -- produce -----------------------------------------------------------------------------------
    def op_send(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        headers = [(h[0], _payload(h[1])) for h in args["headers"]] if args.get("headers") is not None else None
        value, key = _payload(args.get("value")), _payload(args.get("key"))
        producer = self._started_producer(deadline)
        future = self.aio.run(producer.send(args["topic"], value=value, key=key, partition=args.get("partition"),
                                            timestamp_ms=args.get("timestamp_ms"), headers=headers), deadline)
        if not args.get("wait", True):
            seq = self.deliveries.new()
            topic = args["topic"]

            def delivered(fut: asyncio.Future) -> None:
                # runs on the loop, after aiokafka failed the batch (and moved its transaction state
                # in the same callback, if it does): the state is settled, no wait (it would block the loop)
                if fut.cancelled():
                    result = {"topic": topic, "error": OpError("CLIENT_ERROR", "the delivery was cancelled").info}
                elif fut.exception() is not None:
                    result = {"topic": topic, "partition": args.get("partition"),
                              "error": self.normalise(fut.exception(), "send", settle=False)}
                else:
                    result = self._metadata(fut.result())
                self.deliveries.complete(seq, result)

            self.aio.loop.call_soon_threadsafe(future.add_done_callback, delivered)
            return {"queued": True, "seq": seq}

        async def wait() -> Any:
            return await future
        return self._metadata(self.aio.run(wait(), deadline))

    @staticmethod
    def _metadata(md: Any) -> dict[str, Any]:
        return {"topic": md.topic, "partition": md.partition, "offset": md.offset,
                "timestamp_ms": timestamp_or_none(md.timestamp)}

    def op_flush(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        producer = self._producer()
        if self.producer_started:
            try:
                self.aio.run(producer.flush(), deadline)
            except OpError:
                pass  # judged below by what is still outstanding
        deliveries, outstanding = self.deliveries.take()
        if outstanding:
            raise OpError("DEADLINE_EXCEEDED", f"{outstanding} records undelivered at the deadline",
                          deliveries=deliveries, pending=outstanding)
        return {"deliveries": deliveries}

    # -- consume -----------------------------------------------------------------------------------
    def op_subscribe(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        consumer = self._started_consumer(deadline)
        listener = RevocationListener(self)
        self.aio.call(lambda: consumer.subscribe(list(args["topics"]), listener=listener), deadline)
        return {}

    def op_assign(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        consumer = self._consumer()
        parts = [_tp(p) for p in args["partitions"]]
        self.aio.call(lambda: consumer.assign(parts), deadline)
        for p in args["partitions"]:
            if p.get("offset") is None:
                continue
            if self.consumer_started:
                self.aio.call(lambda p=p: consumer.seek(_tp(p), int(p["offset"])), deadline)
            else:
                self.pending_seeks[_tp(p)] = int(p["offset"])
        return {}

    def op_poll(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        self._started_consumer(deadline)
        self.poll_deadline = deadline
        return super().op_poll(args, deadline)

    def poll_once(self, consumer: Any, max_records: int, window: Deadline,
                  errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
        wait_ms = min(int(POLL_STEP_S * 1000), window.remaining_ms())
        # getmany returns by itself after wait_ms; its answer is awaited until the op's deadline,
        # not the poll window's end: records it took from aiokafka's buffer and the driver stopped
        # waiting for would be lost -- their positions have moved on (measured on a loaded
        # machine: a getmany answering 0.8 s after its window lost a partition's records).
        # aiokafka rebalances in the background, on its loop: the revocations are taken there, as
        # getmany returns -- its records were read after those (getmany reads none while a
        # reassignment is in progress) and before any later one.
        async def getmany() -> tuple[dict[TopicPartition, list[Any]], set[tuple[str, int]]]:
            got = await consumer.getmany(timeout_ms=wait_ms, max_records=max_records)
            return got, self.take_revoked()

        batch, self.revoked_before = self.aio.run(getmany(), self.poll_deadline or window)
        return [record_row(r.topic, r.partition, r.offset, r.key, r.value, list(r.headers or ()),
                           timestamp_or_none(r.timestamp))
                for records in batch.values() for r in records]

    def revoked_before_batch(self) -> set[tuple[str, int]]:
        gone, self.revoked_before = self.revoked_before, set()
        return gone

    def op_commit(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        consumer = self._started_consumer(deadline)
        offsets = _offsets(args["offsets"]) if args.get("offsets") else None
        self.aio.run(consumer.commit(offsets), deadline)
        return {}

    def op_committed(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        consumer = self._started_consumer(deadline)
        out = []
        for p in args["partitions"]:
            offset = self.aio.run(consumer.committed(_tp(p)), deadline)
            out.append({"topic": p["topic"], "partition": int(p["partition"]),
                        "offset": None if offset is None or offset < 0 else offset, "metadata": None})
        return {"offsets": out}

    def op_position(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        consumer = self._started_consumer(deadline)
        if args.get("partitions"):
            parts = [_tp(p) for p in args["partitions"]]
        else:
            parts = sorted(self.aio.call(consumer.assignment, deadline))
        return {"positions": [{"topic": t.topic, "partition": t.partition,
                               "offset": self.aio.run(consumer.position(t), deadline)} for t in parts]}

    # -- admin -------------------------------------------------------------------------------------
    def _offset_reader(self, level: str, deadline: Deadline) -> AIOKafkaConsumer:
        reader = self.offset_readers.get(level)
        if reader is None:
            bootstrap = self._admin_bootstrap() if self.admin is None else self.admin._client._bootstrap_servers
            reader = self.aio.call(lambda: AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=level,
                                                            **self.security.python_kwargs(),
                                                            enable_auto_commit=False), deadline)
            self.aio.run(reader.start(), deadline)
            self.offset_readers[level] = reader
        return reader

    def op_list_offsets(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        level = "read_committed" if read_committed(args) else "read_uncommitted"
        reader = self._offset_reader(level, deadline)
        parts = [_tp(p) for p in args["partitions"]]
        how = offset_spec(args, earliest="earliest", latest="latest", at=lambda ts: ts)
        if how == "earliest":
            found = {tp: (o, None) for tp, o in self.aio.run(reader.beginning_offsets(parts), deadline).items()}
        elif how == "latest":
            found = {tp: (o, None) for tp, o in self.aio.run(reader.end_offsets(parts), deadline).items()}
        else:
            by_time = self.aio.run(reader.offsets_for_times({tp: how for tp in parts}), deadline)
            found = {tp: ((v.offset, v.timestamp) if v is not None else (-1, None)) for tp, v in by_time.items()}
        out = [{"topic": tp.topic, "partition": tp.partition, "offset": o, "timestamp_ms": timestamp_or_none(ts)}
               for tp, (o, ts) in found.items()]
        out.sort(key=lambda r: (r["topic"], r["partition"]))
        return {"offsets": out}

    def op_create_topics(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        admin = self._admin(deadline)
        new = [NewTopic(t["name"], int(t.get("partitions", 1)), int(t.get("replication_factor", 1)),
                        topic_configs={k: str(v) for k, v in (t.get("config") or {}).items()})
               for t in args["topics"]]
        response = self.aio.run(admin.create_topics(new, timeout_ms=max(1, deadline.remaining_ms())), deadline)
        out = []
        for row in response.topic_errors:
            name, code = row[0], row[1]
            message = row[2] if len(row) > 2 else None
            if code:
                exc = Errors.for_code(code)(message or "")
                out.append({"name": name, "error": self.normalise(exc, "create_topics")})
            else:
                out.append({"name": name, "error": None})
        return {"topics": out}


def main() -> None:
    status = serve(AiokafkaDriver())
    os._exit(status)


if __name__ == "__main__":
    main()
