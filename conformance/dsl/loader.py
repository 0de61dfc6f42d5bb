"""Load and validate case files (cases/**/*.yaml) into `model.Case` objects.

Why strict validation at load time: a typo in a case (`isolaton:`, an op name a driver does not
know, a check on a topic that does not exist) would otherwise show up minutes later as a
confusing failure on one target only. Every error names the FILE, the FIELD path inside it and
WHAT WAS EXPECTED, e.g.

    cases/txn/zombie.yaml: steps[3].expect.error: expected an error name such as
    PRODUCER_FENCED (Kafka's Errors enum), got 'FENCED'
"""
from __future__ import annotations

import dataclasses
import fnmatch
import re
from pathlib import Path
from typing import Any, Iterable

import yaml

from broker_impl.codec import API

from ..clients.errors import KAFKA_ERRORS, LOCAL_NAMES
from ..clients.registry import CLIENTS
from ..proxy.answer import answerable_versions
from ..proxy.rules import DIRECTIONS, SOURCES, Rule, RuleError, api_key_of
from ..raw import RequestError, build_request
from ..refs import OPERATORS, describe_comparison, is_comparison, refs_in
from ..targets import TARGETS, target_class
from ..vocabulary import (CAPABILITIES, CONTROLLER_PLACEMENTS, NODE_ACTIONS, NODE_ROLES, POINT_ONLY_ACTIONS,
                          PROTOCOL_POINTS, TRIGGERED_ACTIONS)
from . import model as m
from .workload import parse_workload
from .workload_gen import default_topics, generate

CASES_ROOT = Path(__file__).resolve().parents[2] / "cases"
KAFKA_ERROR_NAMES = frozenset(name for name, _ in KAFKA_ERRORS.values())
ERROR_NAMES = KAFKA_ERROR_NAMES | frozenset(LOCAL_NAMES)
ISOLATION = ("read_committed", "read_uncommitted")
#: The fields of a proxy fault besides `proxy: ACTION`: the proxy Rule's, `source` spelt `from`.
PROXY_FIELDS = frozenset({"from" if f == "source" else f for f in Rule.__dataclass_fields__}
                         - {"action", "source_node"} | {"of"})
#: `from:` a broker by role, with `of` (`node` is the proxy node a frame crosses, so not "node").
PROXY_SENDER_ROLES = ("coordinator", "group_coordinator", "leader", "follower")


CHECKS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    # kind: (required params, optional params)
    "records": (frozenset({"isolation", "topic"}),
                frozenset({"partition", "values", "keys", "count", "name"})),
    "no_duplicates": (frozenset({"isolation"}), frozenset({"topic", "topics", "name"})),
    "same_records": (frozenset({"isolation", "from", "to"}), frozenset({"order", "name"})),
    "offsets": (frozenset({"topic"}),
                frozenset({"partition", "high_watermark", "last_stable", "open", "name"})),
    "group_offset": (frozenset({"group", "topic"}), frozenset({"partition", "offset", "name"})),
    "step": (frozenset({"step"}), frozenset({"expect", "name"})),
    # What crossed the wire (the proxy's transcript of the row): frames matching `frame`
    # (`count`: a number or a comparison), or `sequence`: frames in that order.
    "transcript": (frozenset(), frozenset({"frame", "count", "sequence", "name"})),
}
#: A frame pattern of a transcript check.
FRAME_KEYS = frozenset({"api", "direction", "from", "version", "fields"})
#: The largest `repeat:` bound (a loop is for counts a case cannot spell out, not for soaks).
MAX_REPEAT = 100_000


class CaseError(ValueError):
    """A case file is invalid. str() is `FILE: FIELD: expected WHAT, got VALUE`."""

    def __init__(self, file: str, field: str, expected: str, got: Any = ...) -> None:
        self.file, self.field, self.expected = file, field, expected
        got_text = "" if got is ... else f", got {got!r}"
        super().__init__(f"{file}: {field or '(top level)'}: expected {expected}{got_text}")


class _V:
    """Validation helpers bound to one file; each takes the value and its field path."""

    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, path: str, expected: str, got: Any = ...) -> None:
        raise CaseError(self.file, path, expected, got)

    def mapping(self, v: Any, path: str, allowed: Iterable[str] | None = None,
                required: Iterable[str] = ()) -> dict:
        if not isinstance(v, dict):
            self.fail(path, "a mapping", v)
        for k in v:
            if not isinstance(k, str):
                self.fail(path, "string keys", k)
        if allowed is not None:
            allowed = set(allowed)
            for k in v:
                if k not in allowed:
                    self.fail(_join(path, k), f"one of the fields {sorted(allowed)}", k)
        for k in required:
            if k not in v:
                self.fail(_join(path, k), "this field (it is required)")
        return v

    def string(self, v: Any, path: str, choices: Iterable[str] | None = None) -> str:
        if not isinstance(v, str) or not v:
            self.fail(path, "a non-empty string" + (f", one of {list(choices)}" if choices else ""), v)
        if choices is not None and v not in choices:
            self.fail(path, f"one of {list(choices)}", v)
        return v

    def integer(self, v: Any, path: str, minimum: int | None = None) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            self.fail(path, "an integer", v)
        if minimum is not None and v < minimum:
            self.fail(path, f"an integer >= {minimum}", v)
        return v

    def boolean(self, v: Any, path: str) -> bool:
        if not isinstance(v, bool):
            self.fail(path, "true or false", v)
        return v

    def strings(self, v: Any, path: str) -> tuple[str, ...]:
        if isinstance(v, str):
            return (v,)
        if not isinstance(v, list):
            self.fail(path, "a string or a list of strings", v)
        return tuple(self.string(x, f"{path}[{i}]") for i, x in enumerate(v))

    def config_map(self, v: Any, path: str) -> dict[str, str]:
        """Kafka config maps: names to scalar values, kept as text (Kafka's own form)."""
        v = self.mapping(v, path)
        out = {}
        for k, x in v.items():
            if isinstance(x, bool):
                out[k] = "true" if x else "false"
            elif isinstance(x, (int, float, str)):
                out[k] = str(x)
            else:
                self.fail(_join(path, k), "a scalar config value (string, number or boolean)", x)
        return out

    def error_name(self, v: Any, path: str) -> str:
        if not isinstance(v, str) or v not in ERROR_NAMES:
            self.fail(path, "an error name such as PRODUCER_FENCED (Kafka's Errors enum, or one of "
                            f"{sorted(LOCAL_NAMES)})", v)
        return v


def _join(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


# ----------------------------------------------------------------------------- sections
def _topology(v: _V, raw: Any) -> m.TopologyDef:
    if raw is None:
        return m.TopologyDef()
    raw = v.mapping(raw, "topology", {"nodes", "topics", "broker_configs", "controller", "exclusive"})
    nodes = v.integer(raw.get("nodes", 1), "topology.nodes", 1)
    exclusive = v.boolean(raw.get("exclusive", False), "topology.exclusive")
    controller = v.string(raw.get("controller", "combined"), "topology.controller", CONTROLLER_PLACEMENTS)
    topics = []
    seen = set()
    for i, t in enumerate(raw.get("topics") or []):
        p = f"topology.topics[{i}]"
        if isinstance(t, str):
            t = {"name": t}
        t = v.mapping(t, p, {"name", "partitions", "replication_factor", "configs"}, {"name"})
        name = v.string(t["name"], f"{p}.name")
        if name in seen:
            v.fail(f"{p}.name", "a topic name not used twice", name)
        seen.add(name)
        rf = t.get("replication_factor")
        topics.append(m.TopicSpec(
            name=name,
            partitions=v.integer(t.get("partitions", 1), f"{p}.partitions", 1),
            replication_factor=None if rf is None else v.integer(rf, f"{p}.replication_factor", 1),
            configs=v.config_map(t.get("configs") or {}, f"{p}.configs"),
        ))
    configs = v.config_map(raw.get("broker_configs") or {}, "topology.broker_configs")
    for k in configs:
        if k.startswith("kconform.fault"):
            v.fail(f"topology.broker_configs.{k}",
                   "no fault-point config: describe faults as `fault:` steps (the runner arms them)")
    return m.TopologyDef(nodes=nodes, topics=tuple(topics), broker_configs=configs, controller=controller,
                          exclusive=exclusive)


def _actors(v: _V, raw: Any, topics: set[str]) -> dict[str, m.ActorDef]:
    raw = v.mapping(raw or {}, "actors")
    out = {}
    for name, a in raw.items():
        p = f"actors.{name}"
        if name in ("raw",):
            v.fail(p, "an actor name other than 'raw' (reserved for the raw-socket actor)", name)
        a = v.mapping(a, p, {"role", "client", "config", "inputs", "assign"}, {"role"})
        role = v.string(a["role"], f"{p}.role", m.ACTOR_ROLES)
        client = a.get("client")
        if client is not None:
            v.string(client, f"{p}.client", CLIENTS)
        inputs = v.strings(a.get("inputs") or [], f"{p}.inputs")
        for i, t in enumerate(inputs):
            if t not in topics:
                v.fail(f"{p}.inputs[{i}]", f"a topic of topology.topics {sorted(topics)}", t)
        if inputs and role != "copier" and role != "consumer":
            v.fail(f"{p}.inputs", "inputs only on consumer or copier actors")
        out[name] = m.ActorDef(
            name=name, role=role, client=client,
            config=v.config_map(a.get("config") or {}, f"{p}.config"),
            inputs=inputs, assign=v.boolean(a.get("assign", False), f"{p}.assign"),
        )
    return out


EXPECT_KEYS = frozenset({"ok", "error", "data", "message", "message_regex", *m.FLAG_NAMES})


def _expect(v: _V, raw: Any, path: str, per_client: bool = True) -> m.Expect:
    if per_client and isinstance(raw, dict) and raw and set(raw) & (_client_names() | {"default"}):
        mixed = sorted(set(raw) & EXPECT_KEYS)
        if mixed:
            v.fail(path, "either a per-client map (keys: client names and `default`, each value an "
                         f"expectation) or one expectation ({sorted(EXPECT_KEYS)}), not both; {mixed} belong "
                         "inside a client's entry", sorted(raw))
        return _per_client_expect(v, raw, path)
    if raw is None or raw == "ok":
        return m.Expect()
    if raw == "any":
        return m.Expect(any=True)
    if raw == "error":
        return m.Expect(ok=False)
    if isinstance(raw, str):
        return m.Expect(ok=False, errors=(v.error_name(raw, path),))
    if isinstance(raw, list):
        return m.Expect(ok=False, errors=tuple(v.error_name(x, f"{path}[{i}]") for i, x in enumerate(raw)))
    raw = v.mapping(raw, path, EXPECT_KEYS)
    if raw.get("ok") is True or "data" in raw:
        if set(raw) - {"ok", "data"}:
            v.fail(path, "either ok/data or error/flags/message, not both", sorted(raw))
        data = dict(v.mapping(raw.get("data") or {}, f"{path}.data"))
        _comparisons(v, data, f"{path}.data")
        return m.Expect(data=data)
    errors: tuple[str, ...] = ()
    if "error" in raw:
        e = raw["error"]
        if isinstance(e, list):
            errors = tuple(v.error_name(x, f"{path}.error[{i}]") for i, x in enumerate(e))
        elif e != "any":
            errors = (v.error_name(e, f"{path}.error"),)
    flags = {f: v.boolean(raw[f], f"{path}.{f}") for f in m.FLAG_NAMES if f in raw}
    message = v.string(raw["message"], f"{path}.message") if "message" in raw else None
    regex = None
    if "message_regex" in raw:
        regex = _regex(v, raw["message_regex"], f"{path}.message_regex")
    return m.Expect(ok=False, errors=errors, flags=flags, message=message, message_regex=regex)


def _regex(v: _V, raw: Any, path: str) -> str:
    text = v.string(raw, path)
    try:
        re.compile(text)
    except re.error as exc:
        v.fail(path, f"a regular expression ({exc})", text)
    return text


def _comparisons(v: _V, value: Any, path: str) -> None:
    """Comparisons inside expected data are well-formed: operator keys alone, valid regexes."""
    if isinstance(value, dict):
        ops = set(value) & set(OPERATORS)
        if ops and not is_comparison(value):
            v.fail(path, f"either a comparison (only the operators {sorted(OPERATORS)}) or fields to match, "
                         "not both", sorted(value))
        if ops:
            if "matches" in value:
                _regex(v, value["matches"], _join(path, "matches"))
            return
        for k, x in value.items():
            _comparisons(v, x, _join(path, k))
    elif isinstance(value, list):
        for i, x in enumerate(value):
            _comparisons(v, x, _join(path, i))


def _client_names() -> set[str]:
    return set(CLIENTS)


def _per_client_expect(v: _V, raw: dict, path: str) -> m.Expect:
    """`expect: {confluent: X, java: Y}` (any of the clients, and/or `default: W` for the others):
    what each real client does against Apache Kafka, where clients differ. A client the map does
    not cover is not specified (model.Expect.per_client)."""
    clients = _client_names()
    v.mapping(raw, path, clients | {"default"})
    per = {k: _expect(v, x, _join(path, k), per_client=False) for k, x in raw.items()}
    return m.Expect(per_client=per)


def _node_ref(v: _V, raw: dict, role_key: str, path: str, topics: dict[str, int]) -> m.NodeRef:
    role = raw[role_key]
    v.string(role, _join(path, role_key), NODE_ROLES)
    if role == "node":
        return m.NodeRef("node", node=v.integer(raw.get("node"), _join(path, "node"), 1))
    if role == "not_coordinator":
        index = v.integer(raw.get("node", 1), _join(path, "node"), 1)
        return m.NodeRef(role, of=v.string(raw.get("of"), _join(path, "of")), node=index)
    of = raw.get("of")
    if of is None:
        v.fail(_join(path, "of"), f"whose {role}: a transactional.id, a group id or topic/partition")
    of = v.string(of, _join(path, "of"))
    if role in ("leader", "follower"):
        topic, _, part = of.rpartition("/")
        if topic not in topics or not part.isdigit() or int(part) >= topics[topic]:
            v.fail(_join(path, "of"), f"topic/partition of a topology topic {sorted(topics)}", of)
    return m.NodeRef(role, of=of)


def _fault(v: _V, raw: Any, path: str, topics: dict[str, int]) -> m.FaultDef:
    raw = v.mapping(raw, path)
    kinds = [*NODE_ACTIONS, "proxy"]
    actions = [k for k in kinds if k in raw]
    if len(actions) != 1:
        v.fail(path, f"exactly one of {kinds}", sorted(raw))
    action = actions[0]
    if action == "proxy":
        sender = None
        if raw.get("from") in PROXY_SENDER_ROLES:
            # the requests one broker sends (its inter-broker client id names it): resolved by
            # role when the rule is added, like a node fault's node
            sender = _node_ref(v, raw, "from", path, topics)
            raw = {**{k: x for k, x in raw.items() if k != "of"}, "from": "broker"}
        elif "of" in raw:
            v.fail(f"{path}.of", f"only with `from:` a broker by role {list(PROXY_SENDER_ROLES)}")
        return m.FaultDef(action="proxy", target=sender, proxy=_proxy_rule(v, raw, path))
    v.mapping(raw, path, {action, "of", "node", "at", "occurrence"})
    target = _node_ref(v, raw, action, path, topics)
    at = raw.get("at")
    if at is None and action in POINT_ONLY_ACTIONS:
        v.fail(f"{path}.at", f"the protocol point to {action} at (one of {list(PROTOCOL_POINTS)}): {action} exists "
                             "only as a fault point")
    if at is not None:
        if action not in TRIGGERED_ACTIONS:
            v.fail(f"{path}.at", f"no `at` on {action}: only {list(TRIGGERED_ACTIONS)} wait for a protocol point")
        v.string(at, f"{path}.at", list(PROTOCOL_POINTS))
        if target.role not in ("coordinator", "node"):
            v.fail(f"{path}.{action}", "coordinator (or node) for a fault at a transaction protocol point",
                   target.role)
    occurrence = v.integer(raw.get("occurrence", 1), f"{path}.occurrence", 1)
    return m.FaultDef(action=action, target=target, at=at, occurrence=occurrence)


def _proxy_rule(v: _V, raw: dict, path: str) -> Rule:
    """`{proxy: ACTION, api: ..., ...}`: the proxy's own Rule, in its own spelling. `node: N` is
    the N-th node of the target; `error` (of `answer`) a Kafka error name."""
    v.mapping(raw, path, {"proxy"} | PROXY_FIELDS)
    fields = {k: x for k, x in raw.items() if k != "proxy"}
    action = v.string(raw["proxy"], f"{path}.proxy")
    api = fields.get("api")
    if isinstance(api, int):
        fields["api"] = str(api)
    elif api not in API:
        v.fail(f"{path}.api", f"a Kafka API name {sorted(API)} or an API key number", api)
    if action == "answer":
        # what the proxy can synthesize (proxy/answer.py), for a request
        if "error" not in fields:
            v.fail(f"{path}.error", "the error the synthesized response carries (a Kafka error name)")
        if fields.get("direction", "request") != "request":
            v.fail(f"{path}.direction", "request: answer replaces the broker's response to a request",
                   fields["direction"])
        if not answerable_versions(api_key_of(fields["api"])):
            v.fail(f"{path}.api", "an API whose response has a top-level ErrorCode (EndTxn, InitProducerId, "
                                  "AddOffsetsToTxn, FindCoordinator, OffsetFetch, AddPartitionsToTxn v4+) or "
                                  "per-partition errors the proxy mirrors (Produce, TxnOffsetCommit, OffsetCommit, "
                                  "AddPartitionsToTxn v0-3)", api)
    elif "error" in fields:
        v.fail(f"{path}.error", "no error: it is only for `proxy: answer`")
    if "error" in fields and (not isinstance(fields["error"], str) or fields["error"] not in KAFKA_ERROR_NAMES):
        v.fail(f"{path}.error", "a Kafka error name such as NOT_COORDINATOR (Kafka's Errors enum)", fields["error"])
    if "node" in fields:
        v.integer(fields["node"], f"{path}.node", 1)
    if "from" in fields:
        v.string(fields["from"], f"{path}.from", [*SOURCES, *PROXY_SENDER_ROLES])
    if "direction" in fields:
        v.string(fields["direction"], f"{path}.direction", list(DIRECTIONS))
    for key in ("nth", "offset", "length", "delay_ms"):
        if key in fields:
            v.integer(fields[key], f"{path}.{key}", 0 if key != "nth" else 1)
    for key in ("every", "reset"):
        if key in fields:
            v.boolean(fields[key], f"{path}.{key}")
    try:
        return Rule.from_dict({"action": action, **fields})
    except RuleError as exc:
        v.fail(f"{path}.proxy", f"a proxy rule the proxy can apply ({exc})", dict(raw))


def _raw_request(v: _V, s: dict, p: str) -> None:
    """A raw `request` step: a known API and version, and a body the codec can build (checked
    now with every "${ref}" standing for a value of its field's type, so a misspelt field fails
    at load time, not mid-run)."""
    api = v.string(s.get("api"), f"{p}.api", sorted(API))
    version = v.integer(s.get("version"), f"{p}.version", 0)
    body = v.mapping(s.get("body") or {}, f"{p}.body")
    if "timeout_ms" in s:
        v.integer(s["timeout_ms"], f"{p}.timeout_ms", 1)
    if "retry" in s:
        if not isinstance(s["retry"], list):
            v.fail(f"{p}.retry", "a list of Kafka error names (empty: no retry)", s["retry"])
        for j, name in enumerate(s["retry"]):
            if name not in KAFKA_ERROR_NAMES:
                v.fail(f"{p}.retry[{j}]", "a Kafka error name", name)
    try:
        build_request(api, version, body, placeholders=True)
    except (RequestError, TypeError, ValueError, OverflowError) as exc:
        v.fail(f"{p}.body", f"a {api} v{version} request body ({exc})", body)


def _broker(v: _V, raw: Any, path: str, topics: dict[str, int]) -> m.NodeRef:
    """`broker:` of a raw request, a node by role: `{coordinator: txn-1}`, `{group_coordinator:
    app}`, `{leader: t1/0}`, `{follower: t1/0}`, `{node: 2}`, `{not_coordinator: txn-1, node: 1}`."""
    raw = v.mapping(raw, path)
    roles = [r for r in NODE_ROLES if r in raw and r != "node"] or (["node"] if "node" in raw else [])
    if len(roles) != 1:
        v.fail(path, f"one node role of {list(NODE_ROLES)} (e.g. {{coordinator: txn-1}}, {{leader: t1/0}}, "
                     "{node: 2})", raw)
    role = roles[0]
    if role == "node":
        v.mapping(raw, path, {"node"})
        return _node_ref(v, {"role": "node", "node": raw["node"]}, "role", path, topics)
    v.mapping(raw, path, {role, "node"} if role == "not_coordinator" else {role})
    spec = {"role": role, "of": raw[role]}
    if "node" in raw:
        spec["node"] = raw["node"]
    return _node_ref(v, spec, "role", path, topics)


STEP_KEYS = {"actor", "op", "expect", "id", "background", "deadline_ms", "note", "clients", "capture", "broker"}


class _Steps:
    """Parses `steps` (and the steps of repeat blocks) in file order, knowing what came before:
    the step ids and captures a reference may name, the background steps an `await` may name,
    whether a protocol point is armed."""

    def __init__(self, v: _V, actors: dict[str, m.ActorDef], topics: dict[str, int]) -> None:
        self.v, self.actors, self.topics = v, actors, topics
        self.ids: set[str] = set()
        self.captures: set[str] = set()
        self.background: set[str] = set()
        self.armed = False

    def parse(self, raw: Any) -> tuple[m.Step, ...]:
        v = self.v
        if not isinstance(raw, list) or not raw:
            v.fail("steps", "a non-empty list of steps", raw)
        out = self._list(raw, "steps", "")
        if self.background:
            v.fail("steps", f"an `await:` step for every background step; never awaited: {sorted(self.background)}")
        return out

    def _list(self, raw: list, path: str, label: str, in_repeat: bool = False) -> tuple[m.Step, ...]:
        return tuple(self._one(s, f"{path}[{i}]", i, f"{label}{i}", in_repeat) for i, s in enumerate(raw))

    def refs(self, value: Any, path: str) -> None:
        """Every reference names a step id or a capture that comes before it."""
        for name, field in refs_in(value):
            if field is None and name not in self.captures:
                self.v.fail(path, f"\"${{name}}\" naming a value captured by an earlier step "
                                  f"{sorted(self.captures) or '(none so far)'}", f"${{{name}}}")
            if field is not None and name not in self.ids:
                self.v.fail(path, f"\"${{id.field}}\" naming an earlier step id {sorted(self.ids) or '(none so far)'}",
                            f"${{{name}.{field}}}")

    def _clients(self, s: dict, p: str) -> tuple[str, ...]:
        clients = self.v.strings(s.get("clients") or [], f"{p}.clients")
        for j, cl in enumerate(clients):
            if cl not in _client_names():
                self.v.fail(f"{p}.clients[{j}]", f"a client name {sorted(_client_names())}", cl)
        return clients

    def _one(self, s: Any, p: str, i: int, label: str, in_repeat: bool) -> m.Step:
        v, actors, topics = self.v, self.actors, self.topics
        # short form `- p1: init_transactions`
        if isinstance(s, dict) and len(s) == 1:
            (k, val), = s.items()
            if k in actors and isinstance(val, str):
                s = {"actor": k, "op": val}
        s = v.mapping(s, p)
        note = s.get("note")
        clients = self._clients(s, p)
        common = dict(note=note, clients=clients, label=label)
        if "repeat" in s:
            return self._repeat(s, p, i, label, in_repeat, common)
        if "wait_ms" in s:
            v.mapping(s, p, {"wait_ms", "note", "clients"})
            return m.Step(i, "wait", wait_ms=v.integer(s["wait_ms"], f"{p}.wait_ms", 0), **common)
        if in_repeat and not ({"actor", "op"} <= set(s)):
            v.fail(p, "an op or a wait inside a repeat (faults, awaits and nested repeats go outside it)", sorted(s))
        if "fault" in s:
            v.mapping(s, p, {"fault", "note", "clients"})
            f = _fault(v, s["fault"], f"{p}.fault", topics)
            if f.at and clients:
                v.fail(f"{p}.clients", "no clients on a fault at a protocol point: it is armed when the target "
                                       "starts, for every run")
            self.armed = self.armed or bool(f.at) or f.proxy is not None
            return m.Step(i, "fault", fault=f, **common)
        if "wait_fault" in s:
            v.mapping(s, p, {"wait_fault", "note", "clients"})
            wf = v.mapping(s["wait_fault"] or {}, f"{p}.wait_fault", {"timeout_ms"})
            if not self.armed:
                v.fail(f"{p}.wait_fault", "an earlier `fault:` step with `at:` or a proxy rule to wait for")
            return m.Step(i, "wait_fault", timeout_ms=v.integer(wf.get("timeout_ms", 20_000),
                                                                f"{p}.wait_fault.timeout_ms", 1), **common)
        if "await" in s:
            v.mapping(s, p, {"await", "expect", "timeout_ms", "note", "clients"})
            ref = v.string(s["await"], f"{p}.await")
            if ref not in self.background:
                v.fail(f"{p}.await", f"the id of an earlier background step {sorted(self.background)}", ref)
            self.background.discard(ref)
            self.refs(s.get("expect"), f"{p}.expect")
            return m.Step(i, "await", awaits=ref, expect=_expect(v, s.get("expect"), f"{p}.expect"),
                          timeout_ms=v.integer(s.get("timeout_ms", 60_000), f"{p}.timeout_ms", 1), **common)
        if "actor" not in s or "op" not in s:
            v.fail(p, "a step: {actor, op, ...}, {wait_ms}, {fault}, {wait_fault}, {await} or {repeat, steps}", s)
        return self._op(s, p, i, common)

    def _op(self, s: dict, p: str, i: int, common: dict) -> m.Step:
        v, actors, topics = self.v, self.actors, self.topics
        actor = v.string(s["actor"], f"{p}.actor")
        op = v.string(s["op"], f"{p}.op")
        if actor == "raw":
            if op not in m.RAW_OPS:
                v.fail(f"{p}.op", f"a raw-socket op {sorted(m.RAW_OPS)}", op)
            allowed = m.RAW_OPS[op]
            if op == "request":
                _raw_request(v, s, p)
            if op == "change_run_password" and s.get("password") not in ("new", "original"):
                v.fail(f"{p}.password", "new or original", s.get("password"))
        else:
            if actor not in actors:
                v.fail(f"{p}.actor", f"an actor declared under `actors` {sorted(actors)}", actor)
            if op not in m.ALL_OPS:
                v.fail(f"{p}.op", f"an operation {sorted(m.ALL_OPS)}", op)
            allowed = m.ALL_OPS[op]
            if op == "transform" and actors[actor].role != "copier":
                v.fail(f"{p}.op", "transform only on a copier actor", actor)
        args = {k: x for k, x in s.items() if k not in STEP_KEYS}
        for k in args:
            if k not in allowed:
                v.fail(f"{p}.{k}", f"an argument of {op}: {sorted(allowed) or 'none'}", k)
        broker = None
        if "broker" in s:
            if "broker" not in allowed:
                v.fail(f"{p}.broker", f"an argument of {op}: {sorted(allowed) or 'none'}", "broker")
            broker = _broker(v, s["broker"], f"{p}.broker", topics)
        for key in ("topic", "to"):
            if key in args and args[key] not in topics:
                v.fail(f"{p}.{key}", f"a topic of topology.topics {sorted(topics)}", args[key])
        if "crash_after" in args:
            v.string(args["crash_after"], f"{p}.crash_after", ("poll", "send", "send_offsets"))
        self.refs(args, p)
        self.refs(s.get("expect"), f"{p}.expect")
        sid = s.get("id")
        if sid is not None:
            sid = v.string(sid, f"{p}.id")
            if sid in self.ids:
                v.fail(f"{p}.id", "a step id not used before", sid)
        bg = v.boolean(s.get("background", False), f"{p}.background")
        if bg:
            if sid is None:
                v.fail(f"{p}.id", "an id on a background step (an `await:` step names it)")
            if common.get("label", "").count("."):
                v.fail(f"{p}.background", "no background step inside a repeat")
            self.background.add(sid)
        capture = v.mapping(s.get("capture") or {}, f"{p}.capture")
        for name, path in capture.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", name):
                v.fail(f"{p}.capture.{name}", "a capture name (letters, digits, _ and -)", name)
            v.string(path, f"{p}.capture.{name}")
        if bg and capture:
            v.fail(f"{p}.capture", "no capture on a background step (capture on its `await`'s data later)")
        if sid is not None:
            self.ids.add(sid)
        self.captures |= set(capture)
        deadline = s.get("deadline_ms")
        return m.Step(
            i, "op", actor=actor, op=op, args=args, expect=_expect(v, s.get("expect"), f"{p}.expect"),
            id=sid, background=bg, deadline_ms=None if deadline is None else v.integer(deadline, f"{p}.deadline_ms", 1),
            capture=dict(capture), broker=broker, **common,
        )

    def _repeat(self, s: dict, p: str, i: int, label: str, in_repeat: bool, common: dict) -> m.Step:
        v = self.v
        if in_repeat:
            v.fail(f"{p}.repeat", "no repeat inside a repeat")
        v.mapping(s, p, {"repeat", "until", "steps", "note", "clients"}, {"steps"})
        times = v.integer(s["repeat"], f"{p}.repeat", 1)
        if times > MAX_REPEAT:
            v.fail(f"{p}.repeat", f"a bound of at most {MAX_REPEAT}", times)
        raw_body = s["steps"]
        if not isinstance(raw_body, list) or not raw_body:
            v.fail(f"{p}.steps", "a non-empty list of steps to repeat", raw_body)
        body = self._list(raw_body, f"{p}.steps", f"{label}.", in_repeat=True)
        until = None
        if "until" in s:
            u = v.mapping(s["until"], f"{p}.until", {"step", "expect"}, {"step", "expect"})
            body_ids = {b.id for b in body if b.id}
            target = v.string(u["step"], f"{p}.until.step")
            if target not in body_ids:
                v.fail(f"{p}.until.step", f"the id of a step of this repeat {sorted(body_ids)}", target)
            self.refs(u["expect"], f"{p}.until.expect")
            until = m.Until(target, _expect(v, u["expect"], f"{p}.until.expect"))
        return m.Step(i, "repeat", body=body, times=times, until=until, **common)


def _frame_pattern(v: _V, raw: Any, path: str, steps: _Steps) -> dict:
    """One frame of a transcript check: `{api, direction?, from?, version?, fields?}`."""
    raw = v.mapping(raw, path, FRAME_KEYS, {"api"})
    api = raw["api"]
    if api not in API:
        v.fail(f"{path}.api", f"a Kafka API name {sorted(API)}", api)
    out = {"api": api, "direction": v.string(raw.get("direction", "request"), f"{path}.direction", list(DIRECTIONS))}
    if "from" in raw:
        out["from"] = v.string(raw["from"], f"{path}.from", SOURCES)
    if "version" in raw:
        if is_comparison(raw["version"]):
            _comparisons(v, raw["version"], f"{path}.version")
        else:
            v.integer(raw["version"], f"{path}.version", 0)
        out["version"] = raw["version"]
    if "fields" in raw:
        fields = v.mapping(raw["fields"], f"{path}.fields")
        _comparisons(v, fields, f"{path}.fields")
        steps.refs(fields, f"{path}.fields")
        out["fields"] = dict(fields)
    return out


def _count(v: _V, raw: Any, path: str) -> Any:
    if is_comparison(raw):
        _comparisons(v, raw, path)
        return raw
    return v.integer(raw, path, 0)


def _checks(v: _V, raw: Any, topics: dict[str, int], steps: _Steps) -> tuple[m.CheckDef, ...]:
    step_ids = steps.ids
    out = []
    for i, c in enumerate(raw or []):
        p = f"checks[{i}]"
        c = v.mapping(c, p, required={"check"})
        kind = v.string(c["check"], f"{p}.check", list(CHECKS))
        required, optional = CHECKS[kind]
        params = {k: x for k, x in c.items() if k not in ("check", "clients")}
        v.mapping(params, p, required | optional | {"check"}, required)
        clients = v.strings(c.get("clients") or [], f"{p}.clients")
        for j, cl in enumerate(clients):
            if cl not in _client_names():
                v.fail(f"{p}.clients[{j}]", f"a client name {sorted(_client_names())}", cl)
        if "isolation" in params:
            v.string(params["isolation"], f"{p}.isolation", ISOLATION)
        for key in ("topic", "from", "to"):
            if key in params and params[key] not in topics:
                v.fail(f"{p}.{key}", f"a topic of topology.topics {sorted(topics)}", params[key])
        if "topics" in params:
            for j, t in enumerate(v.strings(params["topics"], f"{p}.topics")):
                if t not in topics:
                    v.fail(f"{p}.topics[{j}]", f"a topic of topology.topics {sorted(topics)}", t)
        if "partition" in params:
            v.integer(params["partition"], f"{p}.partition", 0)
        if kind == "records" and not {"values", "keys", "count"} & set(params):
            v.fail(p, "at least one of values, keys, count")
        for key in ("values", "keys"):
            if key in params and not isinstance(params[key], list):
                v.fail(f"{p}.{key}", "a list", params[key])
        for key in ("count", "high_watermark", "last_stable", "open"):
            if key in params and kind != "transcript":
                v.integer(params[key], f"{p}.{key}", 0)
        if kind == "step":
            if params["step"] not in step_ids:
                v.fail(f"{p}.step", f"a step id {sorted(step_ids)}", params["step"])
            steps.refs(params.get("expect"), f"{p}.expect")
            params["expect"] = _expect(v, params.get("expect"), f"{p}.expect")
        if kind == "transcript":
            if ("frame" in params) == ("sequence" in params):
                v.fail(p, "either `frame` (with `count`) or `sequence`", sorted(params))
            if "frame" in params:
                params["frame"] = _frame_pattern(v, params["frame"], f"{p}.frame", steps)
                params["count"] = _count(v, params.get("count", {"at_least": 1}), f"{p}.count")
            else:
                if "count" in params:
                    v.fail(f"{p}.count", "no count with a sequence (each frame of it must appear once, in order)")
                seq = params["sequence"]
                if not isinstance(seq, list) or not seq:
                    v.fail(f"{p}.sequence", "a non-empty list of frames", seq)
                params["sequence"] = [_frame_pattern(v, f, f"{p}.sequence[{j}]", steps) for j, f in enumerate(seq)]
        name = params.pop("name", None) or _check_name(kind, params)
        if clients:
            name = f"{name} [{', '.join(clients)}]"
        out.append(m.CheckDef(kind=kind, params=params, name=str(name), clients=clients))
    return tuple(out)


def _check_name(kind: str, params: dict) -> str:
    if kind == "transcript":
        frames = [params["frame"]] if "frame" in params else params["sequence"]
        text = " then ".join(_frame_text(f) for f in frames)
        return f"transcript({text}" + (f", count {_count_text(params['count'])})" if "frame" in params else ")")
    bits = [f"{k}={params[k]}" for k in ("isolation", "topic", "topics", "from", "to", "partition", "group",
                                           "step") if k in params]
    return f"{kind}({', '.join(bits)})"


def _frame_text(f: dict) -> str:
    src = f" from {f['from']}" if "from" in f else ""
    fields = f" {f['fields']}" if f.get("fields") else ""
    return f"{f['api']} {f['direction']}{src}{fields}"


def _count_text(count: Any) -> str:
    return describe_comparison(count) if isinstance(count, dict) else str(count)


def _observe(v: _V, raw: Any, topics: dict[str, int], groups: set[str]) -> m.ObserveDef:
    if raw is None:
        return m.ObserveDef(groups=tuple(sorted(groups)))
    raw = v.mapping(raw, "observe", {"topics", "isolation", "groups", "timeout_ms"})
    ts = None
    if "topics" in raw:
        ts = v.strings(raw["topics"], "observe.topics")
        for j, t in enumerate(ts):
            if t not in topics:
                v.fail(f"observe.topics[{j}]", f"a topic of topology.topics {sorted(topics)}", t)
    iso = tuple(v.string(x, f"observe.isolation[{j}]", ISOLATION)
                for j, x in enumerate(raw.get("isolation", list(ISOLATION))))
    gs = v.strings(raw["groups"], "observe.groups") if "groups" in raw else tuple(sorted(groups))
    return m.ObserveDef(topics=ts, isolation=iso, groups=gs,
                        timeout_ms=v.integer(raw.get("timeout_ms", 10_000), "observe.timeout_ms", 1))


TOP_KEYS = {"id", "title", "tags", "scenario", "description", "topology", "actors", "steps", "checks",
            "observe", "requires", "known_differences", "workload", "regression", "known_reference_bug",
            "application"}
#: The keys of published bugs: Kafka's JIRA (KAFKA-12671), or a client's issue or PR (librdkafka#3041).
BUG_KEY = re.compile(r"^(KAFKA-\d+|[a-z][a-z0-9-]*#\d+)$")
REGRESSION_KEYS = ("key", "component", "affected", "fixed", "summary")
#: Whose bug a regression case reproduces.
BUG_COMPONENTS = ("broker", "java", "confluent", "kafka-python", "franz-go", "sarama", "kafkajs", "aiokafka")


def _regression(v: "_V", raw: Any) -> m.RegressionDef | None:
    if raw is None:
        return None
    raw = v.mapping(raw, "regression", REGRESSION_KEYS, {"key", "component", "affected", "fixed", "summary"})
    key = v.string(raw["key"], "regression.key")
    if not BUG_KEY.match(key):
        v.fail("regression.key", "a bug key such as KAFKA-12671 or librdkafka#3041", key)
    summary = v.string(raw["summary"], "regression.summary")
    if "\n" in summary.strip():
        v.fail("regression.summary", "one line", summary)
    return m.RegressionDef(key=key, component=v.string(raw["component"], "regression.component", BUG_COMPONENTS),
                           affected=str(raw["affected"]), fixed=str(raw["fixed"] or ""), summary=summary.strip())
#: A workload's final read covers everything it wrote (tens of thousands of records).
WORKLOAD_OBSERVE_MS = 120_000
#: What a workload case may have besides its `workload:` (its workers are its actors, its
#: checker its checks).
WORKLOAD_TOP_KEYS = TOP_KEYS - {"actors", "steps", "checks", "observe", "application"}
#: An application case (conformance/apps): its program is its steps and its verifier its checks;
#: its topics follow from its parameters.
APPLICATION_TOP_KEYS = TOP_KEYS - {"actors", "steps", "checks", "observe", "workload"}
APPLICATION_KEYS = {f.name for f in dataclasses.fields(m.ApplicationDef)}


def _leader_chase(v: "_V", raw: dict, args: dict[str, Any], nodes: int) -> None:
    """The keys of a leader chase (ApplicationRun.chase_leader) -- failure_mode, bounces, down_s --
    and the followers it needs to take over."""
    if "failure_mode" in raw:
        args["failure_mode"] = v.string(raw["failure_mode"], "application.failure_mode", m.CHASE_FAILURE_MODES)
    if "bounces" in raw:
        args["bounces"] = v.integer(raw["bounces"], "application.bounces", 1)
    _application_numbers(v, raw, ("down_s",), args)
    if nodes < 2:
        v.fail("topology.nodes", "2 or more: a chased leader needs a follower to take over", nodes)


def _optional_leader_chase(v: "_V", raw: dict, args: dict[str, Any], nodes: int) -> None:
    """`bounce_target: brokers` (a leader chase, its keys read by _leader_chase) or `none` (the
    default: the program's own faults only; the chase's keys are then an error)."""
    if "bounce_target" in raw:
        args["bounce_target"] = v.string(raw["bounce_target"], "application.bounce_target", ("brokers", "none"))
    if args.get("bounce_target") == "brokers":
        _leader_chase(v, raw, args, nodes)
        return
    for key in ("failure_mode", "bounces", "down_s"):
        if key in raw:
            v.fail(f"application.{key}", "only with bounce_target: brokers (a leader chase)", raw[key])


def _application_numbers(v: "_V", raw: dict, keys: tuple[str, ...], args: dict[str, Any]) -> None:
    """The `application:` keys among `keys` that are numbers >= 0 (seconds, a percentage)."""
    for key in keys:
        if key in raw:
            x = raw[key]
            if isinstance(x, bool) or not isinstance(x, (int, float)) or x < 0:
                v.fail(f"application.{key}", "a number >= 0", x)
            args[key] = float(x)


def _application(v: "_V", raw: Any, nodes: int) -> tuple[m.ApplicationDef, list[dict[str, Any]]]:
    """The `application:` section and the topics it needs (transactions_test.py's: input and
    output, replicated min(nodes, 3) times, min.insync.replicas 2 on 3+ nodes; with check_order one
    partition each and a third of the messages). A streams_smoke run creates its own topics
    (apps/streams_smoke.py): their names are fixed in Kafka's test program, not the row's."""
    raw = v.mapping(raw, "application", APPLICATION_KEYS, {"kind"})
    d = m.ApplicationDef(kind="")
    args: dict[str, Any] = {"kind": v.string(raw["kind"], "application.kind", m.APPLICATIONS)}
    kind = args["kind"]
    for key in raw:
        if key != "kind" and key not in m.KIND_KEYS[kind]:
            owners = " and ".join(k for k, keys in m.KIND_KEYS.items() if key in keys)
            v.fail(f"application.{key}", f"a key of {owners}, not of {kind}", raw[key])
    if kind == "connect_eos_source":
        for key in ("lines", "kill_every"):
            if key in raw:
                args[key] = v.integer(raw[key], f"application.{key}", 1)
        if "kills" in raw:
            args["kills"] = v.integer(raw["kills"], "application.kills", 0)
        _optional_leader_chase(v, raw, args, nodes)
        if args.get("kills") == 0 and args.get("bounce_target") != "brokers":
            v.fail("application.kills", "1 or more, or bounce_target: brokers (something must fail)", 0)
        if "write_s" in raw:
            x = raw["write_s"]
            if isinstance(x, bool) or not isinstance(x, (int, float)) or x <= 0:
                v.fail("application.write_s", "a number of seconds > 0", x)
            args["write_s"] = float(x)
        app = m.ApplicationDef(**args)
        if app.kills * app.kill_every >= app.lines:
            v.fail("application.kill_every", f"kills x kill_every below lines ({app.lines}): every kill must "
                   "land while the copy is going", app.kill_every)
        # its topics are the worker's (it creates its own) and the connector's output
        return app, []
    if kind == "flink_eos":
        if "records" in raw:
            args["records"] = v.integer(raw["records"], "application.records", 30)
        if "record_delay_ms" in raw:
            args["record_delay_ms"] = v.integer(raw["record_delay_ms"], "application.record_delay_ms", 0)
        _optional_leader_chase(v, raw, args, nodes)
        app = m.ApplicationDef(**args)
        rf = min(nodes, 3)
        configs = {"min.insync.replicas": "2" if nodes >= 3 else "1"}
        # one partition each: the job's parallelism is 1 and the output keeps the input's order
        return app, [{"name": name, "partitions": 1, "replication_factor": rf, "configs": dict(configs)}
                     for name in ("flink-input", "flink-output")]
    if kind == "streams_broker_bounce":
        if "processing_guarantee" in raw:
            args["processing_guarantee"] = v.string(raw["processing_guarantee"], "application.processing_guarantee",
                                                    m.PROCESSING_GUARANTEES)
        _application_numbers(v, raw, ("bounce_after_s",), args)
        _leader_chase(v, raw, args, nodes)
        # its topics have the fixed names SmokeTestDriver writes and reads: the run creates them
        return m.ApplicationDef(**args), []
    if kind == "streams_smoke":
        if "processing_guarantee" in raw:
            args["processing_guarantee"] = v.string(raw["processing_guarantee"], "application.processing_guarantee",
                                                    m.PROCESSING_GUARANTEES)
        if "crash" in raw:
            args["crash"] = v.boolean(raw["crash"], "application.crash")
        # its topics have the fixed names SmokeTestDriver writes and reads: the run creates them
        return m.ApplicationDef(**args), []
    for key in ("bounce_target", "failure_mode"):
        if key in raw:
            args[key] = v.string(raw[key], f"application.{key}",
                                 m.BOUNCE_TARGETS if key == "bounce_target" else m.FAILURE_MODES)
    for key in ("use_group_metadata", "check_order"):
        if key in raw:
            args[key] = v.boolean(raw[key], f"application.{key}")
    for key in ("messages", "input_partitions", "output_partitions", "transaction_size", "transaction_timeout_ms",
                "bounce_rounds"):
        if key in raw:
            args[key] = v.integer(raw[key], f"application.{key}", 1)
    _application_numbers(v, raw, ("bounce_after_s", "down_s", "progress_percent", "copy_timeout_s"), args)
    if args.get("check_order", d.check_order):
        args["messages"] = args.get("messages", d.messages) // 3
        args["input_partitions"] = args["output_partitions"] = 1
    app = m.ApplicationDef(**args)
    configs = {"min.insync.replicas": "2" if nodes >= 3 else "1"}
    topics = [{"name": "input-topic", "partitions": app.input_partitions, "replication_factor": min(nodes, 3),
               "configs": dict(configs)},
              {"name": "output-topic", "partitions": app.output_partitions, "replication_factor": min(nodes, 3),
               "configs": dict(configs)}]
    return app, topics


def parse_case(data: Any, file: str, case_id: str) -> m.Case:
    """Validate one parsed YAML document; `file` is used in error messages."""
    v = _V(file)
    is_workload = isinstance(data, dict) and "workload" in data
    is_application = isinstance(data, dict) and "application" in data and not is_workload
    if is_application:
        data = v.mapping(data, "", APPLICATION_TOP_KEYS, {"title", "application"})
    else:
        data = v.mapping(data, "", WORKLOAD_TOP_KEYS if is_workload else TOP_KEYS,
                         {"title", "workload"} if is_workload else {"title", "steps"})
    cid = v.string(data.get("id", case_id), "id")
    if cid != case_id:
        v.fail("id", f"the file's path under cases/ without .yaml ({case_id!r}), or no id at all", cid)
    raw_topology = data.get("topology")
    if is_workload and isinstance(raw_topology or {}, dict) and not (raw_topology or {}).get("topics"):
        nodes = (raw_topology or {}).get("nodes", 1)
        raw_topology = {**(raw_topology or {}), "topics": default_topics(nodes if isinstance(nodes, int) else 1)}
    application = None
    if is_application:
        if isinstance(raw_topology or {}, dict) and (raw_topology or {}).get("topics"):
            v.fail("topology.topics", "none: an application case's topics follow from its application section")
        nodes = (raw_topology or {}).get("nodes", 1) if isinstance(raw_topology or {}, dict) else 1
        application, app_topics = _application(v, data["application"], nodes if isinstance(nodes, int) else 1)
        raw_topology = {**(raw_topology or {}), "topics": app_topics}
    topology = _topology(v, raw_topology)
    topics = {t.name: t.partitions for t in topology.topics}
    workload = None
    if is_workload:
        workload = parse_workload(v, data["workload"], topics, lambda raw, path: _fault(v, raw, path, topics),
                                  generate, topology.nodes)
    actors = _actors(v, data.get("actors"), set(topics))
    parser = _Steps(v, actors, topics)
    steps = parser.parse(data["steps"]) if not (is_workload or is_application) else ()
    groups = {a.config["group.id"] for a in actors.values() if "group.id" in a.config}
    if workload is not None:
        groups |= set(workload.groups())
    checks = _checks(v, data.get("checks"), topics, parser)
    requires = v.strings(data.get("requires") or [], "requires")
    for j, r in enumerate(requires):
        if r not in CAPABILITIES:
            v.fail(f"requires[{j}]", f"a target capability {sorted(CAPABILITIES)}", r)
    kd = v.mapping(data.get("known_differences") or {}, "known_differences")
    for k, x in kd.items():
        try:
            target_class(k)
        except KeyError:
            v.fail(f"known_differences.{k}", f"a target name {sorted(TARGETS)} (or NAME@VERSION of a "
                                             "versioned one, e.g. apache-kafka@3.9.1)", k)
        v.string(x, f"known_differences.{k}")
    return m.Case(
        id=cid,
        title=v.string(data["title"], "title"),
        path=file,
        tags=v.strings(data.get("tags") or [], "tags"),
        scenario=v.strings(data.get("scenario") or [], "scenario"),
        description=str(data.get("description") or ""),
        topology=topology,
        actors=actors,
        steps=steps,
        checks=checks,
        observe=_observe(v, data.get("observe"), topics, groups) if workload is None else
        m.ObserveDef(groups=tuple(sorted(groups)), timeout_ms=WORKLOAD_OBSERVE_MS),
        requires=requires,
        known_differences=dict(kd),
        workload=workload,
        application=application,
        regression=_regression(v, data.get("regression")),
        known_reference_bug=_reference_bug(v, data.get("known_reference_bug")),
    )


def _reference_bug(v: "_V", raw: Any) -> str | None:
    if raw is None:
        return None
    key = v.string(raw, "known_reference_bug")
    if not re.match(r"^KAFKA-\d+$", key):
        v.fail("known_reference_bug", "a Kafka JIRA key such as KAFKA-20734", key)
    return key


def case_id_for(path: Path, root: Path) -> str:
    try:
        rel = path.resolve().relative_to(root.resolve())
    except ValueError:
        rel = Path(path.name)
    return str(rel.with_suffix("")).replace("\\", "/")


def load_case(path: str | Path, root: str | Path | None = None) -> m.Case:
    path = Path(path)
    root = Path(root) if root else CASES_ROOT
    shown = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CaseError(shown, "", "a readable file", str(exc)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else ""
        raise CaseError(shown, where, "valid YAML", str(getattr(exc, "problem", exc))) from None
    return parse_case(data, shown, case_id_for(path, root))


def discover(root: str | Path | None = None) -> list[Path]:
    root = Path(root) if root else CASES_ROOT
    return sorted(p for p in root.rglob("*.yaml") if p.is_file())


def load_cases(patterns: Iterable[str] = (), root: str | Path | None = None) -> list[m.Case]:
    """Every case under `root` whose id matches one of the glob `patterns` (all when none).

    A pattern matches the case id (`txn/basic_*`) or, when it names a file, that file.
    Raises CaseError for the first invalid file; `validate_all` collects every error.
    """
    root = Path(root) if root else CASES_ROOT
    patterns = list(patterns)
    out = []
    files = discover(root)
    for pat in patterns:
        p = Path(pat)
        if p.suffix == ".yaml" and p.is_file() and p.resolve() not in {f.resolve() for f in files}:
            files.append(p)
    for f in files:
        cid = case_id_for(f, root)
        if patterns and not any(fnmatch.fnmatch(cid, pat) or fnmatch.fnmatch(str(f), pat)
                                or Path(pat).resolve() == f.resolve() for pat in patterns):
            continue
        out.append(load_case(f, root))
    return out


def validate_all(root: str | Path | None = None) -> list[CaseError]:
    errors = []
    for f in discover(root):
        try:
            load_case(f, root)
        except CaseError as exc:
            errors.append(exc)
    return errors
