"""The in-memory form of a conformance case, after validation.

Why plain dataclasses: the runner, the pytest plugin and the reports read the same objects, and a
case that loaded is known to be well-formed, so nothing downstream re-checks types. The YAML form
(documented in cases/README.md) maps one to one onto these classes; `loader.py` does the mapping
and says FILE, FIELD path and WHAT WAS EXPECTED when a file is wrong.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..clients.protocol import OPS
from ..proxy.rules import Rule
from ..targets.topology import TopicSpec
from ..vocabulary import BROKER_WIDE_NAMES, NODE_ACTIONS


#: The config APIs whose changes to a broker resource are seen by every row (changes_broker_wide_state),
#: and Kafka's ConfigResource types of those resources: BROKER (4), BROKER_LOGGER (8).
BROKER_CONFIG_APIS = frozenset({"IncrementalAlterConfigs", "AlterConfigs"})
BROKER_RESOURCE_TYPES = frozenset({4, 8})

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
    # A run over SASL only: AlterUserScramCredentials gives the run's user a new random password
    # (`password: new`) or its own back (`password: original`). Only this op knows the new one:
    # drivers and raw requests keep logging in with the run's, so a new connection is refused.
    "change_run_password": frozenset({"password", "broker"}),
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
        does not specify one for that client. A client at a chosen release (``java@3.1.2``) takes
        its own entry, else its client's (``java``), else `default`."""
        if not self.per_client:
            return self
        found = self.per_client.get(client) if client else None
        if found is None and client:
            found = self.per_client.get(client_of(client))
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
        return client_listed(client, self.clients)

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


def client_of(client: str) -> str:
    """The client a client at a chosen release is of: ``java@3.1.2`` -> ``java``; a plain name itself."""
    return client.split("@", 1)[0]


def client_listed(client: str | None, clients: tuple[str, ...]) -> bool:
    """Whether a step or check limited to `clients` (empty: every client) runs with `client`: a
    listed name covers that client at every release (``java`` covers ``java@3.1.2``)."""
    return not clients or client in clients or (client is not None and client_of(client) in clients)


@dataclass(frozen=True)
class CheckDef:
    kind: str
    params: dict[str, Any]
    name: str
    #: Only with these clients (empty: every client): what Kafka leaves behind can depend on the
    #: client's own reaction (an abortable error lets a next transaction commit, a fatal one not).
    clients: tuple[str, ...] = ()

    def applies_to(self, client: str | None) -> bool:
        return client_listed(client, self.clients)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class ObserveDef:
    """What the runner reads at the end of the case (the `reads` of the outcome)."""

    topics: tuple[str, ...] | None = None  # None: every topic of the topology
    isolation: tuple[str, ...] = ("read_committed", "read_uncommitted")
    groups: tuple[str, ...] = ()  # committed offsets to read for these groups
    timeout_ms: int = 10_000


# ----------------------------------------------------------------------------- workloads
# The `workload:` section (dsl/workload.py reads it, dsl/workload_gen.py expands its seed).
#: What a worker does (docs/workload.md):
#: producer -- plain acks=all sends, idempotence off; idempotent -- enable.idempotence=true;
#: transactional -- begin, sends, commit or abort; copier -- consume-transform-produce in a
#: consumer group, offsets committed in the transaction; reader -- polls assigned partitions
#: (isolation.level from its config, read_committed by default).
WORKER_KINDS = ("producer", "idempotent", "transactional", "copier", "reader")
#: Client faults a schedule entry may name: kill -9 the worker's driver (the worker starts a
#: new process after `down_s`), or close it cleanly and start again.
WORKER_ACTIONS = ("crash", "restart")
#: Consumer group assignors a copier group may use (driver spelling, Java's short names).
ASSIGNORS = ("range", "cooperative-sticky")
#: Version of the generator: a seed replays the same plan only with the same generator.
GENERATOR_VERSION = 1


@dataclass(frozen=True)
class WorkerDef:
    """One worker: a client process (restarted after crashes) running one kind of loop."""

    name: str
    kind: str
    #: None: the row's client; else pinned (a mixed workload pins each worker).
    client: str | None = None
    #: Producers: the topics written; copiers: the input topics; readers: the topics read.
    topics: tuple[str, ...] = ()
    #: Copiers: the output topic.
    to: str | None = None
    #: Copiers: the consumer group (its members share it); readers read by assignment.
    group: str | None = None
    #: Extra client config, Java property names (acks, transaction.timeout.ms, ...).
    config: dict[str, str] = field(default_factory=dict)
    #: At most this many operations (producers: records sent; transactional workers and
    #: copiers: transactions; readers: polls).
    ops: int = 200
    #: Records per send batch (producers) or transaction: [min, max].
    records: tuple[int, int] = (1, 8)
    #: A transaction is ended with an abort with this probability.
    abort_ratio: float = 0.1
    #: A transaction stays open [min, max] ms after its records are flushed (overlaps others).
    hold_ms: tuple[int, int] = (0, 0)
    #: Think time between two operations: [min, max] ms.
    pause_ms: tuple[int, int] = (0, 100)
    #: The worker starts this long after the workload and leaves (closes cleanly) at `stop_s`.
    start_s: float = 0.0
    stop_s: float | None = None

    @property
    def transactional_id(self) -> str | None:
        if self.kind in ("transactional", "copier"):
            return self.config.get("transactional.id", f"txn-{self.name}")
        return None

    @property
    def isolation(self) -> str:
        return self.config.get("isolation.level", "read_committed")


@dataclass(frozen=True)
class ScheduledFault:
    """One entry of the fault schedule: at `at_s` seconds into the workload, a node or proxy
    fault (`fault`, the case language's) or a client fault (`worker_action` on `worker`)."""

    at_s: float
    fault: FaultDef | None = None
    worker_action: str | None = None
    worker: str | None = None
    #: Proxy rules: removed again after this many seconds (None: until the workload ends).
    for_s: float | None = None
    #: Client crashes: the worker starts its new process after this many seconds.
    down_s: float = 1.0

    def describe(self) -> str:
        if self.fault is not None:
            lasting = f" for {self.for_s:g} s" if self.for_s is not None else ""
            return f"{self.fault.describe()}{lasting}"
        return f"{self.worker_action} worker {self.worker}"


@dataclass(frozen=True)
class WorkloadDef:
    seed: int
    time_limit_s: float
    op_limit: int
    workers: tuple[WorkerDef, ...]
    schedule: tuple[ScheduledFault, ...] = ()
    #: How long the end phase may take (heal, copiers drain, open transactions end).
    settle_s: float = 90.0
    #: The generator's knobs this workload came from (empty: written out by hand / shrunk).
    generate: dict[str, Any] = field(default_factory=dict)
    generator: int = GENERATOR_VERSION

    def worker(self, name: str) -> WorkerDef:
        for w in self.workers:
            if w.name == name:
                return w
        raise KeyError(name)

    def faults(self) -> list[FaultDef]:
        return [s.fault for s in self.schedule if s.fault is not None]

    def groups(self) -> list[str]:
        return sorted({w.group for w in self.workers if w.kind == "copier" and w.group})

    def clients(self) -> set[str]:
        return {w.client for w in self.workers if w.client}

    def with_seed(self, seed: int) -> "WorkloadDef":
        return replace(self, seed=seed)



@dataclass(frozen=True)
class RegressionDef:
    """A published bug the case reproduces (cases/regressions/): it fails on the releases that
    shipped the bug and passes on those that fixed it."""

    #: The bug's key: KAFKA-12671, librdkafka#3041, franz-go#131, ...
    key: str
    #: Whose bug: broker (Apache Kafka's broker) or a client's name (java, confluent, ...).
    component: str
    #: The releases that shipped it, as published ("<= 3.5.2", "4.0.0 - 4.3.1").
    affected: str
    #: The first releases with the fix, as published ("3.6.0", "3.7.1, 3.8.0"); "" when none yet.
    fixed: str
    #: One line: what goes wrong.
    summary: str


# ----------------------------------------------------------------------------- applications
#: What a transactions_test cell bounces, and how (transactions_test.py's matrix; a
#: streams_broker_bounce cell's failure_mode too).
BOUNCE_TARGETS = ("brokers", "clients", "none")
FAILURE_MODES = ("clean_bounce", "hard_bounce")
#: A leader chase's (ApplicationRun.chase_leader) besides: the leader paused (SIGSTOP) for
#: `down_s`, resumed (SIGCONT) -- a frozen broker (a long GC pause, a stalled VM) that the
#: controller fences meanwhile and that wakes up believing it still leads.
CHASE_FAILURE_MODES = FAILURE_MODES + ("pause",)


#: Kafka Streams' processing.guarantee values StreamsSmokeTest accepts.
PROCESSING_GUARANTEES = ("exactly_once_v2", "at_least_once")

#: The applications a case may run (conformance/apps/: one module each).
APPLICATIONS = ("transactions_test", "streams_smoke", "streams_broker_bounce", "connect_eos_source", "flink_eos")
#: An application row's client: the applications run Kafka's Java client (kafka-tools, Kafka
#: Streams, Kafka Connect).
APPLICATION_CLIENT = "java"
#: The `application:` keys of each kind (besides `kind`); a key of another kind is an error.
KIND_KEYS = {"transactions_test": frozenset({
                 "bounce_target", "failure_mode", "use_group_metadata", "check_order", "messages", "input_partitions",
                 "output_partitions", "transaction_size", "transaction_timeout_ms", "bounce_after_s", "down_s",
                 "bounce_rounds", "progress_percent", "copy_timeout_s"}),
             "streams_smoke": frozenset({"processing_guarantee", "crash"}),
             "streams_broker_bounce": frozenset({"processing_guarantee", "failure_mode", "bounce_after_s", "down_s",
                                                 "bounces"}),
             "connect_eos_source": frozenset({"lines", "write_s", "kills", "kill_every", "bounce_target",
                                              "failure_mode", "bounces", "down_s"}),
             "flink_eos": frozenset({"records", "record_delay_ms", "bounce_target", "failure_mode", "bounces",
                                     "down_s"})}


@dataclass(frozen=True)
class ApplicationDef:
    """The `application:` section: a real application instead of steps (conformance/apps,
    docs/applications.md). `kind` transactions_test: Kafka's transactions system test, one cell
    of its matrix (bounce_target x failure_mode x use_group_metadata x check_order); `kind`
    streams_smoke: Kafka Streams' smoke system test, one cell (processing_guarantee x crash);
    `kind` streams_broker_bounce: Kafka Streams' broker bounce system test, one cell (the leader
    of `data`'s partition 0 chased `bounces` times, cleanly or hard, while the smoke test runs);
    `kind` connect_eos_source: a Connect worker with exactly-once source support, killed while
    it copies a file; `kind` flink_eos: a Flink job (KafkaSource -> KafkaSink EXACTLY_ONCE), a
    task failure, then the job killed and restored from its last checkpoint -- or, with
    `bounce_target: brokers`, the job left alone while the leader of its output is chased."""

    kind: str
    #: streams_smoke: the processors' processing.guarantee, and whether the first two are killed
    #: (SIGKILL) rather than stopped (SIGTERM) while the driver's data flows.
    processing_guarantee: str = "exactly_once_v2"
    crash: bool = True
    #: connect_eos_source: lines written to the source file over `write_s` seconds, and the worker
    #: killed `kills` times, each after another `kill_every` records reached the output; with
    #: `bounce_target: brokers`, the leader of the output's partition chased `bounces` times too.
    lines: int = 20_000
    write_s: float = 30.0
    kills: int = 3
    kill_every: int = 4_000
    #: flink_eos: records seeded into the job's input, and how long its map takes per record (so
    #: that the task failure and the kill, or the bounces, land while the job copies).
    records: int = 6_000
    record_delay_ms: int = 5
    bounce_target: str = "none"
    failure_mode: str = "hard_bounce"
    use_group_metadata: bool = True
    check_order: bool = False
    #: Seed messages (with check_order a third of the section's value, as the test does).
    messages: int = 100_000
    input_partitions: int = 2
    output_partitions: int = 3
    transaction_size: int = 750
    transaction_timeout_ms: int = 40_000
    #: Broker bounces: seconds after the copiers (streams_broker_bounce: the processor) started
    #: that the first one begins, and how long a killed broker stays down (ducktape: 23 s, which
    #: outlasts the copy; module doc of apps/transactions.py).
    bounce_after_s: float = 1.0
    down_s: float = 3.0
    #: streams_broker_bounce: how many times the leader is chased (streams_broker_bounce_test: 5).
    bounces: int = 5
    #: Client bounces: rounds over the copiers, and the progress each makes before its restart.
    bounce_rounds: int = 3
    progress_percent: float = 20.0
    copy_timeout_s: float = 300.0

    def node_actions(self) -> set[str]:
        """Target capabilities the bounces use."""
        if self.bounce_target != "brokers" and self.kind != "streams_broker_bounce":
            return set()
        if self.failure_mode == "pause":
            return {"pause"}
        return {"restart", "stop_node" if self.failure_mode == "clean_bounce" else "kill"}


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
    workload: WorkloadDef | None = None
    #: A real application instead of steps (conformance/apps): it verifies exactly-once itself.
    application: ApplicationDef | None = None
    #: The published bug this case reproduces (a regression case), when it is one.
    regression: RegressionDef | None = None
    #: A Kafka bug (KAFKA-NNNNN) that makes Apache Kafka fail this case: the expectations are what
    #: the KIP and the fix specify, and an apache-kafka row that fails is that bug, not a finding
    #: about the other targets.
    known_reference_bug: str | None = None

    def reference_bug(self) -> str | None:
        """The Kafka bug an apache-kafka row of this case that fails is: `known_reference_bug`,
        or the key of a broker regression."""
        if self.known_reference_bug:
            return self.known_reference_bug
        if self.regression is not None and self.regression.component == "broker":
            return self.regression.key
        return None

    def not_for_client(self, client: str) -> str | None:
        """Why the case does not run with `client` (None: it does): a regression of a client's
        bug runs with that client and its releases only (``--client java@3.1.2`` picks the
        release, as ``--target apache-kafka@3.5.2`` picks a broker's)."""
        reg = self.regression
        if reg is None or reg.component == "broker" or client_of(client) == reg.component:
            return None
        return (f"{reg.key} is a bug of the {reg.component} client: the case runs with {reg.component} "
                f"and its releases ({reg.component}@VERSION), not with {client}")

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
        workloads and applications (their error-code profile is counted on the wire)."""
        return (self.workload is not None or self.application is not None
                or any(f.proxy is not None for f in self.faults())
                or any(c.kind == "transcript" for c in self.checks))

    def changes_broker_wide_state(self) -> bool:
        """Whether a raw request of the case changes what every row on the same instance sees:
        CreateAcls binding a resource every row shares (the wildcard topic or group `*`, the
        cluster `kafka-cluster`: names the runner never makes unique), or a config change of a
        broker resource (IncrementalAlterConfigs / AlterConfigs on BROKER or BROKER_LOGGER: the
        cluster-wide defaults every topic without its own value follows). Such a change would
        decide other rows' outcomes on the same instance -- at once, and after the case ended
        (a case that fails before its own undo leaves it) -- so the case runs on an instance of
        its own that is not kept."""
        for s in self.all_steps():
            if s.kind != "op" or s.actor != "raw":
                continue
            api, body = s.args.get("api"), s.args.get("body") or {}
            if api == "CreateAcls" and any(isinstance(c, dict) and c.get("resource_name") in BROKER_WIDE_NAMES
                                           for c in body.get("creations") or ()):
                return True
            if api in BROKER_CONFIG_APIS and not body.get("validate_only") and any(
                    isinstance(r, dict) and r.get("resource_type") in BROKER_RESOURCE_TYPES
                    for r in body.get("resources") or ()):
                return True
        return False

    def needs_broker_traffic(self) -> bool:
        """Whether a proxy rule of the case acts on broker-to-broker traffic (replica fetches,
        WriteTxnMarkers): the brokers must then reach each other through the proxy."""
        return any(f.proxy is not None and f.proxy.on_broker_traffic() for f in self.faults())

    def protocol_points(self) -> list[FaultDef]:
        return [f for f in self.faults() if f.at]

    def needed_capabilities(self) -> set[str]:
        """Target capabilities (targets/base.CAPABILITIES) the case cannot run without."""
        caps = set(self.requires)
        if self.application is not None:
            caps |= self.application.node_actions()
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
