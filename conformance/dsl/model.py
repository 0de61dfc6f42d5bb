"""The in-memory form of a conformance case, after validation.

Why plain dataclasses: the runner, the pytest plugin and the reports read the same objects, and a
case that loaded is known to be well-formed, so nothing downstream re-checks types. The YAML form
(documented in cases/README.md) maps one to one onto these classes; `loader.py` does the mapping
and says FILE, FIELD path and WHAT WAS EXPECTED when a file is wrong.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..clients.protocol import OPS
from ..proxy.rules import Rule
from ..targets.topology import TopicSpec
from ..vocabulary import NODE_ACTIONS

if TYPE_CHECKING:  # dsl.workload builds on FaultDef, defined here
    from .workload import WorkloadDef

# The shared words (node roles, fault actions, protocol points, capabilities, controller
# placements) are conformance/vocabulary.py's; proxy rules are the proxy's own Rule, spelt the
# same in a case file as on the proxy's command line.

ACTOR_ROLES = ("producer", "consumer", "copier", "admin")

#: Client operations a step may name, with the arguments each accepts: the driver protocol's
#: ops that ops.yaml marks `step` (actors are created by the runner, not by steps).
CLIENT_OPS: dict[str, frozenset[str]] = {name: spec.arg_names for name, spec in OPS.items() if spec.step}
#: Operations the runner performs itself with an actor's process.
RUNNER_OPS: dict[str, frozenset[str]] = {
    # Start the actor's process and create its clients now (otherwise the first step naming the
    # actor does): the step where a client refuses its config, naming the key.
    "start": frozenset(),
    # SIGKILL the actor's driver: an application crash. The next step naming the actor starts
    # a new process with the same config (same transactional.id: the restarted application).
    "crash": frozenset(),
    # Close the actor's process cleanly; the next step naming the actor starts a new one.
    # (A zombie is simply a second actor with the same transactional.id.)
    "restart": frozenset(),
    # Consume-transform-produce, one transaction (copier actors): poll up to max_records from
    # the subscribed/assigned input, begin, send each record to `to` (same key and value),
    # send the consumed offsets to the transaction, commit -- or stop after `crash_after`
    # (`poll`, `send`, `send_offsets`) and SIGKILL the process, or `abort` instead of commit
    # (then the process is restarted, so it resumes from the group's committed offsets).
    "transform": frozenset({"to", "max_records", "timeout_ms", "crash_after", "abort"}),
    # Send `count` records (values value_prefix+i), each awaited: a compact form of many sends.
    "send_many": frozenset({"topic", "partition", "count", "key", "value_prefix", "start"}),
    # Poll until `count` records arrived or timeout_ms; the records go into the step's outcome.
    "poll_until": frozenset({"count", "timeout_ms"}),
}
ALL_OPS = {**CLIENT_OPS, **RUNNER_OPS}
#: Ops that run in a raw-socket actor (no client library): bad frames.
RAW_OPS: dict[str, frozenset[str]] = {
    # Send bytes (hex) as-is to the node, read one response frame or see the connection close;
    # `answer_version: N` decodes the answer as version N of the frame's API (`response`).
    "send_frame": frozenset({"hex", "api_key", "api_version", "correlation_id", "body_hex", "size_delta",
                             "answer_version"}),
    # One real request built from Kafka's message fields (snake_case) with the project's codec;
    # "${step_id.field}" takes a field of an earlier step's data, `{batch: {...}}` builds a
    # record batch. The response is decoded: its top-level fields, `error` (first non-zero
    # error_code anywhere, else NONE), `errors`, `response`. One node targets only.
    # "Not ready yet" answers (COORDINATOR_LOAD_IN_PROGRESS, NOT_LEADER_OR_FOLLOWER, ...) are
    # retried within timeout_ms like a client would; `retry: [NAMES]` replaces that list.
    "request": frozenset({"api", "version", "body", "timeout_ms", "retry", "broker"}),
}

#: Error expectations a step may state besides names.
FLAG_NAMES = ("retriable", "abortable", "fatal", "fenced")


@dataclass(frozen=True)
class TopologyDef:
    nodes: int = 1
    topics: tuple[TopicSpec, ...] = ()  # the case's own names (the runner makes them unique)
    broker_configs: dict[str, str] = field(default_factory=dict)
    controller: str = "combined"
    #: The brokers serve no other row at the same time (never the run's shared instance): for a
    #: case whose outcome depends on broker-wide state that a concurrent row would change.
    exclusive: bool = False


@dataclass(frozen=True)
class ActorDef:
    name: str
    role: str
    #: None: the client of the run (each installed client in turn); else pinned to one client.
    client: str | None = None
    config: dict[str, str] = field(default_factory=dict)
    #: copier: input topics to subscribe to (or assign, with `assign: true`).
    inputs: tuple[str, ...] = ()
    assign: bool = False


@dataclass(frozen=True)
class Expect:
    """What a step must return. `ok` True: success; False: an error whose name is one of `errors`
    (empty: any error) and whose client classification matches `flags`. `any`: record only."""

    any: bool = False
    ok: bool = True
    errors: tuple[str, ...] = ()
    flags: dict[str, bool] = field(default_factory=dict)
    #: ok steps only: data the op must return (e.g. {"count": 3} for poll_until, "records": n);
    #: values may be "${...}" references and comparisons ({greater_than: ...}, conformance/refs).
    data: dict[str, Any] = field(default_factory=dict)
    #: error steps only: the error message contains this text / matches this regular expression.
    message: str | None = None
    message_regex: str | None = None
    #: Real clients differ (S26: Java treats INVALID_PRODUCER_ID_MAPPING on EndTxn as fatal,
    #: librdkafka as abortable): client name -> what that client must do against Kafka;
    #: "default" for the clients not named. Empty: the same for every client. A client neither
    #: named nor covered by a default is NOT SPECIFIED: its outcome is recorded and shown, and
    #: the check says `unspecified` -- so a client added later never breaks a case.
    per_client: dict[str, "Expect"] = field(default_factory=dict)

    def for_client(self, client: str | None) -> "Expect | None":
        """The expectation for one client (self when it is not per client); None when the case
        does not specify one for that client."""
        if not self.per_client:
            return self
        found = self.per_client.get(client) if client else None
        return found if found is not None else self.per_client.get("default")

    def describe(self) -> str:
        if self.per_client:
            return "; ".join(f"{c}: {e.describe()}" for c, e in self.per_client.items())
        if self.any:
            return "any outcome"
        if self.ok:
            return "ok" + (f" with {self.data}" if self.data else "")
        what = " or ".join(self.errors) if self.errors else "an error"
        flags = ", ".join(f"{k}={v}" for k, v in self.flags.items())
        if self.message is not None:
            what += f" saying {self.message!r}"
        if self.message_regex is not None:
            what += f" matching /{self.message_regex}/"
        return what + (f" ({flags})" if flags else "")


@dataclass(frozen=True)
class NodeRef:
    """A node by role: the coordinator of a transactional.id, the leader (or first follower) of
    topic/partition, the group coordinator of a group, or a node id."""

    role: str
    of: str | None = None  # txn id, group id, or "topic/partition"
    node: int | None = None  # role "node": the N-th node; "not_coordinator": the N-th such node

    def describe(self) -> str:
        if self.role == "node":
            return f"node {self.node}"
        if self.role == "not_coordinator":
            return f"node #{self.node} other than the coordinator of {self.of}"
        return f"{self.role} of {self.of}"

    def key(self) -> tuple:
        """What identifies this reference when the runner remembers which node it named."""
        return (self.role, self.of, self.node)


@dataclass(frozen=True)
class FaultDef:
    """One fault, in target-neutral words. Either a node action (crash/pause/... on `target`,
    right away or `at` a protocol point) or a proxy rule (with a `target`: on the requests that
    broker sends)."""

    action: str  # one of vocabulary.NODE_ACTIONS, or "proxy"
    target: NodeRef | None = None
    at: str | None = None
    occurrence: int = 1
    #: A proxy rule; its `node` is the N-th node of the target (the proxy maps it to a node id).
    proxy: Rule | None = None

    def describe(self) -> str:
        if self.proxy is not None:
            p = self.proxy.to_dict()
            what = f" with {p['error']}" if p.get("error") else ""
            src = f" from {self.target.describe()}" if self.target else f" from {p['from']}" if p.get("from") else ""
            nth = f"#{p['nth']}" + ("+" if p.get("every") else "")
            return f"proxy {p['action']} {p['direction']} {nth} of {p['api']}{src}{what}"
        where = f" at {self.at}" + (f" (#{self.occurrence})" if self.occurrence != 1 else "") if self.at else ""
        return f"{self.action} {self.target.describe()}{where}"


@dataclass(frozen=True)
class Until:
    """A repeat block's stop condition: the outcome of one of its steps matches `expect`."""

    step: str
    expect: "Expect"


@dataclass(frozen=True)
class Step:
    """One line of `steps`. Exactly one of: an actor op, a wait, a fault, an await, a repeat."""

    index: int
    kind: str  # "op", "wait", "fault", "await", "wait_fault", "repeat"
    actor: str | None = None
    op: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    expect: Expect = field(default_factory=Expect)
    id: str | None = None
    background: bool = False
    deadline_ms: int | None = None
    wait_ms: int = 0
    fault: FaultDef | None = None
    awaits: str | None = None
    timeout_ms: int | None = None
    note: str | None = None
    #: Only in runs of these clients (empty: every run); a step of the other runs is skipped.
    clients: tuple[str, ...] = ()
    #: After an ok op: name -> path into its data; "${name}" is that value in later steps.
    capture: dict[str, str] = field(default_factory=dict)
    #: A raw request's node, by role (None: the first live node).
    broker: NodeRef | None = None
    #: kind "repeat": the steps, run `times` times -- or, with `until`, until that holds, at
    #: most `times` times (then the repeat's check fails).
    body: tuple["Step", ...] = ()
    times: int = 0
    until: Until | None = None
    #: Where the step sits in the file ("3", or "3.1" inside a repeat): records and checks say it.
    label: str = ""

    def runs_for(self, client: str | None) -> bool:
        return not self.clients or client in self.clients

    def describe(self) -> str:
        if self.kind == "repeat":
            bound = f"until {self.until.step} is {self.until.expect.describe()}, at most {self.times} times" \
                if self.until else f"{self.times} times"
            return f"repeat {len(self.body)} step(s) {bound}"
        if self.kind == "op":
            return f"{self.actor}.{self.op}"
        if self.kind == "wait":
            return f"wait {self.wait_ms} ms"
        if self.kind == "fault":
            return f"fault: {self.fault.describe()}"
        if self.kind == "wait_fault":
            return "wait for the armed fault to fire"
        return f"await {self.awaits}"


@dataclass(frozen=True)
class CheckDef:
    kind: str
    params: dict[str, Any]
    name: str
    #: Only with these clients (empty: every client): what Kafka leaves behind can depend on the
    #: client's own reaction (an abortable error lets a next transaction commit, a fatal one not).
    clients: tuple[str, ...] = ()

    def applies_to(self, client: str | None) -> bool:
        return not self.clients or client in self.clients

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class ObserveDef:
    """What the runner reads at the end of the case (the `reads` of the outcome)."""

    topics: tuple[str, ...] | None = None  # None: every topic of the topology
    isolation: tuple[str, ...] = ("read_committed", "read_uncommitted")
    groups: tuple[str, ...] = ()  # committed offsets to read for these groups
    timeout_ms: int = 10_000


@dataclass(frozen=True)
class Case:
    id: str
    title: str
    path: str
    tags: tuple[str, ...] = ()
    scenario: tuple[str, ...] = ()
    description: str = ""
    topology: TopologyDef = field(default_factory=TopologyDef)
    actors: dict[str, ActorDef] = field(default_factory=dict)
    steps: tuple[Step, ...] = ()
    checks: tuple[CheckDef, ...] = ()
    observe: ObserveDef = field(default_factory=ObserveDef)
    requires: tuple[str, ...] = ()
    #: target name -> known difference the case documents (shown in the result, not a pass).
    known_differences: dict[str, str] = field(default_factory=dict)
    #: A generative workload instead of steps (dsl/workload.py): many clients at once under a
    #: fault schedule, checked for anomalies in the recorded history.
    workload: "WorkloadDef | None" = None

    # --------------------------------------------------------------- derived needs
    def all_steps(self) -> list[Step]:
        """Every step, those inside repeat blocks included, in file order."""
        out: list[Step] = []

        def walk(steps) -> None:
            for s in steps:
                out.append(s)
                walk(s.body)
        walk(self.steps)
        return out

    def faults(self) -> list[FaultDef]:
        """Every fault the case describes: its fault steps, and a workload's schedule."""
        steps = [s.fault for s in self.all_steps() if s.kind == "fault"]
        return steps + (self.workload.faults() if self.workload is not None else [])

    def node_faults(self) -> list[FaultDef]:
        """The faults done to nodes (right away or at a protocol point), not by the proxy."""
        return [f for f in self.faults() if f.proxy is None]

    def needs_proxy(self) -> bool:
        """Proxy rules, transcript checks (the proxy records what crossed the wire), and
        workloads (their error-code profile is counted on the wire)."""
        return (self.workload is not None or any(f.proxy is not None for f in self.faults())
                or any(c.kind == "transcript" for c in self.checks))

    def needs_broker_traffic(self) -> bool:
        """Whether a proxy rule of the case acts on broker-to-broker traffic (replica fetches,
        WriteTxnMarkers): the brokers must then reach each other through the proxy."""
        return any(f.proxy is not None and f.proxy.on_broker_traffic() for f in self.faults())

    def protocol_points(self) -> list[FaultDef]:
        return [f for f in self.faults() if f.at]

    def needed_capabilities(self) -> set[str]:
        """Target capabilities (targets/base.CAPABILITIES) the case cannot run without."""
        caps = set(self.requires)
        for f in self.faults():
            if f.proxy is not None:
                continue
            if f.at:
                caps.add("fault_points")
                if self.workload is not None:
                    caps.add("restart")  # the nemesis starts a node that ended itself at a point again
            caps.add(NODE_ACTIONS[f.action])
        if self.topology.nodes > 1:
            caps.add("multi_node")
        if self.topology.controller == "dedicated":
            caps.add("dedicated_controller")
        return caps

    def pinned_clients(self) -> set[str]:
        pinned = {a.client for a in self.actors.values() if a.client}
        return pinned | (self.workload.clients() if self.workload is not None else set())
