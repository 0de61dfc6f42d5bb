"""Fault rules: which frames to act on, and what to do to them.

A case describes a fault once, in target-neutral words; the proxy is how every target can
realise the frame-level ones. A rule is data, spelt the same in a case file (`fault: {proxy:
ACTION, ...}`), on the proxy's command line and in Python::

    {api: Produce, direction: response, nth: 1, action: sever, when: before}
    {api: EndTxn, direction: request, action: hold}          # until release(rule_id)
    {api: Fetch, direction: response, every: true, action: delay, delay_ms: 200}
    {api: Produce, direction: request, action: corrupt, mode: flip, offset: 0, length: 2}

Matching: ``api`` (name or key; omitted = any frame), ``direction`` (``request``, the default:
the frames a client sends; ``response``: the broker's answers), optionally ``node`` (the proxy node the frame
crosses), ``client_id`` (the request's client id; a response is matched on its request's) and
``from``: ``client`` or ``broker``, who sent the request, and ``source_node``: the broker that
sent it (the node id its inter-broker client id names; a case spells it by role, ``from:
coordinator, of: txn-1``, and the runner resolves it when the rule is added). Every rule counts the frames that
match it, 1-based; it acts on the ``nth`` one only, or, with ``every: true``, on the ``nth``
and each one after it.

Who is a broker: when every node advertises its proxy port, brokers reach each other through
the proxy too (``inter.broker.listener.name`` is the advertised PLAINTEXT listener). Kafka's
inter-broker NetworkClients carry these client ids (a 3-node Kafka 4.3.1 transcript, and the
strings in ReplicaFetcherManager, TransactionMarkerChannelManager and NetworkUtils):

* ``broker-<id>-fetcher-<n>``: the replica fetchers of broker <id> (Fetch, OffsetsForLeaderEpoch);
* ``broker-<id>-txn-marker-sender``: its TransactionMarkerChannelManager (WriteTxnMarkers);
* ``AddPartitionsManager-client-<id>``: its AddPartitionsToTxnManager (the AddPartitionsToTxn
  verification a partition leader sends the TransactionCoordinator, KIP-890).

A request whose client id matches :data:`INTER_BROKER_CLIENT_ID` is ``broker``; any other (a
missing client id included) is ``client``. The broker->controller channels use the CONTROLLER
listener, which the proxy does not front.

Actions:

* ``hold``   keep the frame (and, since a connection is a stream, every later frame in the
  same direction on that connection) until :meth:`ProxyServer.release`, until the rule is
  removed, or for ``delay_ms`` milliseconds if given;
* ``drop``   swallow the frame; a dropped request is never answered;
* ``delay``  forward it ``delay_ms`` milliseconds late;
* ``sever``  close both sides of the connection, ``when: before`` (the default: the frame is
  lost) or ``after`` forwarding it; ``reset: true`` closes with a TCP RST instead of a FIN;
* ``corrupt`` change bytes of the frame: ``mode: flip`` inverts every bit, ``mode: random``
  writes random bytes (``seed`` makes them repeatable), over ``length`` bytes (default: to the
  end) from ``offset`` (default 0, counted from the first byte after the size prefix, so
  offset 0 is the API key of a request and the correlation id of a response);
  ``size_prefix: keep`` (default) leaves the 4-byte size valid, ``huge`` makes it 2^31-1 and
  ``negative`` makes it -1;
* ``answer`` (requests only) swallow the request and answer it in the broker's place with a
  response carrying ``error`` (a Kafka error name or code), built by :mod:`.answer`: the
  top-level ErrorCode, or every partition of the request (Produce, TxnOffsetCommit,
  OffsetCommit, AddPartitionsToTxn v0-3); the broker never sees the request. Only requests the
  proxy can answer are selected (see :func:`.answer.can_answer`), so ``nth`` counts those;
* ``pass``   do nothing, only count and signal (for :meth:`ProxyServer.wait_for_match`).

One frame gets at most one action: the acting rule with the lowest id. The others that match
still count it and still signal their waiters, so their ``nth`` keeps its meaning.
"""

from __future__ import annotations

import itertools
import random
import re
import threading
import time
from dataclasses import dataclass, field, fields
from typing import Callable

from broker_impl.codec import API, API_BY_KEY, SIZE, FrameInfo, error_name

from .answer import AnswerError, answerable_versions, can_answer, error_code_of, synthesize_response

ACTIONS = ("hold", "drop", "delay", "sever", "corrupt", "answer", "pass")
#: A rule's direction, and the direction a frame crosses the proxy in (FrameInfo.direction).
DIRECTIONS = {"request": "c2b", "response": "b2c"}
#: Who sent the request a frame belongs to (``from``).
SOURCES = ("client", "broker")
#: Requests only brokers send each other on the listener the proxy fronts (a TransactionCoordinator's
#: WriteTxnMarkers); a rule on one of them acts on broker-to-broker traffic whatever its `from`.
INTER_BROKER_APIS = frozenset({27})
#: Client ids of Kafka's inter-broker NetworkClients (module doc).
INTER_BROKER_CLIENT_ID = re.compile(r"broker-(\d+)-\S|AddPartitionsManager-client-(\d+)$")
CORRUPT_MODES = ("flip", "random")
SIZE_PREFIXES = ("keep", "huge", "negative")
#: Matches kept per rule for wait_for_match / matches(); the count goes on beyond this.
MAX_KEPT_MATCHES = 1000


class RuleError(ValueError):
    """A rule that cannot be applied as written (unknown API, missing ms, ...)."""


@dataclass(frozen=True)
class Rule:
    action: str
    api: int | None = None        # API key; from_dict and the constructor accept a name too
    direction: str = "request"    # "request" / "response"
    nth: int = 1
    every: bool = False
    node: int | None = None
    client_id: str | None = None
    source: str | None = None     # ``from``: "client" / "broker", who sent the request (None: anyone)
    source_node: int | None = None  # the broker (node id) whose inter-broker client sent the request
    delay_ms: float | None = None
    when: str = "before"
    reset: bool = False
    mode: str = "flip"
    offset: int = 0
    length: int | None = None
    size_prefix: str = "keep"
    seed: int | None = None
    error: int | None = None      # answer: the top-level error code; a name is accepted too

    def __post_init__(self) -> None:
        if isinstance(self.api, str):
            object.__setattr__(self, "api", api_key_of(self.api))
        if self.error is not None:
            try:
                object.__setattr__(self, "error", error_code_of(self.error))
            except AnswerError as exc:
                raise RuleError(str(exc)) from None
        if self.action not in ACTIONS:
            raise RuleError(f"unknown action {self.action!r}; one of {', '.join(ACTIONS)}")
        if self.direction not in DIRECTIONS:
            raise RuleError(f"direction must be request or response, not {self.direction!r}")
        if self.source is not None and self.source not in SOURCES:
            raise RuleError(f"from (source) must be client or broker, not {self.source!r}")
        if self.source_node is not None and self.source == "client":
            raise RuleError("source_node names a broker: it cannot go with from: client")
        if self.api is not None and self.api not in API_BY_KEY:
            raise RuleError(f"unknown API key {self.api}")
        if not isinstance(self.nth, int) or self.nth < 1:
            raise RuleError(f"nth is 1-based, got {self.nth!r}")
        if self.action == "delay" and (self.delay_ms is None or self.delay_ms < 0):
            raise RuleError("delay needs delay_ms >= 0")
        if self.delay_ms is not None and self.delay_ms < 0:
            raise RuleError("delay_ms must be >= 0 (omit it to hold until released)")
        if self.when not in ("before", "after"):
            raise RuleError(f"sever when must be before or after, not {self.when!r}")
        if self.mode not in CORRUPT_MODES:
            raise RuleError(f"corrupt mode must be one of {CORRUPT_MODES}, not {self.mode!r}")
        if self.size_prefix not in SIZE_PREFIXES:
            raise RuleError(f"size_prefix must be one of {SIZE_PREFIXES}, not {self.size_prefix!r}")
        if self.offset < 0 or (self.length is not None and self.length < 0):
            raise RuleError("corrupt offset and length must be >= 0")
        if self.action == "answer":
            if self.error is None:
                raise RuleError("answer needs error (a Kafka error name or code)")
            if self.direction != "request":
                raise RuleError("answer acts on requests (direction request): it replaces the broker's response")
            if self.api is None or not answerable_versions(self.api):
                raise RuleError(f"answer needs an api whose response has a top-level ErrorCode or "
                                f"per-partition errors the proxy mirrors, "
                                f"not {API_BY_KEY[self.api].name if self.api is not None else 'any API'}")
        elif self.error is not None:
            raise RuleError("error is only for the answer action")

    @classmethod
    def from_dict(cls, d: dict) -> "Rule":
        """A rule from case data (``from`` is the field ``source``: a Python keyword cannot be
        a field name)."""
        d = dict(d)
        if "from" in d:
            d["source"] = d.pop("from")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise RuleError(f"unknown rule field(s) {unknown}; known: {sorted(known)}")
        if "action" not in d:
            raise RuleError("a rule needs an action")
        return cls(**d)

    def to_dict(self) -> dict:
        """The rule in its case-file spelling (``from`` for the source); defaults left out."""
        out = {"action": self.action, "api": API_BY_KEY[self.api].name if self.api is not None else None,
               "direction": self.direction, "nth": self.nth}
        defaults = Rule(action="pass")
        for f in fields(self):
            if f.name in out:
                continue
            v = getattr(self, f.name)
            if v != getattr(defaults, f.name):
                out["from" if f.name == "source" else f.name] = v
        if self.error is not None:
            out["error"] = error_name(self.error)
        return out

    def selects(self, node_id: int | None, info: FrameInfo) -> bool:
        """Does this frame count towards the rule (before nth/every)?"""
        if info.direction != DIRECTIONS[self.direction]:
            return False
        if self.api is not None and info.api_key != self.api:
            return False
        if self.api is None and info.api_name is None:
            return False  # frames we cannot name are never matched by an "any API" rule
        if self.node is not None and node_id != self.node:
            return False
        if self.client_id is not None and info.client_id != self.client_id:
            return False
        if self.source is not None and source_of(info.client_id) != self.source:
            return False
        if self.source_node is not None and broker_of(info.client_id) != self.source_node:
            return False
        if self.action == "answer" and not can_answer(info.api_key, info.api_version):
            return False  # a version whose response has no top-level ErrorCode
        return True

    def on_broker_traffic(self) -> bool:
        """Whether the rule can only act on what brokers send each other (module doc)."""
        return self.source == "broker" or self.source_node is not None or self.api in INTER_BROKER_APIS

    def acts_on(self, count: int) -> bool:
        return count >= self.nth if self.every else count == self.nth

    def answer_frame(self, info: FrameInfo, request: bytes | None = None) -> bytes:
        """The response this answer rule sends back for the request ``info`` (size prefix
        included); ``request``: its frame, mirrored where the errors are per partition."""
        return synthesize_response(info.api_key, info.api_version, info.correlation_id, self.error, request)

    def corrupt_frame(self, frame: bytes) -> bytes:
        """The frame as this corrupt rule sends it on (``frame`` includes the size prefix)."""
        buf = bytearray(frame)
        start = min(4 + self.offset, len(buf))
        end = len(buf) if self.length is None else min(start + self.length, len(buf))
        if self.mode == "flip":
            n = end - start
            flipped = int.from_bytes(buf[start:end], "big") ^ ((1 << (8 * n)) - 1)
            buf[start:end] = flipped.to_bytes(n, "big")
        else:
            rng = random.Random(self.seed)
            buf[start:end] = rng.randbytes(end - start)
        if self.size_prefix == "huge":
            buf[0:4] = SIZE.pack(0x7FFFFFFF)
        elif self.size_prefix == "negative":
            buf[0:4] = SIZE.pack(-1)
        return bytes(buf)


def source_of(client_id: str | None) -> str:
    """``broker`` for a request one of Kafka's inter-broker clients sent, else ``client``."""
    return "broker" if client_id and INTER_BROKER_CLIENT_ID.match(client_id) else "client"


def broker_of(client_id: str | None) -> int | None:
    """The node id of the broker whose inter-broker client sent a request, else None."""
    m = INTER_BROKER_CLIENT_ID.match(client_id) if client_id else None
    return int(m.group(1) or m.group(2)) if m else None


def api_key_of(name_or_key: str | int) -> int:
    if isinstance(name_or_key, int):
        return name_or_key
    s = str(name_or_key).strip()
    if s.lstrip("-").isdigit():
        return int(s)
    api = API.get(s)
    if api is None:
        # Accept Kafka's enum spelling too (END_TXN, end_txn, EndTxnRequest).
        want = s.replace("_", "").lower().removesuffix("request").removesuffix("response")
        for a in API.values():
            if a.name.lower() == want:
                return a.key
        raise RuleError(f"unknown API {name_or_key!r}")
    return api.key


@dataclass(frozen=True)
class Match:
    """A frame a rule selected; ``acted`` is False when it only counted it (wrong nth, or a
    lower-id rule acted on the frame)."""

    rule_id: int
    count: int
    acted: bool
    action: str
    node: int | None
    conn: int
    direction: str
    api_name: str | None
    api_version: int | None
    correlation_id: int | None
    t: float


@dataclass
class _RuleState:
    rule: Rule
    count: int = 0
    acted: int = 0
    matches: list[Match] = field(default_factory=list)
    holds: list = field(default_factory=list)  # Hold objects currently waiting
    removed: bool = False


class Hold:
    """A frame kept by a hold rule. ``release`` is called through the owning trio loop."""

    __slots__ = ("rule_id", "event", "released")

    def __init__(self, rule_id: int, event) -> None:
        self.rule_id = rule_id
        self.event = event  # a trio.Event, set only from the proxy's trio thread
        self.released = False


class RuleBook:
    """The live rule set, shared by the proxy's trio thread and the synchronous runner.

    One lock guards everything; the trio side holds it only for the few dict operations of a
    decision, so control calls from another thread never wait on network I/O.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._ids = itertools.count(1)
        self._rules: dict[int, _RuleState] = {}

    # ---------------------------------------------------------------- control side
    def add(self, rule: Rule | dict) -> int:
        if isinstance(rule, dict):
            rule = Rule.from_dict(rule)
        with self._cond:
            rid = next(self._ids)
            self._rules[rid] = _RuleState(rule)
            return rid

    def remove(self, rule_id: int) -> list[Hold]:
        """Stop the rule acting; returns the frames it still holds, for the caller to release."""
        with self._cond:
            st = self._state(rule_id)
            st.removed = True
            holds, st.holds = st.holds, []
            self._cond.notify_all()
            return holds

    def take_holds(self, rule_id: int) -> list[Hold]:
        with self._cond:
            st = self._state(rule_id)
            holds, st.holds = st.holds, []
            return holds

    def all_holds(self) -> list[Hold]:
        with self._cond:
            out = []
            for st in self._rules.values():
                out += st.holds
                st.holds = []
            return out

    def rule(self, rule_id: int) -> Rule:
        with self._cond:
            return self._state(rule_id).rule

    def active(self) -> dict[int, Rule]:
        with self._cond:
            return {rid: st.rule for rid, st in self._rules.items() if not st.removed}

    def counts(self, rule_id: int) -> tuple[int, int]:
        """(frames matched, frames acted on) so far."""
        with self._cond:
            st = self._state(rule_id)
            return st.count, st.acted

    def matches(self, rule_id: int) -> list[Match]:
        with self._cond:
            return list(self._state(rule_id).matches)

    def wait_for_match(self, rule_id: int, timeout: float, count: int = 1, acted: bool = False) -> Match | None:
        """Block until the rule has matched ``count`` frames (acted on them, with ``acted``).

        Returns that match, or None on timeout or when the rule is removed first.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            st = self._state(rule_id)
            while True:
                pool = [m for m in st.matches if m.acted] if acted else st.matches
                if len(pool) >= count:
                    return pool[count - 1]
                if st.removed:
                    return None
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)

    def _state(self, rule_id: int) -> _RuleState:
        st = self._rules.get(rule_id)
        if st is None:
            raise KeyError(f"no rule {rule_id}")
        return st

    # ---------------------------------------------------------------- proxy side
    def decide(self, node_id: int | None, conn: int, info: FrameInfo, t: float,
               make_event: Callable[[], object] | None = None) -> tuple[int, Rule, Hold | None] | None:
        """Count the frame for every rule that selects it; return the one acting rule, if any.

        For a ``hold``, the :class:`Hold` (its event made by ``make_event``) is registered in
        the same critical section that wakes the waiters, so a ``release`` issued as soon as
        :meth:`wait_for_match` returns always finds the frame.
        """
        acting: tuple[int, Rule, Hold | None] | None = None
        with self._cond:
            if not self._rules:
                return None
            signalled = False
            for rid, st in self._rules.items():
                if st.removed or not st.rule.selects(node_id, info):
                    continue
                st.count += 1
                acts = st.rule.acts_on(st.count) and acting is None
                if acts:
                    st.acted += 1
                    if st.rule.action == "hold":
                        h = Hold(rid, make_event() if make_event is not None else None)
                        st.holds.append(h)
                        acting = (rid, st.rule, h)
                    elif st.rule.action != "pass":
                        acting = (rid, st.rule, None)
                if len(st.matches) < MAX_KEPT_MATCHES:
                    st.matches.append(Match(rid, st.count, acts, st.rule.action, node_id, conn, info.direction,
                                            info.api_name, info.api_version, info.correlation_id, t))
                signalled = True
            if signalled:
                self._cond.notify_all()
        return acting

    def unhold(self, rule_id: int, h: Hold) -> None:
        with self._cond:
            st = self._rules.get(rule_id)
            if st is not None and h in st.holds:
                st.holds.remove(h)
