"""Error codes on the wire: counted per API, and held against what a healthy cluster may answer.

Why on the wire: clients retry retriable errors without telling the application (a Java producer
that met NOT_ENOUGH_REPLICAS twice and then succeeded reports success), so an application's
view hides a broker that answers errors it should not. The proxy sees every response; here each
error code in it is counted (`profile`), and those that cannot happen where and when they came
are anomalies (`unexpected`):

- NEVER: no broker answers a real client so (UNKNOWN_SERVER_ERROR is a broker's internal error,
  CORRUPT_MESSAGE a record batch it could not read, ...).
- QUIET: answers that mean "a node is gone, a leader or coordinator moved, a producer's state
  was lost, a request timed out" -- unexpected outside a fault window. Not INVALID_TXN_STATE:
  it answers what a client asked in the wrong state (librdkafka aborting while its own
  AddPartitionsToTxn races the previous commit's markers gets it from Kafka 4.3.1 too), which the
  checker judges by its consequences instead (a fault from its start
  until `GRACE_S` after it was undone) and, for the start-up answers in STARTUP, after the
  warm-up (topics and coordinators being created).

Only answers to clients count here; what brokers answer each other (replica fetches, markers)
is counted in the profile but never judged.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from broker_impl.codec import API

from .asked import Asked
from .batches import request_batches
from .checker import MAX_EVIDENCE, Anomaly
from .history import pairs

NEVER = frozenset({"UNKNOWN_SERVER_ERROR", "CORRUPT_MESSAGE", "INVALID_RECORD", "UNSUPPORTED_FOR_MESSAGE_FORMAT",
                   "INVALID_REQUIRED_ACKS", "RECORD_LIST_TOO_LARGE"})
QUIET = frozenset({
    "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "OUT_OF_ORDER_SEQUENCE_NUMBER",
    "DUPLICATE_SEQUENCE_NUMBER", "UNKNOWN_PRODUCER_ID", "INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED",
    "INVALID_PRODUCER_ID_MAPPING", "TRANSACTION_COORDINATOR_FENCED",
    "NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE", "FENCED_LEADER_EPOCH", "NOT_COORDINATOR",
    "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS", "REQUEST_TIMED_OUT", "NETWORK_EXCEPTION",
    "KAFKA_STORAGE_ERROR", "OFFSET_OUT_OF_RANGE", "UNKNOWN_TOPIC_OR_PARTITION",
})
#: Answers a cluster gives while its topics and coordinators are being created.
STARTUP = frozenset({"NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS",
                     "UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE", "NOT_LEADER_OR_FOLLOWER"})
#: Seconds after a fault was undone during which its consequences are still expected (a
#: restarted node catching up and rejoining the ISR, clients refreshing metadata).
GRACE_S = {"node": 12.0, "proxy": 4.0, "client": 4.0}
#: Seconds from a client's first request of an API during which that API's STARTUP answers are
#: expected (the first InitProducerId creates __transaction_state, the first JoinGroup
#: __consumer_offsets: both are loading for a while, longer on a loaded machine).
WARMUP_S = 15.0
PRODUCE_KEY = API["Produce"].key


@dataclass(frozen=True)
class Window:
    """A fault's window on the timeline (seconds of the history)."""

    kind: str       # node | proxy | client | timeout
    start: float
    end: float
    what: str
    #: The one client whose answers the window explains (None: every client's).
    client_id: str | None = None
    #: The codes the window explains (None: every QUIET one).
    codes: tuple[str, ...] | None = None

    def covers(self, t: float) -> bool:
        return self.start - 0.5 <= t <= self.end

    def explains(self, e: "WireError") -> bool:
        return (self.covers(e.t) and (self.client_id is None or self.client_id == e.client_id)
                and (self.codes is None or e.error in self.codes))


@dataclass(frozen=True)
class WireError:
    t: float
    api: str
    error: str
    source: str         # client | broker
    client_id: str | None
    node: int | None
    version: int | None
    #: Why the answer is what a healthy broker says in that situation (None: nothing explains it).
    explained: str | None = None


def wire_errors(lines: Iterable[dict], decode: Callable[[dict], dict | None]) -> list[WireError]:
    """Every non-zero error code in the responses of a transcript (its lines, in order; `decode`
    is proxy.transcript.decode_line). A Produce batch refused OUT_OF_ORDER_SEQUENCE_NUMBER
    because an earlier batch of the same producer, epoch and partition was refused first (its
    sequence never reached the log, so every later one is out of order until the client sends
    the first again) is `explained`: Kafka answers that cascade too (e.g. after
    CONCURRENT_TRANSACTIONS on the first batch of a TV2 transaction)."""
    out: list[WireError] = []
    sent: Asked[dict[str, list[tuple[int, int, int]]]] = Asked()
    refused: dict[tuple[int, int, str], list[int]] = defaultdict(list)
    for line in lines:
        if line.get("dir") == "c2b":
            if line.get("api_key") == PRODUCE_KEY:
                frame = decode(line)
                if frame is not None and frame["fields"] is not None:
                    sent.ask(line, _produce_batches(frame["fields"]))
            continue
        frame = decode(line)
        if frame is None or frame["fields"] is None or frame["direction"] != "response":
            continue
        meta = (frame.get("t") or 0.0, frame["api"], frame["from"], line.get("client_id"), line.get("node"),
                frame["version"])
        if frame["api"] == "Produce":
            batches = sent.answered(line, {}) or {}
            for tp, error in _produce_errors(frame["fields"]):
                if error == "NONE":
                    continue
                why = None
                for pid, epoch, seq in batches.get(tp, []):
                    if error == "OUT_OF_ORDER_SEQUENCE_NUMBER" and any(r < seq for r in refused[(pid, epoch, tp)]):
                        why = "an earlier batch of the same producer and epoch was refused first"
                    refused[(pid, epoch, tp)].append(seq)
                out.append(WireError(meta[0], meta[1], error, meta[2], meta[3], meta[4], meta[5], why))
            continue
        for name in _errors(frame["fields"]):
            out.append(WireError(*meta[:2], name, *meta[2:]))
    return out


def _produce_batches(fields: dict) -> dict[str, list[tuple[int, int, int]]]:
    """topic-partition -> [(producer id, epoch, base sequence)] of a Produce request."""
    out: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for b in request_batches(fields):
        out[b.partition].append((b.producer_id, b.epoch, b.base_sequence))
    return out


def _produce_errors(fields: dict) -> Iterable[tuple[str, str]]:
    for t in fields.get("responses") or []:
        for p in t.get("partition_responses") or []:
            yield f"{t.get('name')}-{p.get('index')}", p.get("error_code", "NONE")


def _errors(tree: Any) -> Iterable[str]:
    if isinstance(tree, dict):
        for k, v in tree.items():
            if k.endswith("error_code") and isinstance(v, str) and v != "NONE":
                yield v
            elif isinstance(v, (dict, list)):
                yield from _errors(v)
    elif isinstance(tree, list):
        for v in tree:
            yield from _errors(v)


def profile(errors: Iterable[WireError]) -> dict[str, dict[str, dict[str, int]]]:
    """{source: {api: {error: count}}}, sources `client` and `broker`."""
    out: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    for e in errors:
        out[e.source][e.api][e.error] += 1
    return {src: {api: dict(sorted(c.items())) for api, c in sorted(apis.items())} for src, apis in out.items()}


def client_profile(events: Iterable[dict]) -> dict[str, dict[str, int]]:
    """{op: {error: count}} of what the clients reported to the workers (history completions)."""
    out: dict[str, Counter] = defaultdict(Counter)
    for e in events:
        if e.get("type") in ("fail", "info") and isinstance(e.get("error"), dict):
            out[e["f"]][e["error"].get("name", "UNKNOWN")] += 1
    return {op: dict(sorted(c.items())) for op, c in sorted(out.items())}


@dataclass(frozen=True)
class _NodeFault:
    """One node fault of the nemesis and its undo, as the history has them."""

    role: str
    #: When the nemesis began it (a clean stop moves the node's leaderships away -- controlled
    #: shutdown -- before the stop completes).
    began: float
    #: When the node was away (the fault's completion).
    away: float
    #: When it was back (the undo's completion); None: never undone.
    back: float | None
    what: str
    #: The undo's action (restart, resume) and how long it took, invoke to ok.
    undo: str | None = None
    undo_s: float = 0.0


def _node_faults(events: Iterable[dict]) -> list[_NodeFault]:
    """Every node fault (crash, pause, stop) paired with its undo (restart, resume) by role; an
    undo with no fault before it is a fault of no length."""
    out: list[_NodeFault] = []
    away: dict[str, tuple[float, float]] = {}
    invoked: dict[int, float] = {}
    for e in events:
        if e.get("process") != "nemesis":
            continue
        if e["type"] == "invoke":
            invoked[e["index"]] = e["time"]
            continue
        v = e.get("value") or {}
        if e["type"] != "ok" or v.get("kind") != "node":
            continue
        role, t = v.get("role", "?"), e["time"]
        if v.get("action") in ("crash", "pause", "stop"):
            away.setdefault(role, (invoked.get(e.get("invoke"), t), t))
        else:
            began, gone = away.pop(role, (t, t))
            out.append(_NodeFault(role, began, gone, t, v.get("fault", ""), v.get("action"),
                                  t - invoked.get(e.get("invoke"), t)))
    out += [_NodeFault(role, began, gone, None, f"{role} (never undone)") for role, (began, gone) in away.items()]
    return out


def windows(events: Iterable[dict], end: float) -> list[Window]:
    """Fault windows from the nemesis's events in the history: a node fault from when it began
    until its undo (restart/resume), a proxy rule from when it was added until it was removed, a
    client fault until the worker's process may be back (`until`) -- each plus its grace."""
    events = list(events)
    out = [Window("node", f.began, (end if f.back is None else f.back) + GRACE_S["node"], f.what)
           for f in _node_faults(events)]
    open_rule: dict[int, tuple[float, str]] = {}
    for e in events:
        if e.get("process") != "nemesis" or e["type"] != "ok":
            continue
        v = e.get("value") or {}
        kind, t = v.get("kind"), e["time"]
        if kind == "proxy":
            if v.get("action") == "remove":
                start, what = open_rule.pop(v.get("rule"), (t, v.get("fault", "")))
                out.append(Window("proxy", start, t + GRACE_S["proxy"], what))
            else:
                open_rule[v.get("rule")] = (t, v.get("fault", ""))
        elif kind == "client":
            out.append(Window("client", t, (v.get("until") or t) + GRACE_S["client"], v.get("fault", "")))
        elif kind == "point":
            out.append(Window("node", t, (v.get("until") or end) + GRACE_S["node"], v.get("fault", "")))
    for start, what in open_rule.values():
        out.append(Window("proxy", start, end + GRACE_S["proxy"], what))
    return sorted(out, key=lambda w: w.start)


def node_downtime(events: Iterable[dict]) -> dict[str, float]:
    """How long the nemesis kept nodes away (crash, stop or pause until restart or resume, summed
    over nodes) and how long a restart took (the median of the restart operations, from invoke
    to ok: the node answering again). Error counts follow them: a Kafka node that takes 30-40 s
    to restart is away twice as long as an embedded one in the same schedule, and the cluster
    spends that much longer under min.insync.replicas (NOT_ENOUGH_REPLICAS) or without a
    coordinator (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS)."""
    undone = [f for f in _node_faults(events) if f.back is not None]
    restarts = sorted(f.undo_s for f in undone if f.undo == "restart" and f.back > f.away)
    return {"node_down_s": round(sum(f.back - f.away for f in undone), 1),
            "restart_s": round(restarts[len(restarts) // 2], 1) if restarts else 0.0}


#: What the proxy does to a frame that leaves its sender waiting for an answer that never comes.
STALLING = {"drop": "dropped", "hold": "held"}


def stall_windows(lines: Iterable[dict], decode: Callable[[dict], dict | None], end: float) -> list[Window]:
    """A broker that sent another a request (a follower's replica Fetch, a partition leader's
    transaction verification, the coordinator's markers) whose request or response the proxy
    dropped waits for its request timeout -- replica.socket.timeout.ms, request.timeout.ms: 30 s
    by default, on Kafka as here -- before it asks again: meanwhile a follower falls behind and
    acks=all appends wait for it (REQUEST_TIMED_OUT), verifications queue behind the lost one.
    So the rule's effect outlasts its own window: one `proxy` window per such frame, from it
    until that broker's next request to the same node (plus the proxy's grace), read from the
    transcript (measured: a follower's lost Fetch response stalled it 39 s, workloads/cluster
    seed 604)."""
    out: list[Window] = []
    stalled: dict[tuple[Any, Any], tuple[float, str]] = {}
    for line in lines:
        key = (line.get("client_id"), line.get("node"))
        t = float(line.get("t") or 0.0)
        if line.get("dir") == "c2b" and key in stalled and line.get("action") not in STALLING:
            since, what = stalled.pop(key)
            out.append(Window("proxy", since, t + GRACE_S["proxy"], what))
        if line.get("action") not in STALLING:
            continue
        frame = decode(line)
        if frame is None or frame["from"] != "broker":
            continue
        side = "request" if line.get("dir") == "c2b" else "response"
        stalled.setdefault(key, (t, f"{line.get('client_id')}'s {frame['api']} {side} to node {line.get('node')} "
                                    f"{STALLING[line['action']]} by the proxy: it waits for its request timeout"))
    out += [Window("proxy", since, end + GRACE_S["proxy"], what) for since, what in stalled.values()]
    return sorted(out, key=lambda w: w.start)


#: What a producer is answered once the TransactionCoordinator aborted its transaction for
#: outliving transaction.timeout.ms: the abort bumps the producer's epoch, so every request at
#: the old epoch is refused until the producer initialises again (measured on Apache Kafka
#: 4.3.1: aiokafka's abort stuck behind a dropped Produce response, then INVALID_PRODUCER_EPOCH).
TIMED_OUT = frozenset({"INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED"})


def timeout_windows(events: Iterable[dict], timeouts_s: dict[str, float], end: float) -> list[Window]:
    """One `timeout` window per transaction (`txn` operation) of a worker that stayed open
    longer than that worker's transaction.timeout.ms (``timeouts_s`` by worker name): from when
    the coordinator may have aborted it until the worker's next successful `init`, for that
    worker's client only and the TIMED_OUT codes only."""
    events = list(events)
    inits: dict[str, list[float]] = defaultdict(list)
    for e in events:
        if e["type"] == "ok" and e.get("f") == "init":
            inits[e["worker"]].append(e["time"])
    out: list[Window] = []
    for inv, done in pairs(events):
        if done is None or inv.get("f") != "txn" or inv["worker"] not in timeouts_s:
            continue
        limit = timeouts_s[inv["worker"]]
        if done["time"] - inv["time"] <= limit:
            continue
        start = inv["time"] + limit
        until = next((t for t in inits[inv["worker"]] if t > start), end)
        out.append(Window("timeout", start, until + GRACE_S["client"],
                          f"{inv['worker']}'s transaction open {done['time'] - inv['time']:.1f} s > "
                          f"transaction.timeout.ms {limit:.0f} s", client_id=inv["worker"],
                          codes=tuple(sorted(TIMED_OUT))))
    return out


#: Broker configs under which more answers are a healthy broker's: a producer whose state
#: expired (producer.id.expiration.ms) is answered UNKNOWN_PRODUCER_ID, and its batches in
#: flight OUT_OF_ORDER_SEQUENCE_NUMBER, at any time.
EXPECTED_BY_CONFIG = {"producer.id.expiration.ms": frozenset({"UNKNOWN_PRODUCER_ID", "OUT_OF_ORDER_SEQUENCE_NUMBER"})}


def unexpected(errors: Iterable[WireError], wins: list[Window],
               broker_configs: dict[str, str] | None = None) -> list[Anomaly]:
    """The `unexpected_error` anomaly (module doc): one Anomaly with every such answer counted."""
    allowed = frozenset().union(*(codes for key, codes in EXPECTED_BY_CONFIG.items() if key in (broker_configs or {})))
    found: list[dict] = []
    count = 0
    first_seen: dict[str, float] = {}
    for e in errors:
        if e.source != "client":
            continue
        first_seen.setdefault(e.api, e.t)
        why = None
        if e.error in NEVER:
            why = "never answered to a real client"
        elif (e.error in QUIET and e.error not in allowed and e.explained is None
              and not any(w.explains(e) for w in wins)):
            if e.error in STARTUP and e.t < first_seen[e.api] + WARMUP_S:
                continue
            why = "outside every fault window"
        if why is None:
            continue
        count += 1
        if len(found) < MAX_EVIDENCE:
            found.append({"what": f"{e.api} answered {e.error} to {e.client_id} at {e.t:.3f} s (node {e.node}): "
                                  f"{why}", "t": e.t, "api": e.api, "error": e.error, "version": e.version,
                          "client_id": e.client_id, "node": e.node})
    if not count:
        return []
    by_code = Counter(f"{x['api']} {x['error']}" for x in found)
    return [Anomaly("unexpected_error", f"{count} x a broker answered an error code that cannot happen there "
                                        f"outside a fault; first: {found[0]['what']}; codes: {dict(by_code)}",
                    found, found[0]["t"], count=count)]
