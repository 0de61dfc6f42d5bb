"""Expand a workload's `generate:` knobs and its seed into workers and a fault schedule.

Why generated: hand-written cases find what their authors thought of. Here the seed decides
how many records each transaction holds, which transactions overlap on a partition, which
member joins a group late, and which node dies when -- so a run of many seeds tries
combinations no author listed (docs/workload.md). The expansion is a pure function of
(seed, knobs, topics, nodes, bounds): `random.Random(seed)` drawn in a fixed order, so a seed
means the same plan on every target and in every run (GENERATOR_VERSION says which expansion).

Knobs (all optional):

    producers: 1          # plain acks=all producers, idempotence off      (topics: data, in)
    idempotent: 2         # enable.idempotence=true                        (topics: data, in)
    transactional: 3      # transactions, commit or abort                  (topics: data, in)
    copiers: 3            # consume-transform-produce members of group etl (in -> out)
    readers: 2            # alternately read_committed and read_uncommitted readers of every topic
    clients: [confluent, java]    # pin workers to these clients, round-robin (default: the row's)
    faults: [kill, pause, stop, proxy, client]   # kinds the schedule draws from (`points`: the
                          # coordinator crashed at a protocol point, embedded broker only)
    fault_gap_s: [3, 8]   # time between two faults' starts
    assignor: any         # copier group: range | cooperative-sticky | any (drawn) -- with `clients`
                          # (a mixed group: what all its clients support); without, every copier
                          # runs the row's client with that client's default assignor
    static_members: any   # copiers with group.instance.id: true | false | any (drawn), with `clients`
    records: [1, 8]       # records per transaction / per producer batch
    abort_ratio: 0.15
    long_transactions: 0.5  # share of transactional workers whose transactions stay open hold_ms
    hold_ms: [300, 2500]  # how long those transactions stay open after their records are written
    copier_members: auto  # auto: a client that cannot copy exactly once across rebalances (ClientSpec
                          # feature eos_rebalance) keeps one copier per group; all: every copier runs
    churn: true           # copiers join late and leave early
    pause_ms: [0, 200]    # the producers' think time between operations (default 0-150 ms, 0-200 for
                          # transactional ones): long pauses let producer state expire
                          # (producer.id.expiration.ms in topology.broker_configs)
"""
from __future__ import annotations

import random
from typing import Any

from ..clients.driver import JAVA_ASSIGNORS
from ..clients.registry import CLIENTS
from ..proxy.rules import Rule
from ..vocabulary import PROTOCOL_POINTS
from .model import ASSIGNORS, FaultDef, NodeRef, ScheduledFault, WorkerDef

FAULT_KINDS = ("kill", "pause", "stop", "proxy", "client", "points")
KNOBS = {"producers", "idempotent", "transactional", "copiers", "readers", "clients", "faults", "fault_gap_s",
         "assignor", "static_members", "records", "abort_ratio", "long_transactions", "churn", "pause_ms", "hold_ms", "copier_members"}
DEFAULTS: dict[str, Any] = {"producers": 1, "idempotent": 2, "transactional": 3, "copiers": 3, "readers": 2,
                            "faults": ["kill", "pause", "proxy", "client"], "fault_gap_s": [3, 8],
                            "assignor": "any", "static_members": "any", "records": [1, 8],
                            "abort_ratio": 0.15, "long_transactions": 0.5, "churn": True, "pause_ms": None, "copier_members": "auto",
                            "hold_ms": [300, 2500]}
#: The topics a generated workload uses, by role: what producers write and readers read, the
#: copiers' input and output.
DATA, INPUT, OUTPUT = "data", "in", "out"
#: Requests whose frames a proxy fault delays, drops or severs, by what they carry.
PROXY_APIS = ("Produce", "Fetch", "EndTxn", "AddPartitionsToTxn", "AddOffsetsToTxn", "TxnOffsetCommit",
              "InitProducerId", "FindCoordinator", "Metadata", "JoinGroup", "SyncGroup", "Heartbeat",
              "OffsetFetch", "ListOffsets")
#: Features a client must have for a copier group setting (ClientSpec.features).
ASSIGNOR_FEATURE = {"range": "range_assignor", "cooperative-sticky": "cooperative_rebalance"}
STATIC_FEATURE = "static_membership"


def default_topics(nodes: int = 1) -> list[dict[str, Any]]:
    """The topics of a workload whose case names none: three partitions each, rolling a segment
    every 4 s (a transaction's records and its marker then often sit in different segments);
    on three nodes or more, replicated three times with min.insync.replicas 2 (acks=all then
    survives one node down)."""
    configs = {"segment.ms": "4000", **({"min.insync.replicas": "2"} if nodes >= 3 else {})}
    return [{"name": t, "partitions": 3, "configs": dict(configs)} for t in (DATA, INPUT, OUTPUT)]


def generate(v, seed: int, knobs: dict[str, Any], topics: dict[str, int], nodes: int, time_limit: float,
             op_limit: int) -> tuple[tuple[WorkerDef, ...], tuple[ScheduledFault, ...]]:
    """Workers and fault schedule for `seed` (module doc); `v` is the loader's validator."""
    k = _knobs(v, knobs, topics)
    rng = random.Random(seed)
    data = [t for t in (DATA,) if t in topics] or [t for t in topics if t not in (INPUT, OUTPUT)]
    sources = data + ([INPUT] if k["copiers"] and INPUT in topics else [])
    workers: list[WorkerDef] = []
    clients = _client_cycle(rng, k.get("clients"))

    n_writers = k["producers"] + k["idempotent"] + k["transactional"]
    per_worker = max(5, op_limit // max(1, n_writers + k["copiers"] + k["readers"]))
    pause = tuple(k["pause_ms"]) if k["pause_ms"] else None
    for i in range(k["producers"]):
        workers.append(WorkerDef(name=f"p{i + 1}", kind="producer", client=next(clients), topics=tuple(sources),
                                 config={"acks": "all", "enable.idempotence": "false"}, ops=per_worker * 4,
                                 records=tuple(k["records"]), pause_ms=pause or (0, 150)))
    for i in range(k["idempotent"]):
        workers.append(WorkerDef(name=f"i{i + 1}", kind="idempotent", client=next(clients),
                                 topics=tuple(sources), config={"acks": "all", "enable.idempotence": "true"},
                                 ops=per_worker * 4, records=tuple(k["records"]), pause_ms=pause or (0, 150)))
    for i in range(k["transactional"]):
        long = rng.random() < k["long_transactions"]
        workers.append(WorkerDef(
            name=f"t{i + 1}", kind="transactional", client=next(clients), topics=tuple(sources),
            config={"transaction.timeout.ms": "20000"}, ops=per_worker, records=tuple(k["records"]),
            abort_ratio=k["abort_ratio"], hold_ms=tuple(k["hold_ms"]) if long else (0, 50), pause_ms=pause or (0, 200)))
    if k["copiers"] and INPUT in topics and OUTPUT in topics:
        members = [next(clients) for _ in range(k["copiers"])]
        pinned = all(c is not None for c in members)
        assignor, static = _group_settings(v, rng, k, members) if pinned else (None, False)
        for i, client in enumerate(members):
            start = stop = None
            if k["churn"] and i > 0:
                start = round(rng.uniform(0, time_limit * 0.4), 1)
                if rng.random() < 0.4:
                    stop = round(rng.uniform(start + time_limit * 0.2, time_limit * 0.9), 1)
            config = {"transaction.timeout.ms": "20000", "session.timeout.ms": "10000"}
            if assignor is not None:
                config["partition.assignment.strategy"] = JAVA_ASSIGNOR_CLASSES[assignor]
            if static:
                config["group.instance.id"] = f"member-c{i + 1}"
            workers.append(WorkerDef(
                name=f"c{i + 1}", kind="copier", client=client, topics=(INPUT,), to=OUTPUT, group="etl",
                config=config, ops=per_worker * 2, records=(1, 20), abort_ratio=k["abort_ratio"] / 2,
                pause_ms=(0, 100), start_s=start or 0.0, stop_s=stop))
    for i in range(k["readers"]):
        iso = "read_committed" if i % 2 == 0 else "read_uncommitted"
        workers.append(WorkerDef(name=f"r{i + 1}", kind="reader", client=next(clients), topics=tuple(topics),
                                 config={"isolation.level": iso}, ops=per_worker * 10, pause_ms=(0, 50)))
    schedule = _schedule(rng, k, workers, topics, nodes, time_limit)
    return tuple(workers), tuple(schedule)


#: Java's class name for each assignor protocol name: the spelling a worker's config carries
#: (every driver maps it to its library's assignor of the same protocol name).
JAVA_ASSIGNOR_CLASSES = {name: cls for cls, name in JAVA_ASSIGNORS.items()}


def _knobs(v, raw: dict[str, Any], topics: dict[str, int]) -> dict[str, Any]:
    for key in raw:
        if key not in KNOBS:
            v.fail(f"workload.generate.{key}", f"one of the knobs {sorted(KNOBS)}", key)
    k = {**DEFAULTS, **raw}
    for key in ("producers", "idempotent", "transactional", "copiers", "readers"):
        v.integer(k[key], f"workload.generate.{key}", 0)
    if k["producers"] + k["idempotent"] + k["transactional"] == 0:
        v.fail("workload.generate", "at least one producer, idempotent or transactional worker")
    if k["copiers"] and (INPUT not in topics or OUTPUT not in topics):
        v.fail("workload.generate.copiers", f"topics {INPUT!r} and {OUTPUT!r} in topology.topics for copiers "
                                            f"(they read {INPUT!r}, write {OUTPUT!r})", sorted(topics))
    clients = k.get("clients")
    if clients is not None:
        clients = v.strings(clients, "workload.generate.clients")
        for j, c in enumerate(clients):
            v.string(c, f"workload.generate.clients[{j}]", sorted(CLIENTS))
        k["clients"] = list(clients)
    faults = v.strings(k["faults"] or [], "workload.generate.faults") if k["faults"] else ()
    for j, f in enumerate(faults):
        v.string(f, f"workload.generate.faults[{j}]", FAULT_KINDS)
    k["faults"] = list(faults)
    gap = k["fault_gap_s"]
    if (not isinstance(gap, list) or len(gap) != 2 or not all(isinstance(x, (int, float)) for x in gap)
            or not 0.5 <= gap[0] <= gap[1]):
        v.fail("workload.generate.fault_gap_s", "[min, max] seconds, 0.5 <= min <= max", gap)
    for key in ("pause_ms", "hold_ms"):
        p = k[key]
        if p is not None and (not isinstance(p, list) or len(p) != 2 or not all(isinstance(x, int) for x in p)
                              or not 0 <= p[0] <= p[1]):
            v.fail(f"workload.generate.{key}", "[min, max] milliseconds, 0 <= min <= max", p)
    rec = k["records"]
    if not isinstance(rec, list) or len(rec) != 2 or not all(isinstance(x, int) for x in rec) or not 1 <= rec[0] <= rec[1]:
        v.fail("workload.generate.records", "[min, max] integers, 1 <= min <= max", rec)
    for key in ("abort_ratio", "long_transactions"):
        x = k[key]
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 <= x <= 1:
            v.fail(f"workload.generate.{key}", "a number from 0 to 1", x)
    v.string(k["assignor"], "workload.generate.assignor", [*ASSIGNORS, "any"])
    if k["static_members"] != "any":
        v.boolean(k["static_members"], "workload.generate.static_members")
    v.boolean(k["churn"], "workload.generate.churn")
    v.string(k["copier_members"], "workload.generate.copier_members", ["auto", "all"])
    return k


class _Cycle:
    """The clients workers are pinned to: a seeded order of the list, round-robin; None (the
    row's client) when the workload names no clients."""

    def __init__(self, order: list[str] | None) -> None:
        self.order = order
        self.i = 0

    def __iter__(self):
        return self

    def __next__(self) -> str | None:
        if not self.order:
            return None
        c = self.order[self.i % len(self.order)]
        self.i += 1
        return c


def _client_cycle(rng: random.Random, clients: list[str] | None) -> _Cycle:
    if not clients:
        return _Cycle(None)
    order = list(clients)
    rng.shuffle(order)
    return _Cycle(order)


def _features(client: str | None) -> frozenset[str] | None:
    """What a client supports (ClientSpec.features); None for the row's client (not known yet:
    the runner makes the row not applicable when that client lacks what the group needs)."""
    if client is None:
        return None
    return getattr(CLIENTS[client], "features", None)


def _group_settings(v, rng: random.Random, k: dict[str, Any], members: list[str | None]) -> tuple[str, bool]:
    """The copier group's assignor and static membership: drawn (`any`) among what every member's
    client supports, or as the knob says."""
    feats = [f for f in (_features(c) for c in members) if f is not None]
    def supported(feature: str) -> bool:
        return all(feature in f for f in feats)
    choices = [a for a in ASSIGNORS if supported(ASSIGNOR_FEATURE[a])] if feats else list(ASSIGNORS)
    if k["assignor"] == "any":
        if not choices:
            v.fail("workload.generate.clients", "copier clients that share an assignor (range or "
                                                "cooperative-sticky)", [c for c in members])
        assignor = rng.choice(choices)
    else:
        assignor = k["assignor"]
        if assignor not in choices:
            v.fail("workload.generate.assignor", f"an assignor every copier client supports: {choices}", assignor)
    static_ok = supported(STATIC_FEATURE) if feats else True
    if k["static_members"] == "any":
        static = static_ok and rng.random() < 0.5
    else:
        static = bool(k["static_members"])
        if static and not static_ok:
            v.fail("workload.generate.static_members", "false: not every copier client supports static "
                                                      "membership (group.instance.id)", True)
    return assignor, static


def _schedule(rng: random.Random, k: dict[str, Any], workers: list[WorkerDef], topics: dict[str, int],
              nodes: int, time_limit: float) -> list[ScheduledFault]:
    """Faults from `k["faults"]`, one starting every fault_gap_s, from 3 s in to 5 s before the
    end. Node faults do not overlap (each is undone before the next starts): a cluster keeps a
    majority and min.insync.replicas can be met again; proxy windows and client faults may."""
    kinds = k["faults"]
    out: list[ScheduledFault] = []
    if not kinds:
        return out
    t = 3.0
    end = time_limit - 5.0
    node_free_at = 0.0
    points_left = list(PROTOCOL_POINTS)
    rng.shuffle(points_left)
    txn_ids = [w.transactional_id for w in workers if w.transactional_id]
    groups = sorted({w.group for w in workers if w.group})
    restartable = [w.name for w in workers if w.kind != "reader"] or [w.name for w in workers]
    while True:
        t += rng.uniform(*k["fault_gap_s"])
        if t >= end:
            break
        kind = rng.choice(kinds)
        if kind in ("kill", "pause", "stop"):
            if t < node_free_at:
                kind = "proxy" if "proxy" in kinds else "client" if "client" in kinds else None
                if kind is None:
                    continue
            else:
                ref = _node_role(rng, topics, txn_ids, groups, nodes)
                down = round(rng.uniform(0.5, 3.0) if kind == "pause" else rng.uniform(1.0, 6.0), 1)
                first = {"kill": "crash", "pause": "pause", "stop": "stop"}[kind]
                undo = "resume" if kind == "pause" else "restart"
                out.append(ScheduledFault(at_s=round(t, 1), fault=FaultDef(action=first, target=ref)))
                out.append(ScheduledFault(at_s=round(t + down, 1), fault=FaultDef(action=undo, target=ref)))
                node_free_at = t + down + 4.0
                continue
        if kind == "proxy":
            out.append(_proxy_fault(rng, t))
        elif kind == "client":
            name = rng.choice(restartable)
            action = "crash" if rng.random() < 0.7 else "restart"
            out.append(ScheduledFault(at_s=round(t, 1), worker_action=action, worker=name,
                                      down_s=round(rng.uniform(0.2, 3.0), 1)))
        elif kind == "points" and points_left and txn_ids:
            point = points_left.pop()
            ref = NodeRef("coordinator", of=rng.choice(txn_ids))
            out.append(ScheduledFault(at_s=round(t, 1), fault=FaultDef(action="crash", target=ref, at=point,
                                                                       occurrence=rng.randint(1, 3))))
    return out


def _node_role(rng: random.Random, topics: dict[str, int], txn_ids: list[str], groups: list[str],
               nodes: int) -> NodeRef:
    roles = ["leader", "node"] + (["coordinator"] if txn_ids else []) + (["group_coordinator"] if groups else [])
    role = rng.choice(roles)
    if role == "leader":
        topic = rng.choice(sorted(topics))
        return NodeRef("leader", of=f"{topic}/{rng.randrange(topics[topic])}")
    if role == "coordinator":
        return NodeRef("coordinator", of=rng.choice(txn_ids))
    if role == "group_coordinator":
        return NodeRef("group_coordinator", of=rng.choice(groups))
    return NodeRef("node", node=rng.randint(1, nodes))


def _proxy_fault(rng: random.Random, t: float) -> ScheduledFault:
    """A delay window, one dropped response, or a severed connection, on one API's frames."""
    api = rng.choice(PROXY_APIS)
    action = rng.choice(("delay", "delay", "sever", "drop"))
    if action == "delay":
        rule = Rule(action="delay", api=api, direction=rng.choice(("request", "response")), every=True,
                    delay_ms=float(rng.choice((100, 300, 800, 1500))))
        return ScheduledFault(at_s=round(t, 1), fault=FaultDef(action="proxy", proxy=rule),
                              for_s=round(rng.uniform(1.0, 5.0), 1))
    if action == "sever":
        rule = Rule(action="sever", api=api, direction=rng.choice(("request", "response")), nth=rng.randint(1, 3),
                    when=rng.choice(("before", "after")))
    else:
        rule = Rule(action="drop", api=api, direction="response", nth=rng.randint(1, 3))
    return ScheduledFault(at_s=round(t, 1), fault=FaultDef(action="proxy", proxy=rule), for_s=6.0)
