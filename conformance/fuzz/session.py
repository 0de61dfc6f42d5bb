"""A real client's session with a target (confluent-kafka): the fuzzer's seeds and its last check.

Why a real client: the frames a broker must survive first are the ones real clients send, in the
order they send them -- ApiVersions, Metadata, FindCoordinator, the group dance, idempotent and
transactional Produce, Fetch at read_committed, offset commits. Run through the proxy, the session
leaves those frames in a transcript, which seeds the mutations; run once more at the end, straight
at the target, it tells whether the target still serves a client after the fuzzing.

Every wait is bounded by the session's deadline; a step that fails ends the session with the
reason (a target may lack transactions: the session then does what it can).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaException, Producer

from .. import security

#: librdkafka's complaints about a fuzzed or restarting broker belong in a log, not on stderr.
_log = logging.getLogger("kconform.fuzz.client")


@dataclass
class SessionResult:
    produced: int = 0
    consumed: int = 0
    transactions: bool = False
    error: str | None = None
    seconds: float = 0.0
    values: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None and self.consumed == self.produced > 0


def client_session(bootstrap: str, topic: str, tag: str, timeout: float = 60.0,
                   transactions: bool = True) -> SessionResult:
    """Produce (idempotent, then in a committed and an aborted transaction where the target has
    transactions), consume at read_committed in a group with a commit, and say what came back:
    `consumed` counts the committed records read, which must equal `produced`."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    out = SessionResult()
    base = {"bootstrap.servers": bootstrap, "logger": _log, "socket.timeout.ms": 10000,
            **security.current().librdkafka_config()}   # over SASL: the run's user (kconform fuzz --security)
    producing = {**base, "message.timeout.ms": int(timeout * 1000)}
    try:
        p = Producer({**producing, "enable.idempotence": True, "acks": "all", "linger.ms": 5})
        for i in range(20):
            p.produce(topic, key=f"k{i}", value=f"{tag}-i{i}")
            out.values.append(f"{tag}-i{i}")
        if p.flush(max(1.0, deadline - time.monotonic())):
            raise RuntimeError("idempotent records not acknowledged in time")
        out.produced = 20
        if transactions:
            tp = Producer({**producing, "transactional.id": f"{tag}-txn", "transaction.timeout.ms": 60000})
            tp.init_transactions(max(1.0, deadline - time.monotonic()))
            for committed in (True, False):
                tp.begin_transaction()
                for i in range(5):
                    tp.produce(topic, key=f"t{i}", value=f"{tag}-{'c' if committed else 'a'}{i}")
                if committed:
                    tp.commit_transaction(max(1.0, deadline - time.monotonic()))
                    out.values += [f"{tag}-c{i}" for i in range(5)]
                    out.produced += 5
                else:
                    tp.abort_transaction(max(1.0, deadline - time.monotonic()))
            out.transactions = True
        c = Consumer({**base, "group.id": f"{tag}-group", "auto.offset.reset": "earliest",
                      "isolation.level": "read_committed", "enable.auto.commit": False,
                      "session.timeout.ms": 10000})
        try:
            c.subscribe([topic])
            seen: list[str] = []
            while len(seen) < out.produced and time.monotonic() < deadline:
                for m in c.consume(100, 0.5):
                    if m.error() is None and m.value() is not None:
                        v = m.value().decode(errors="replace")
                        if v.startswith(f"{tag}-"):
                            seen.append(v)
            out.consumed = len(seen)
            if seen:
                c.commit(asynchronous=False)
            if sorted(seen) != sorted(out.values):
                out.error = f"read {len(seen)} committed records, expected {out.produced}"
        finally:
            c.close()
    except (KafkaException, RuntimeError) as exc:
        out.error = f"{type(exc).__name__}: {exc}"
    out.seconds = round(time.monotonic() - t0, 2)
    return out

