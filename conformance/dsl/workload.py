"""The `workload:` section of a case: a generative exactly-once workload (Jepsen's method).

Why a second kind of case: a step list replays what its author thought of, one call after the
other. A workload runs many clients at once -- plain, idempotent and transactional producers,
consume-transform-produce members of consumer groups, read_committed and read_uncommitted
readers -- while a fault schedule kills, pauses and restarts nodes and clients and delays or
severs frames; every call and its answer is kept as a history, and a checker looks for named
anomalies in it (conformance/history). Faults and their words are the case language's own
(`FaultDef`, conformance/vocabulary), so a workload means the same on every target.

Replaying a seed: everything random about a workload is drawn from its `seed` -- the workers,
each worker's program (which partitions, how many records per transaction, commit or abort,
how long a transaction stays open) and the fault schedule (`workload_gen`). The interleaving
with real time is not: a seed replays the same plan, and anomalies that depend on a race show
up in some runs of it. A shrunk seed is saved with its workers and schedule written out, so it
replays without the generator's knobs.

YAML (cases/README.md, "Workloads"):

    workload:
      seed: 7
      time_limit_s: 60            # the workers stop issuing operations after this long ...
      op_limit: 3000              # ... or after this many completed operations, whichever first
      generate: {transactional: 3, idempotent: 2, copiers: 3, readers: 2, faults: [kill, proxy]}
      workers:                    # explicit workers (replace the generated ones)
        - {name: t1, kind: transactional, topics: [data], txn_records: [1, 8], abort_ratio: 0.2}
      schedule:                   # explicit faults (replace the generated schedule)
        - {at_s: 5, fault: {crash: leader, of: data/0}}
        - {at_s: 9, fault: {restart: leader, of: data/0}}
        - {at_s: 12, crash: t1}                      # a client fault: kill -9 the worker's driver
        - {at_s: 14, fault: {proxy: delay, api: EndTxn, direction: response, every: true, delay_ms: 700},
           for_s: 4}                                 # a proxy rule, removed after for_s
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from ..clients.registry import CLIENTS
from .model import FaultDef

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


# ----------------------------------------------------------------------------- YAML
WORKLOAD_KEYS = {"seed", "time_limit_s", "op_limit", "generate", "workers", "schedule", "settle_s", "generator"}
WORKER_KEYS = {"name", "kind", "client", "topics", "to", "group", "config", "ops", "records", "abort_ratio",
               "hold_ms", "pause_ms", "start_s", "stop_s"}
SCHEDULE_KEYS = {"at_s", "fault", "for_s", "down_s", *WORKER_ACTIONS}
#: The largest bounds a workload may ask for (a soak is many seeds, not one endless row).
MAX_TIME_LIMIT_S = 3600
MAX_OP_LIMIT = 1_000_000


def parse_workload(v, raw: Any, topics: dict[str, int], parse_fault: Callable[[Any, str], FaultDef],
                   generate: Callable[..., tuple[tuple[WorkerDef, ...], tuple[ScheduledFault, ...]]],
                   nodes: int) -> WorkloadDef:
    """Validate a `workload:` mapping (`v` is the loader's validator: errors name the file, the
    field and what was expected). `generate(seed, knobs, topics, nodes)` fills in what the
    section leaves to the seed."""
    raw = v.mapping(raw, "workload", WORKLOAD_KEYS, {"seed"})
    seed = v.integer(raw["seed"], "workload.seed", 0)
    time_limit = _number(v, raw.get("time_limit_s", 60), "workload.time_limit_s", 1, MAX_TIME_LIMIT_S)
    op_limit = v.integer(raw.get("op_limit", 5000), "workload.op_limit", 1)
    if op_limit > MAX_OP_LIMIT:
        v.fail("workload.op_limit", f"at most {MAX_OP_LIMIT}", op_limit)
    settle = _number(v, raw.get("settle_s", 90), "workload.settle_s", 5, 1800)
    generator = v.integer(raw.get("generator", GENERATOR_VERSION), "workload.generator", 1)
    if generator != GENERATOR_VERSION:
        v.fail("workload.generator", f"{GENERATOR_VERSION} (this kconform's generator; a seed of another "
                                     "generator does not replay the same plan)", generator)
    knobs = v.mapping(raw.get("generate") or {}, "workload.generate")
    if "workers" not in raw and "generate" not in raw:
        v.fail("workload", "`generate:` (knobs the seed expands) or an explicit `workers:` list")
    gen_workers: tuple[WorkerDef, ...] = ()
    gen_schedule: tuple[ScheduledFault, ...] = ()
    if "generate" in raw:
        gen_workers, gen_schedule = generate(v, seed, knobs, topics, nodes, time_limit, op_limit)
    workers = gen_workers
    if "workers" in raw:
        items = raw["workers"]
        if not isinstance(items, list) or not items:
            v.fail("workload.workers", "a non-empty list of workers", items)
        workers = tuple(_worker(v, w, f"workload.workers[{i}]", topics) for i, w in enumerate(items))
    names = [w.name for w in workers]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        v.fail("workload.workers", "worker names used once each", dup)
    schedule = gen_schedule
    if "schedule" in raw:
        items = raw["schedule"]
        if not isinstance(items, list):
            v.fail("workload.schedule", "a list of {at_s, fault | crash | restart}", items)
        schedule = tuple(_scheduled(v, s, f"workload.schedule[{i}]", set(names), parse_fault, time_limit)
                         for i, s in enumerate(items))
    return WorkloadDef(seed=seed, time_limit_s=time_limit, op_limit=op_limit, workers=workers,
                       schedule=tuple(sorted(schedule, key=lambda s: s.at_s)), settle_s=settle,
                       generate=dict(knobs), generator=generator)


def _number(v, x: Any, path: str, low: float, high: float) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not low <= x <= high:
        v.fail(path, f"a number from {low:g} to {high:g}", x)
    return float(x)


def _pair(v, x: Any, path: str, low: int = 0) -> tuple[int, int]:
    if isinstance(x, int) and not isinstance(x, bool):
        x = [x, x]
    if (not isinstance(x, list) or len(x) != 2 or any(isinstance(n, bool) or not isinstance(n, int) for n in x)
            or x[0] < low or x[1] < x[0]):
        v.fail(path, f"[min, max] integers with {low} <= min <= max (or one integer)", x)
    return int(x[0]), int(x[1])


def _worker(v, raw: Any, path: str, topics: dict[str, int]) -> WorkerDef:
    raw = v.mapping(raw, path, WORKER_KEYS, {"name", "kind"})
    name = v.string(raw["name"], f"{path}.name")
    kind = v.string(raw["kind"], f"{path}.kind", WORKER_KINDS)
    client = raw.get("client")
    if client is not None:
        v.string(client, f"{path}.client", sorted(CLIENTS))
    ts = v.strings(raw.get("topics") or [], f"{path}.topics")
    if not ts:
        v.fail(f"{path}.topics", "the topics this worker writes, consumes or reads (at least one)")
    for j, t in enumerate(ts):
        if t not in topics:
            v.fail(f"{path}.topics[{j}]", f"a topic of topology.topics {sorted(topics)}", t)
    to = raw.get("to")
    group = raw.get("group")
    if kind == "copier":
        to = v.string(to, f"{path}.to")
        if to not in topics:
            v.fail(f"{path}.to", f"a topic of topology.topics {sorted(topics)}", to)
        if to in ts:
            v.fail(f"{path}.to", "an output topic that is not one of the copier's inputs", to)
        group = v.string(group if group is not None else "etl", f"{path}.group")
    else:
        if to is not None:
            v.fail(f"{path}.to", "an output topic only on copier workers", to)
        if group is not None:
            v.fail(f"{path}.group", "a group only on copier workers (readers read by assignment)", group)
    config = v.config_map(raw.get("config") or {}, f"{path}.config")
    if kind == "reader" and config.get("isolation.level", "read_committed") not in ("read_committed",
                                                                                      "read_uncommitted"):
        v.fail(f"{path}.config.isolation.level", "read_committed or read_uncommitted", config["isolation.level"])
    if kind in ("producer", "idempotent") and "transactional.id" in config:
        v.fail(f"{path}.config.transactional.id", f"no transactional.id on a {kind} worker (kind: transactional)")
    abort = _number(v, raw.get("abort_ratio", 0.1), f"{path}.abort_ratio", 0, 1)
    start = _number(v, raw.get("start_s", 0), f"{path}.start_s", 0, MAX_TIME_LIMIT_S)
    stop = raw.get("stop_s")
    if stop is not None:
        stop = _number(v, stop, f"{path}.stop_s", 0, MAX_TIME_LIMIT_S)
        if stop <= start:
            v.fail(f"{path}.stop_s", f"a time after start_s ({start:g})", stop)
    return WorkerDef(
        name=name, kind=kind, client=client, topics=ts, to=to, group=group, config=config,
        ops=v.integer(raw.get("ops", 200), f"{path}.ops", 1),
        records=_pair(v, raw.get("records", [1, 8]), f"{path}.records", 1),
        abort_ratio=abort,
        hold_ms=_pair(v, raw.get("hold_ms", [0, 0]), f"{path}.hold_ms"),
        pause_ms=_pair(v, raw.get("pause_ms", [0, 100]), f"{path}.pause_ms"),
        start_s=start, stop_s=stop,
    )


def _scheduled(v, raw: Any, path: str, workers: set[str], parse_fault, time_limit: float) -> ScheduledFault:
    raw = v.mapping(raw, path, SCHEDULE_KEYS, {"at_s"})
    at = _number(v, raw["at_s"], f"{path}.at_s", 0, MAX_TIME_LIMIT_S)
    kinds = [k for k in ("fault", *WORKER_ACTIONS) if k in raw]
    if len(kinds) != 1:
        v.fail(path, "exactly one of `fault:` (a node or proxy fault) or `crash:`/`restart:` a worker", sorted(raw))
    for_s = raw.get("for_s")
    if for_s is not None:
        for_s = _number(v, for_s, f"{path}.for_s", 0, MAX_TIME_LIMIT_S)
    down = _number(v, raw.get("down_s", 1.0), f"{path}.down_s", 0, 600)
    if kinds[0] == "fault":
        fault = parse_fault(raw["fault"], f"{path}.fault")
        if for_s is not None and fault.proxy is None:
            v.fail(f"{path}.for_s", "for_s only on proxy faults (a node fault is undone by a later entry: "
                                    "restart, resume)", for_s)
        if fault.action in ("hold", "release"):
            v.fail(f"{path}.fault", "crash, pause, resume, restart, stop or a proxy rule (hold/release need a "
                                    "step that waits for them)", fault.action)
        return ScheduledFault(at_s=at, fault=fault, for_s=for_s)
    action = kinds[0]
    name = v.string(raw[action], f"{path}.{action}")
    if name not in workers:
        v.fail(f"{path}.{action}", f"a worker name {sorted(workers)}", name)
    if for_s is not None:
        v.fail(f"{path}.for_s", "for_s only on proxy faults", for_s)
    return ScheduledFault(at_s=at, worker_action=action, worker=name, down_s=down)


# ----------------------------------------------------------------------------- back to YAML
def workload_to_yaml(w: WorkloadDef) -> dict[str, Any]:
    """The section with its workers and schedule written out (a shrunk seed replays from this
    alone, whatever the generator's knobs become)."""
    out: dict[str, Any] = {"seed": w.seed, "time_limit_s": w.time_limit_s, "op_limit": w.op_limit,
                           "settle_s": w.settle_s, "generator": w.generator, "workers": [], "schedule": []}
    defaults = WorkerDef(name="", kind="producer")
    for wk in w.workers:
        d: dict[str, Any] = {"name": wk.name, "kind": wk.kind}
        for key in ("client", "topics", "to", "group", "config", "ops", "records", "abort_ratio", "hold_ms",
                    "pause_ms", "start_s", "stop_s"):
            value = getattr(wk, key)
            if value != getattr(defaults, key) or key == "topics":
                d[key] = list(value) if isinstance(value, tuple) else value
        out["workers"].append(d)
    for s in w.schedule:
        entry: dict[str, Any] = {"at_s": round(s.at_s, 3)}
        if s.fault is not None:
            entry["fault"] = fault_to_yaml(s.fault)
            if s.for_s is not None:
                entry["for_s"] = round(s.for_s, 3)
        else:
            entry[s.worker_action] = s.worker
            if s.worker_action == "crash":
                entry["down_s"] = round(s.down_s, 3)
        out["schedule"].append(entry)
    return out


def fault_to_yaml(f: FaultDef) -> dict[str, Any]:
    """A FaultDef in the case language's spelling (the loader reads it back to the same)."""
    if f.proxy is not None:
        rule = f.proxy.to_dict()
        action = rule.pop("action")
        if rule.get("nth") == 1:
            rule.pop("nth")
        if rule.get("direction") == "request":
            rule.pop("direction")
        out: dict[str, Any] = {"proxy": action, **rule}
        if f.target is not None:
            out["from"] = f.target.role
            out["of"] = f.target.of
        return out
    out = {f.action: f.target.role}
    if f.target.of is not None:
        out["of"] = f.target.of
    if f.target.node is not None:
        out["node"] = f.target.node
    if f.at:
        out["at"] = f.at
        if f.occurrence != 1:
            out["occurrence"] = f.occurrence
    return out
