"""The driver protocol: how the runner talks to a Kafka client library living in another process.

Why processes: a conformance case must be able to crash an application (SIGKILL the driver) and to run
a zombie (a second driver with the same ``transactional.id``). Why one protocol: the runner must not
know which client it drives; the Java, librdkafka and kafka-python drivers all answer the same requests
with the same normalised outcome, so outcomes compare structurally.

Framing
    UTF-8 JSON, one object per line. The runner writes one request line to the driver's stdin and reads
    exactly one reply line from its stdout before sending the next request. Drivers write logs to
    stderr only (they move the library's stdout to stderr at start-up, so a stray print cannot corrupt
    the stream). A driver exits when its stdin closes.

Request
    ``{"id": 7, "op": "send", "deadline_ms": 10000, ...op arguments}``
    ``deadline_ms`` is the op's time budget in milliseconds, counted from when the driver reads the line.
    The driver passes what is left of it to every blocking library call; where a library call takes no
    timeout, the driver runs it on a worker thread and answers ``DEADLINE_EXCEEDED`` when the budget is
    spent. The runner waits ``deadline_ms`` plus a grace period, then SIGKILLs the driver and reports
    ``DRIVER_TIMEOUT`` (see ``process.ClientProcess``).

Reply
    ``{"id": 7, "ok": true, "data": {...}}`` or
    ``{"id": 7, "ok": false, "error": {"name": "PRODUCER_FENCED", "code": 90, "retriable": false,
    "abortable": false, "fatal": true, "fenced": true, "message": "...",
    "client_class": "ProducerFencedException", "origin": "client"}}``

    ``name``/``code`` are Kafka's (``errors.KAFKA_ERRORS``); client-specific spellings are mapped
    (librdkafka ``_FENCED`` -> PRODUCER_FENCED, ``_TIMED_OUT`` -> REQUEST_TIMED_OUT as Java's
    TimeoutException maps, kafka-python ``NOT_LEADER_FOR_PARTITION`` -> NOT_LEADER_OR_FOLLOWER). Outcomes
    with no Kafka code use the names in ``errors.LOCAL_NAMES`` with ``code`` null.
    ``retriable``/``abortable``/``fatal``/``fenced`` are the client's OWN classification, never
    recomputed from the name: librdkafka's ``retriable()``/``txn_requires_abort()``/``fatal()``;
    Java's exception type (RetriableException, TransactionAbortableException,
    ApplicationRecoverableException, ProducerFencedException) together with its TransactionManager's
    error state; kafka-python's exception ``retriable`` and its transaction manager's abortable/fatal
    state. ``client_class`` keeps the client's own name for the error (``KafkaError._FENCED``,
    ``ProducerFencedException``, ``ProducerFencedError``); ``cause_class`` the wrapped cause where the
    client wraps. ``origin`` is ``client`` (the library raised), ``driver`` (the driver decided:
    UNSUPPORTED_BY_CLIENT, DEADLINE_EXCEEDED, DRIVER_ERROR) or ``runner`` (DRIVER_TIMEOUT, DRIVER_DIED).

Payloads
    Keys, values and header values are ``null``, a JSON string (the UTF-8 bytes), or
    ``{"base64": "..."}`` for bytes that are not valid UTF-8. Headers are a list of ``[name, value]``
    pairs (order kept, names may repeat). Partitions are ``{"topic": t, "partition": p}``; offsets
    ``{"topic": t, "partition": p, "offset": o}`` (``metadata`` optional).

Operations
    Defined once, as data: ``ops.yaml`` beside this module (arguments, what ``data`` holds, whether a
    case step may name the op, whether every driver must implement it). ``OPS`` below is that file;
    a driver's ``hello`` lists the ops it implements, and an op a client library cannot do is
    answered ``UNSUPPORTED_BY_CLIENT``.
"""

from __future__ import annotations

import base64
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

PROTOCOL_VERSION = 1
OPS_FILE = Path(__file__).with_name("ops.yaml")


@dataclass(frozen=True)
class OpSpec:
    """One operation of the driver protocol, as ops.yaml defines it."""

    name: str
    args: dict[str, dict[str, Any]]
    returns: str
    step: bool
    required: bool

    @property
    def arg_names(self) -> frozenset[str]:
        return frozenset(self.args)


def load_ops(path: Path = OPS_FILE) -> dict[str, OpSpec]:
    with open(path, encoding="utf-8") as fh:
        raw = yaml.safe_load(fh)
    return {name: OpSpec(name, dict(spec.get("args") or {}), str(spec["returns"]), bool(spec["step"]),
                         bool(spec["required"]))
            for name, spec in raw.items()}


#: op name -> its definition (ops.yaml).
OPS: dict[str, OpSpec] = load_ops()


def encode_bytes(raw: bytes | None) -> Any:
    """Bytes -> protocol payload: a str when the bytes are UTF-8, else ``{"base64": ...}``."""
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(raw).decode("ascii")}


def decode_bytes(payload: Any) -> bytes | None:
    """Protocol payload -> bytes (inverse of ``encode_bytes``)."""
    if payload is None:
        return None
    if isinstance(payload, str):
        return payload.encode("utf-8")
    if isinstance(payload, dict) and set(payload) == {"base64"}:
        return base64.b64decode(payload["base64"])
    raise ValueError(f"payload must be null, a string or {{'base64': ...}}, got {payload!r}")


@dataclass(frozen=True)
class ErrorInfo:
    """A normalised error: Kafka's name and code plus the client's own classification of it."""

    name: str
    code: int | None = None
    retriable: bool = False
    abortable: bool = False
    fatal: bool = False
    fenced: bool = False
    message: str = ""
    client_class: str = ""
    origin: str = "client"
    cause_class: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ErrorInfo":
        known = {f for f in cls.__dataclass_fields__ if f != "extra"}
        return cls(
            **{k: d[k] for k in known if k in d},
            extra={k: v for k, v in d.items() if k not in known},
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        extra = d.pop("extra")
        if d["cause_class"] is None:
            del d["cause_class"]
        d.update(extra)
        return d


@dataclass(frozen=True)
class Outcome:
    """What one op returned, as the runner records it."""

    op: str
    ok: bool
    data: dict[str, Any] = field(default_factory=dict)
    error: ErrorInfo | None = None
    elapsed_ms: float = 0.0

    @property
    def error_name(self) -> str | None:
        return self.error.name if self.error else None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"op": self.op, "ok": self.ok, "elapsed_ms": round(self.elapsed_ms, 3)}
        if self.ok:
            d["data"] = self.data
        else:
            d["error"] = self.error.to_dict() if self.error else None
        return d

    @classmethod
    def failure(cls, op: str, name: str, message: str, *, origin: str = "runner",
                elapsed_ms: float = 0.0, **extra: Any) -> "Outcome":
        """An outcome made on the runner side (timeouts, dead drivers), never by a client."""
        return cls(op=op, ok=False, elapsed_ms=elapsed_ms,
                   error=ErrorInfo(name=name, message=message, origin=origin, client_class="",
                                   extra=extra))


def encode_request(req_id: int, op: str, deadline_ms: int, args: dict[str, Any]) -> bytes:
    """One request line. Raises ValueError for an unknown op or a clashing argument name."""
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}; known: {sorted(OPS)}")
    clash = {"id", "op", "deadline_ms"} & set(args)
    if clash:
        raise ValueError(f"argument names reserved by the protocol: {sorted(clash)}")
    msg = {"id": req_id, "op": op, "deadline_ms": int(deadline_ms), **args}
    return (json.dumps(msg, separators=(",", ":")) + "\n").encode("utf-8")


def decode_reply(line: bytes | str, op: str, elapsed_ms: float) -> tuple[int | None, Outcome]:
    """Parse one reply line into (id, Outcome). A malformed line becomes a DRIVER_ERROR outcome."""
    try:
        msg = json.loads(line)
        if not isinstance(msg, dict) or not isinstance(msg.get("ok"), bool):
            raise ValueError("reply is not an object with a boolean 'ok'")
    except ValueError as exc:
        text = line if isinstance(line, str) else line.decode("utf-8", "replace")
        return None, Outcome.failure(op, "DRIVER_ERROR", f"malformed reply {text[:200]!r}: {exc}",
                                     origin="runner", elapsed_ms=elapsed_ms)
    if msg["ok"]:
        return msg.get("id"), Outcome(op=op, ok=True, data=msg.get("data") or {}, elapsed_ms=elapsed_ms)
    err = msg.get("error") or {}
    if "name" not in err:
        err = {"name": "DRIVER_ERROR", "message": f"error reply without a name: {err!r}", "origin": "runner"}
    return msg.get("id"), Outcome(op=op, ok=False, error=ErrorInfo.from_dict(err), elapsed_ms=elapsed_ms)
