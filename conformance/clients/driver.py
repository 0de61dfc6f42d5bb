"""Driver side of the protocol, shared by the Python drivers (confluent, kafka-python, aiokafka).

A driver is a process that owns at most one producer, one consumer and one admin client of one client
library, reads requests from stdin and answers each with one reply line (see ``protocol``). This module
holds what does not depend on the library: the serve loop, the deadline, the op-thread that guarantees an
answer even when a library call blocks without a timeout, and the bookkeeping for un-awaited sends.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, TextIO

from conformance.clients.errors import kafka_code
from conformance.security import Security
from conformance.clients.protocol import OPS, PROTOCOL_VERSION, encode_bytes

# How long past an op's deadline the serve loop waits for the library call before answering
# DEADLINE_EXCEEDED: library timeouts are not exact, and an answer that is a few ms late is still the
# library's answer.
LIBRARY_SLACK_S = 0.5


class OpError(Exception):
    """An error outcome decided by a driver (not raised by the library)."""

    def __init__(self, name: str, message: str, *, origin: str = "driver", **extra: Any) -> None:
        super().__init__(message)
        self.info = {
            "name": name, "code": kafka_code(name), "retriable": False, "abortable": False,
            "fatal": False, "fenced": False, "message": message, "client_class": "", "origin": origin,
            **extra,
        }


class ReportedError(Exception):
    """An error the library reported as data (a delivery report, a per-partition result), already
    normalised by the driver; it becomes the op's outcome unchanged."""

    def __init__(self, info: dict[str, Any]) -> None:
        super().__init__(info.get("message", ""))
        self.info = info


def unsupported(op: str, why: str) -> OpError:
    return OpError("UNSUPPORTED_BY_CLIENT", f"{op}: {why}")


class Deadline:
    """An op's time budget; every blocking library call gets ``remaining()`` at most."""

    def __init__(self, budget_ms: float) -> None:
        self.budget_ms = budget_ms
        self.end = time.monotonic() + budget_ms / 1000.0

    def remaining(self) -> float:
        """Seconds left, never negative."""
        return max(0.0, self.end - time.monotonic())

    def remaining_ms(self) -> int:
        return int(self.remaining() * 1000)

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.end


@dataclass
class Deliveries:
    """Delivery results of ``send`` with ``wait: false``, handed out by the next ``flush``."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    next_seq: int = 0
    outstanding: set[int] = field(default_factory=set)
    done: list[dict[str, Any]] = field(default_factory=list)

    def new(self) -> int:
        with self.lock:
            self.next_seq += 1
            self.outstanding.add(self.next_seq)
            return self.next_seq

    def complete(self, seq: int, result: dict[str, Any]) -> None:
        with self.lock:
            self.outstanding.discard(seq)
            self.done.append({"seq": seq, **result})

    def cancel(self, seq: int) -> None:
        """A send that failed before its record was queued: the send's own reply carries the error
        (and never handed out ``seq``), so no flush reports it."""
        with self.lock:
            self.outstanding.discard(seq)

    def take(self) -> tuple[list[dict[str, Any]], int]:
        """Completed results (sorted by seq) and how many are still outstanding."""
        with self.lock:
            done, self.done = sorted(self.done, key=lambda d: d["seq"]), []
            return done, len(self.outstanding)


# The longest single library poll inside ``op_poll``: short, so the window is kept to within this.
POLL_STEP_S = 0.2

#: The producer ops: after one of them fails, a driver reads its client's transaction state.
PRODUCER_OPS = frozenset({"init_transactions", "begin_transaction", "send", "flush",
                          "send_offsets_to_transaction", "commit_transaction", "abort_transaction"})
#: Bound on the wait for a client's transaction state to settle after a failed producer op.
ERROR_STATE_SETTLE_S = 1.0


def await_settled(settled: Callable[[], bool]) -> None:
    """Wait, at most ERROR_STATE_SETTLE_S, until ``settled()`` holds. Some clients fail an op's
    future before their transaction manager moves to its error state (the sender thread fails the
    batch, then sets the state), so a driver that reads the state at once reports the client's
    classification by chance; the Java and Python drivers read the settled one."""
    end = time.monotonic() + ERROR_STATE_SETTLE_S
    while not settled() and time.monotonic() < end:
        time.sleep(0.001)


def timestamp_or_none(ts: int | None) -> int | None:
    """A library timestamp as the protocol's ``timestamp_ms``: null where the library has none (-1)."""
    return ts if ts is not None and ts >= 0 else None


def record_row(topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None,
               headers: Any, timestamp_ms: int | None) -> dict[str, Any]:
    """One consumed record as ``poll`` answers it (payloads encoded, see ``protocol``)."""
    return {"topic": topic, "partition": partition, "offset": offset,
            "key": encode_bytes(key), "value": encode_bytes(value),
            "headers": [[k, encode_bytes(v)] for k, v in (headers or [])],
            "timestamp_ms": timestamp_ms}


def enables_auto_commit(config: dict[str, Any] | None) -> bool:
    """Whether a consumer of these (Java-named) properties commits on its own: enable.auto.commit,
    whose default is true in every client library."""
    return parse_config_value((config or {}).get("enable.auto.commit", True)) is True


def without_partitions(records: list[dict[str, Any]], gone: set[tuple[str, int]]) -> list[dict[str, Any]]:
    """The records (``record_row``) not of these (topic, partition), in their order."""
    if not gone:
        return records
    return [r for r in records if (r["topic"], r["partition"]) not in gone]


def offset_spec(args: dict[str, Any], *, earliest: Any, latest: Any, at: Callable[[int], Any]) -> Any:
    """list_offsets' ``spec`` (earliest|latest|timestamp with ``timestamp_ms``) as the library's value."""
    name = args.get("spec", "latest")
    if name == "earliest":
        return earliest
    if name == "latest":
        return latest
    if name == "timestamp":
        return at(int(args["timestamp_ms"]))
    raise OpError("INVALID_ARGUMENT", f"spec must be earliest|latest|timestamp, not {name!r}")


def read_committed(args: dict[str, Any]) -> bool:
    """Whether list_offsets asks at the read_committed isolation level (default read_uncommitted)."""
    return args.get("isolation_level", "read_uncommitted") == "read_committed"


def python_kwargs(config: dict[str, Any]) -> dict[str, Any]:
    """Java properties as a Python client's keyword arguments: ``transactional.id`` ->
    ``transactional_id``, values parsed (``parse_config_value``)."""
    return {key.replace(".", "_").replace("-", "_"): parse_config_value(value)
            for key, value in (config or {}).items()}


def parse_config_value(value: Any) -> Any:
    """JSON config values as a Java-properties user would mean them: "true" -> True, "5" -> 5."""
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("true", "false"):
            return low == "true"
        try:
            return int(value)
        except ValueError:
            return value
    return value


#: Java's built-in assignor classes -- the values ``partition.assignment.strategy`` takes -- and the
#: JoinGroup protocol name each one sends (its ``name()``). Members of different clients share a
#: group when they offer one protocol name; each driver maps a name onto its library's assignor of
#: that name or refuses it. Java loads the class named and accepts no short name ("range" is a
#: ClassNotFoundException); a class outside this table cannot be mapped onto another library.
JAVA_ASSIGNORS: dict[str, str] = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}
ASSIGNMENT_STRATEGY = "partition.assignment.strategy"


def assignor_names(value: Any, supported: Any = None, why: str = "") -> list[str]:
    """``partition.assignment.strategy`` as Java reads it -- a comma-separated list of class
    names, blanks around commas trimmed, an empty element refused, a repeated one dropped -- as
    the protocol names of JAVA_ASSIGNORS, in preference order. A class outside the table, a name
    not in ``supported`` (when given; ``why`` says what the library lacks) and an empty list
    (Java refuses it at subscribe) are INVALID_ARGUMENT naming the key and the value."""
    text = str(value).strip()
    items = [s.strip() for s in text.split(",")] if text else []

    def refuse(reason: str) -> OpError:
        return OpError("INVALID_ARGUMENT", f"{ASSIGNMENT_STRATEGY}={value!r}: {reason}",
                       key=ASSIGNMENT_STRATEGY, value=value)
    if not items:
        raise refuse("no assignor (Java fails subscribe with 'Must configure at least one partition assigner')")
    if "" in items:
        raise refuse("values must not be empty (Java's ConfigException)")
    names: list[str] = []
    for item in items:
        name = JAVA_ASSIGNORS.get(item)
        if name is None:
            raise refuse(f"{item!r} is not one of Java's assignor classes {sorted(JAVA_ASSIGNORS)}")
        if supported is not None and name not in supported:
            raise refuse(f"{item} (protocol {name!r}): {why}")
        if name not in names:
            names.append(name)
    return names


class BaseDriver:
    """One client library behind the protocol. Subclasses define ``op_<name>(args, deadline)``
    methods returning the reply's ``data`` and ``normalise(exc, op)`` returning the error dict."""

    client_name = "?"
    #: Ops of the definition (ops.yaml) this client library cannot do, with why: answered
    #: UNSUPPORTED_BY_CLIENT with that reason, and left out of hello's `ops`.
    UNSUPPORTED: dict[str, str] = {}

    #: The library objects a driver may hold, in the order ``close`` closes them.
    CLIENT_KINDS = ("producer", "consumer", "admin")

    def __init__(self) -> None:
        self.deliveries = Deliveries()
        self.producer: Any = None
        self.consumer: Any = None
        self.admin: Any = None
        #: bootstrap.servers of the producer/consumer: create_admin's default.
        self.bootstrap: str | None = None
        #: The run's security settings (conformance/security.py), from the environment: every
        #: library object the driver makes gets them, translated into the library's options.
        self.security = Security.from_env()
        #: Partitions (topic, partition) the group took from the consumer since ``poll`` last looked:
        #: a driver's rebalance listener adds them (``note_revoked``), ``poll`` takes them.
        self._revoked: set[tuple[str, int]] = set()
        self._revoked_lock = threading.Lock()
        #: The consumer commits on its own (enable.auto.commit, true unless said otherwise in every
        #: library): ``poll`` then drops nothing (``note_revoked``). Set by create_consumer.
        self.auto_commit = False

    # -- the library objects an op needs ------------------------------------------------------------
    def _admin(self, deadline: Deadline) -> Any:
        if self.admin is None:
            self.op_create_admin({}, deadline)  # type: ignore[attr-defined]
        return self.admin

    def _producer(self) -> Any:
        if self.producer is None:
            raise OpError("ILLEGAL_STATE", "no producer: call create_producer first")
        return self.producer

    def _consumer(self) -> Any:
        if self.consumer is None:
            raise OpError("ILLEGAL_STATE", "no consumer: call create_consumer first")
        return self.consumer

    def _ensure_new(self, kind: str) -> None:
        """A driver holds one producer and one consumer; a second one is a second driver process."""
        if getattr(self, kind) is not None:
            raise OpError("ILLEGAL_STATE", f"this driver already has a {kind}; start another driver")

    def _admin_bootstrap(self) -> str:
        """bootstrap.servers for an admin client whose config names none: the producer's/consumer's."""
        if not self.bootstrap:
            raise OpError("ILLEGAL_STATE", "create_admin needs config with bootstrap.servers")
        return self.bootstrap

    # -- to implement -------------------------------------------------------------------------------
    def hello_data(self) -> dict[str, Any]:
        raise NotImplementedError

    def normalise(self, exc: BaseException, op: str) -> dict[str, Any]:
        raise NotImplementedError

    def close_client(self, kind: str, client: Any, deadline: Deadline) -> None:
        """Close one library object (``kind`` is one of CLIENT_KINDS) within the deadline."""
        raise NotImplementedError

    def poll_once(self, consumer: Any, max_records: int, window: Deadline,
                  errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One library poll of at most ``max_records`` (see ``record_row``), waiting at most
        ``POLL_STEP_S`` of the window; non-fatal errors the library hands out as data go to ``errors``.
        Its records are of one generation: read after every revocation ``revoked_before_batch``
        gives."""
        raise NotImplementedError

    # -- rebalances inside poll ---------------------------------------------------------------------
    def note_revoked(self, parts: Any) -> None:
        """The driver's rebalance listener: the group took these partitions (objects with
        ``topic``/``partition``) from the consumer -- revoked or lost.

        Not with enable.auto.commit: the library commits the positions of what it handed out --
        the records ``poll`` gathered too -- as it rebalances (Java's, kafka-python's and
        aiokafka's onJoinPrepare, librdkafka's unassign, KafkaJS's rejoin) and every
        auto.commit.interval.ms, so their next owner starts after them and dropping them would lose
        them (measured: every such driver lost all it gathered, tests/integration/clients/
        test_poll_rebalance.py). Kept, they are read at least once, as auto-commit promises."""
        if self.auto_commit:
            return
        with self._revoked_lock:
            self._revoked.update((p.topic, int(p.partition)) for p in parts)

    def take_revoked(self) -> set[tuple[str, int]]:
        """The partitions noted revoked since the last take."""
        with self._revoked_lock:
            gone, self._revoked = self._revoked, set()
        return gone

    def drop_unsettled(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """As ``poll`` answers: its records without those of partitions a rebalance still in
        progress may yet take away (none by default: the rebalance listener tells revocations)."""
        return records

    def revoked_before_batch(self) -> set[tuple[str, int]]:
        """Right after ``poll_once``: the partitions revoked before its records were read. A library
        that rebalances only inside its poll call, on the op thread (librdkafka, kafka-python), has
        none revoked in between: everything noted so far. A driver whose library rebalances in the
        background takes the revoked set where the batch was read (aiokafka: on its loop)."""
        return self.take_revoked()

    # -- shared ops --------------------------------------------------------------------------------
    def implemented_ops(self) -> list[str]:
        """The ops of the definition this driver has a method for (hello's `ops`)."""
        return [op for op in OPS if op not in self.UNSUPPORTED and hasattr(self, f"op_{op}")]

    def op_hello(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        return {**self.hello_data(), "language": "python", "protocol": PROTOCOL_VERSION,
                "pid": os.getpid(), "ops": self.implemented_ops()}

    def op_close(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        which = args.get("which", "all")
        if args.get("timeout_ms") is not None:  # how long a close may wait (0: not at all)
            deadline = Deadline(max(0.0, min(float(args["timeout_ms"]), deadline.remaining_ms())))
        closed = []
        for kind in self.CLIENT_KINDS:
            client = getattr(self, kind)
            if which in (kind, "all") and client is not None:
                self.close_client(kind, client, deadline)
                setattr(self, kind, None)
                closed.append(kind)
        return {"closed": closed}

    def op_subscribe(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        self._consumer().subscribe(list(args["topics"]))
        return {}

    def op_poll(self, args: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
        """Poll until ``max_records`` came or ``timeout_ms`` (bounded by the deadline) is spent.

        The group may rebalance between two library polls. The records gathered before from the
        partitions it revoked (an eager rebalance revokes all, assigning some back from the
        committed offset) are the old generation's: their next owner, or this consumer, reads them
        again, and returning both would hand them out twice (a copier copies them twice). So they
        are dropped, as the Java driver drops them: what one ``poll`` returns is of one generation
        per partition, as one KafkaConsumer.poll() is. Nothing is lost: they were not committed (the
        new owner starts at the committed offset) -- unless the library auto-commits, which commits
        them, and then they are kept (``note_revoked``)."""
        consumer = self._consumer()
        max_records = int(args.get("max_records", 500))
        window = Deadline(min(float(args.get("timeout_ms", 1000)), deadline.remaining_ms()))
        records: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        self.take_revoked()  # what was revoked before this op took nothing it returns
        while len(records) < max_records and not window.expired:
            batch = self.poll_once(consumer, max_records - len(records), window, errors)
            gone = self.revoked_before_batch()
            if gone:
                records = without_partitions(records, gone)
            records += batch
        # a library that rebalances in the background may have revoked some after the last batch
        records = without_partitions(self.drop_unsettled(records), self.take_revoked())
        data: dict[str, Any] = {"records": records}
        if errors:
            data["errors"] = errors
        return data

    # -- dispatch ----------------------------------------------------------------------------------
    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """Run one request and build its reply. Never raises; never blocks past deadline + slack."""
        req_id = request.get("id")
        op = request.get("op")
        try:
            budget = float(request.get("deadline_ms", 30000))
        except (TypeError, ValueError):
            budget = 30000.0
        deadline = Deadline(budget)
        if op not in OPS:
            return error_reply(req_id, OpError("DRIVER_ERROR", f"unknown op {op!r}").info)
        method: Callable[[dict[str, Any], Deadline], dict[str, Any]] | None = getattr(self, f"op_{op}", None)
        if op in self.UNSUPPORTED or method is None:
            why = self.UNSUPPORTED.get(op, f"{self.client_name} has no such operation")
            return error_reply(req_id, unsupported(op, why).info)
        args = {k: v for k, v in request.items() if k not in ("id", "op", "deadline_ms")}
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["data"] = method(args, deadline)
            except (OpError, ReportedError) as exc:
                box["error"] = exc.info
            except BaseException as exc:  # noqa: BLE001 - every library failure becomes an outcome
                try:
                    box["error"] = self.normalise(exc, op)
                except BaseException as nexc:  # noqa: BLE001
                    box["error"] = OpError(
                        "DRIVER_ERROR", f"normalising {exc!r} failed: {nexc!r}",
                        traceback=traceback.format_exc()).info

        worker = threading.Thread(target=run, name=f"op-{op}-{req_id}", daemon=True)
        worker.start()
        worker.join(deadline.remaining() + LIBRARY_SLACK_S)
        if worker.is_alive():
            return error_reply(req_id, OpError(
                "DEADLINE_EXCEEDED",
                f"{op}: the library call was still running after {budget:.0f} ms").info)
        if "error" in box:
            return error_reply(req_id, box["error"])
        return {"id": req_id, "ok": True, "data": box.get("data") or {}}


def error_reply(req_id: Any, info: dict[str, Any]) -> dict[str, Any]:
    return {"id": req_id, "ok": False, "error": info}


def protect_stdout() -> TextIO:
    """Keep the real stdout for protocol replies and point fd 1 (and sys.stdout) at stderr, so that
    output from the client library (C or Python) can never interleave with a reply line."""
    proto_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(proto_fd, "w", encoding="utf-8", buffering=1)


def serve(driver: BaseDriver, stdin: TextIO | None = None, out: TextIO | None = None) -> int:
    """Answer requests until stdin closes. Returns the process exit status."""
    out = out or protect_stdout()
    stdin = stdin or sys.stdin
    for line in stdin:
        line = line.strip()
        if not line:
            continue
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise ValueError("request is not a JSON object")
        except ValueError as exc:
            reply = error_reply(None, OpError("DRIVER_ERROR", f"malformed request: {exc}").info)
        else:
            reply = driver.handle(request)
        out.write(json.dumps(reply, separators=(",", ":"), default=str) + "\n")
        out.flush()
    return 0
