"""Running a workload case (dsl/workload.py) on a started target, and checking its history.

The same place in a row as CaseRun (row.run_one calls either): `run_steps` runs the workload
and returns the row's step records, the row observes the final state as for any case, and
`check` turns the history, that state and the proxy's transcript into the row's checks -- one
per anomaly kind of conformance/history (passed when there is none).

The phases:
1. main: every worker starts at its `start_s` and loops until the workload's time limit or op
   limit (completed operations of all workers), its own op count or its `stop_s`; the nemesis
   applies the schedule; an LSO sampler asks every partition's last stable offset twice a
   second (history `lso`); a watcher ends the workload as a `crash` when a node the nemesis did
   not take down has no process any more.
2. end: the nemesis heals (every fault undone); producers finish the operation in hand; the
   copiers go on until their groups' committed offsets passed every input record the history
   says is visible and stood still for a moment (`drained`), or the settle time is up (later while
   their offsets still move); then every partition's LSO must reach its high watermark (an open
   transaction the coordinator never ends is a `hanging_transaction`).
Then the row reads both isolation levels from offset 0 with a fresh client (observe.py).
"""
from __future__ import annotations

import dataclasses
import json
import threading
import time
from pathlib import Path
from typing import Any

from conformance.clients.registry import CLIENTS
from conformance.targets import Target

from ..dsl.model import ActorDef, Case
from ..history import ANOMALIES, Anomaly, History, check
from ..history import profile as wire_profile
from ..history.timeline import write_timeline
from ..raw import send_request
from ..results import Check, TargetCrashed
from .actors import CONSUMER_KEYS, Actors
from .admin_ops import answer_by_runner
from .case_run import StepRun
from .faults import FaultRealiser
from .namespace import Namespace
from .nemesis import Nemesis
from ..proxy.transcript import decode_line
from .workload_workers import Worker

ROLES = {"producer": "producer", "idempotent": "producer", "transactional": "producer", "copier": "producer",
         "reader": "consumer"}
#: How often the LSO sampler asks, and how long one ask may take.
LSO_EVERY_S = 0.5
LSO_TIMEOUT_S = 2.0
WATCH_INTERVAL_S = 0.5
#: Seconds the producers get to finish the operation in hand once the workload stops.
FINISH_S = 60.0
#: The copiers count as drained once their committed offsets passed every visible input record
#: and then stood still this long.
DRAIN_QUIET_S = 3.0
#: A copier group still catching up when the settle time is up gets up to this much longer, as
#: long as its committed offsets moved within the last DRAIN_PROGRESS_S: a slow client (one
#: restarted often, or reading 500 records a poll) is not a stuck group, which `stalled` names.
DRAIN_EXTRA_S = 240.0
DRAIN_PROGRESS_S = 15.0


def actor_def(wk) -> ActorDef:
    """A worker as the case runner's actor (runner/actors.py makes and restarts its processes).
    A copier's actor is its producer: the worker makes the consumer once init_transactions
    returned (workload_workers.Worker.ensure says why)."""
    config = {"client.id": wk.name, **wk.config}
    if wk.transactional_id:
        config.setdefault("transactional.id", wk.transactional_id)
    if wk.kind == "copier":
        config = {k: v for k, v in config.items() if k not in CONSUMER_KEYS}
    return ActorDef(name=wk.name, role=ROLES[wk.kind], client=wk.client, config=config,
                    inputs=wk.topics if wk.kind == "reader" else (), assign=wk.kind == "reader")


class WorkloadRun:
    def __init__(self, case: Case, target: Target, client: str, bootstrap: str, ns: Namespace, artifacts: Path,
                 proxy=None) -> None:
        if case.workload is None:
            raise ValueError(f"case {case.id} has no workload")
        self.case, self.target, self.client, self.ns, self.artifacts, self.proxy = \
            case, target, client, ns, artifacts, proxy
        self.w = case.workload
        self.history = History(proxy.server.transcript.t0 if proxy is not None else None)
        self.t0 = self.history.t0
        self.partitions = {t.name: t.partitions for t in case.topology.topics}
        self.actors = Actors({wk.name: actor_def(wk) for wk in self.w.workers}, client, bootstrap, ns, artifacts,
                             self.partitions)
        self.realiser = FaultRealiser(target, ns, proxy)
        self.workers = {wk.name: Worker(self, wk) for wk in self.w.workers}
        #: Workers left out on this row's clients (plan_copiers, plan_readers say why).
        self.skipped: dict[str, str] = {**self.plan_copiers(), **self.plan_readers()}
        self.stopping = threading.Event()
        self.draining = threading.Event()
        self.drained = threading.Event()
        self.aborted = threading.Event()
        self.result = StepRun()
        self._ops = 0
        self._ops_lock = threading.Lock()
        self.worker_errors: list[str] = []
        self.target_gone: str | None = None
        self.nemesis: Nemesis | None = None
        #: What the end phase found: drained (copiers caught up), hanging partitions.
        self.end: dict[str, Any] = {}
        self.summary: dict[str, Any] = {}
        #: What check() found (a reference row may have them explained by a Kafka bug).
        self.anomalies: list[Anomaly] = []

    def plan_copiers(self) -> dict[str, str]:
        """The copiers left out, and why (plan_copiers below); the kept ones that must not churn
        are marked so."""
        skipped, alone = plan_copiers(self.w.workers, self.client, self.w.generate.get("copier_members") == "all")
        for name in alone:
            self.workers[name].no_churn = True
        return skipped

    def plan_readers(self) -> dict[str, str]:
        """read_committed readers on a client that filters aborted records wrongly (ClientSpec
        feature `read_committed`: KafkaJS) are left out -- their reads would judge the client."""
        return {wk.name: f"{wk.client or self.client} filters aborted transactions wrongly (ClientSpec feature "
                         "read_committed): its read_committed reader is left out"
                for wk in self.w.workers
                if wk.kind == "reader" and wk.isolation == "read_committed"
                and "read_committed" not in CLIENTS[wk.client or self.client].features}

    @property
    def observer_client(self) -> str:
        """Who reads the final state (observe.py): the row's client, unless it reads
        read_committed wrongly (feature `read_committed`); then Java, else confluent."""
        for c in (self.client, "java", "confluent"):
            if "read_committed" in CLIENTS[c].features and CLIENTS[c].availability()[0]:
                return c
        return self.client

    # ----------------------------------------------------------------- for workers and nemesis
    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def count_op(self) -> None:
        with self._ops_lock:
            self._ops += 1

    @property
    def ops(self) -> int:
        return self._ops

    def worker_failed(self, name: str, exc: BaseException) -> None:
        self.worker_errors.append(f"worker {name}: {type(exc).__name__}: {exc}")

    def copier_consumer_config(self, wk) -> dict[str, str]:
        """A copier's consumer config: the consumer part of its config, in the group, read_committed."""
        d = ActorDef(name=wk.name, role="copier", client=wk.client,
                     config={"client.id": wk.name, "group.id": wk.group, **wk.config})
        return self.actors.consumer_config(d)

    def resolve_case(self, value: Any) -> Any:
        return self.ns.unmap(value)

    def close(self) -> None:
        self.stopping.set()
        self.aborted.set()
        self.actors.close_all()

    # ----------------------------------------------------------------- the run
    def run_steps(self) -> StepRun:
        stop_side = threading.Event()
        side = [threading.Thread(target=self._sample_lso, args=(stop_side,), name="lso", daemon=True),
                threading.Thread(target=self._watch_target, args=(stop_side,), name="target-watch", daemon=True)]
        self.nemesis = Nemesis(self.history, self.w.schedule, self.workers, self.realiser, self.elapsed, self.proxy)
        try:
            for t in side:
                t.start()
            for name, why in self.skipped.items():
                self.history.event(f"{name}#0", "skipped", {"why": why})
            for name, wk in self.workers.items():
                if name not in self.skipped:
                    wk.start()
            self.nemesis.start()
            why = self._main_phase()
            self.history.event("runner", "phase", {"phase": "end", "why": why})
            self._end_phase()
        finally:
            self.stopping.set()
            if self.target_gone:
                self.aborted.set()
            self.drained.set()
            if self.nemesis.is_alive():
                self.nemesis.stop_event.set()
            stop_side.set()
            for t in side:
                t.join(timeout=5)
            self.actors.close_all()
            for wk in self.workers.values():
                wk.join(timeout=10)
            self.history.close_open("the workload ended before it answered")
            self.history.write_jsonl(self.artifacts / "history.jsonl")
        self.result.records.append({"step": 0, "op": "workload", "ok": not self.worker_errors,
                                    "data": self._step_summary()})
        if self.target_gone:
            raise TargetCrashed(None, self.target_gone)
        return self.result

    def _main_phase(self) -> str:
        w = self.w
        while True:
            if self.target_gone:
                return f"the target died: {self.target_gone}"
            if self.elapsed() >= w.time_limit_s:
                return f"time limit {w.time_limit_s:g} s"
            if self.ops >= w.op_limit:
                return f"op limit {w.op_limit}"
            if all(not wk.is_alive() for wk in self.workers.values()):
                return "every worker finished its operations"
            time.sleep(0.1)

    def _end_phase(self) -> None:
        deadline = time.monotonic() + self.w.settle_s
        copiers = [name for name, wk in self.workers.items() if wk.wk.kind == "copier" and name not in self.skipped]
        if copiers:
            self.draining.set()   # before `stopping`: a copier must never read "stop" alone
        self.stopping.set()
        self.nemesis.heal()
        self.history.event("runner", "phase", {"phase": "healed", "down": sorted(self.target.down)})
        for wk in self.workers.values():
            if wk.wk.kind != "copier":
                wk.join(timeout=FINISH_S)
        if copiers:
            for name in copiers:   # a copier that left or ran out of operations comes back to drain
                wk = self.workers[name]
                if not wk.is_alive() and not self.aborted.is_set():
                    self.workers[name] = again = wk.again()
                    again.start()
            self.end["drained"] = self._drain(deadline)
            self.drained.set()
            for wk in self.workers.values():
                wk.join(timeout=FINISH_S)
        self.end["hanging"] = self._settle_lso(max(deadline, time.monotonic()) + 30.0)
        self.history.event("runner", "phase", {"phase": "settled", **self.end})

    def _drain(self, deadline: float) -> bool:
        """Until every copier group's committed offsets passed the last input record the history
        says is visible to read_committed (a plain write acknowledged, or a record of a
        transaction whose commit answered ok), and then DRAIN_QUIET_S more without the offsets
        moving (records of transactions whose end is unknown may be there too). An input whose
        last entries are markers or aborted records is drained at its last visible record: a
        copier commits past what it copied. Past `deadline`, only while the offsets still move
        (DRAIN_EXTRA_S at most). Whether every input record was copied is the checker's
        (`stalled`, from the final read)."""
        groups = self._copier_groups()
        last: dict | None = None
        since = time.monotonic()
        hard = deadline + DRAIN_EXTRA_S

        def going() -> bool:
            t = time.monotonic()
            return t < deadline or (t < hard and t - since < DRAIN_PROGRESS_S)

        while going() and not self.aborted.is_set():
            need = self._visible_ends()
            try:
                now = {g: self._committed(g, [(self.ns.name(t), p) for t in inputs for p in range(self.partitions[t])])
                       for g, (inputs, _) in groups.items()}
            except (RuntimeError, TimeoutError, OSError, KeyError):
                now = None
            if now != last:
                last, since = now, time.monotonic()
            if now is not None:
                behind = [(g, t, p) for g, (inputs, _) in groups.items() for t in inputs
                          for p in range(self.partitions[t])
                          if now[g].get((self.ns.name(t), p), -1) < need.get((t, p), 0)]
                if not behind and time.monotonic() - since >= DRAIN_QUIET_S:
                    return True
            time.sleep(0.5)
        return False

    def _visible_ends(self) -> dict[tuple[str, int], int]:
        """(topic, partition) -> one past the last record the history says read_committed sees."""
        ends: dict[tuple[str, int], int] = {}

        def seen(topic: str, partition: int, offset: int | None) -> None:
            if offset is not None and offset >= 0:
                ends[(topic, partition)] = max(ends.get((topic, partition), 0), offset + 1)

        events = self.history.events()
        for e in events:
            if e["type"] != "ok":
                continue
            v = e.get("value") or {}
            if e["f"] == "send":
                inv = events[e["invoke"]]["value"]
                seen(inv["topic"], inv["partition"], v.get("offset"))
            elif e["f"] == "txn" and v.get("end") == "commit":
                for _, topic, partition, offset in v.get("records") or []:
                    seen(topic, partition, offset)
        return ends

    def _copier_groups(self) -> dict[str, tuple[list[str], str]]:
        out: dict[str, tuple[list[str], str]] = {}
        for wk in self.w.workers:
            if wk.kind == "copier" and wk.name not in self.skipped:
                out[wk.group] = (sorted(set(out.get(wk.group, ([], ""))[0]) | set(wk.topics)), wk.to)
        return out

    def _committed(self, group: str, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        unique = self.ns.name(group)
        node = self.target.group_coordinator(unique, timeout=LSO_TIMEOUT_S)
        address = self.target.addresses[node]
        topics: dict[str, list[int]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(p)
        out = send_request(address, "OffsetFetch", 7, {
            "group_id": unique, "require_stable": False,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}, timeout_s=LSO_TIMEOUT_S)
        if not out.ok:
            return {}
        got = {}
        for t in out.data["response"].get("topics", []):
            for p in t.get("partitions", []):
                if not p.get("error_code"):
                    got[(t["name"], p["partition_index"])] = p["committed_offset"]
        return got

    def _all_tps(self) -> list[tuple[str, int]]:
        return [(self.ns.name(t), p) for t, n in self.partitions.items() for p in range(n)]

    def _settle_lso(self, deadline: float) -> list[dict]:
        """Wait until every partition's LSO reaches its high watermark; the ones that do not by
        the deadline (transaction.timeout.ms of the workers plus the coordinator's abort
        interval fit inside it), with who holds them open (DescribeProducers)."""
        tps = self._all_tps()
        held: list[dict] = []
        while True:
            try:
                lso = self.target.end_offsets(tps, read_committed=True, timeout=5.0)
                hw = self.target.end_offsets(tps, read_committed=False, timeout=5.0)
                held = [{"partition": f"{self.ns.unmap(t)}-{p}", "last_stable": lso[(t, p)], "high_watermark": hw[(t, p)]}
                        for t, p in tps if lso.get((t, p), -1) < hw.get((t, p), -1)]
            except (RuntimeError, TimeoutError, OSError, KeyError) as exc:
                held = [{"partition": "?", "error": str(exc)}]
            if not held or time.monotonic() >= deadline or self.aborted.is_set():
                break
            time.sleep(0.5)
        if held and all("error" not in h for h in held):
            parts = [{"topic": self.ns.name(h["partition"].rsplit("-", 1)[0]),
                      "partition": int(h["partition"].rsplit("-", 1)[1])} for h in held]
            out = answer_by_runner("describe_producers", self.target, {"partitions": parts}, 10_000, self.client)
            if out.ok:
                for h, p in zip(held, out.data.get("partitions", [])):
                    h["producers"] = [{k: x for k, x in q.items() if k in ("producer_id", "producer_epoch",
                                                                           "current_txn_start_offset")}
                                      for q in p.get("producers", [])]
        return held

    # ----------------------------------------------------------------- side threads
    def _sample_lso(self, stop: threading.Event) -> None:
        tps = self._all_tps()
        while not stop.wait(LSO_EVERY_S):
            if self.nemesis is not None and self.nemesis.busy:
                continue
            try:
                lso = self.target.end_offsets(tps, read_committed=True, timeout=LSO_TIMEOUT_S)
            except (RuntimeError, TimeoutError, OSError, KeyError):
                continue
            self.history.event("lso", "lso", {f"{self.ns.unmap(t)}-{p}": o for (t, p), o in sorted(lso.items())})

    def _watch_target(self, stop: threading.Event) -> None:
        """A node the nemesis did not take down that has no process any more ends the workload
        (seen twice in a row; not while a fault is being applied or a protocol point is armed:
        those end a process on purpose)."""
        seen_before = False
        while not stop.wait(WATCH_INTERVAL_S):
            nem = self.nemesis
            why = None if nem is None or nem.busy or nem.points_pending else self.target.exited()
            if why and seen_before:
                self.target_gone = why
                self.aborted.set()
                self.stopping.set()
                self.actors.close_all()
                return
            seen_before = why is not None

    # ----------------------------------------------------------------- results
    def _step_summary(self) -> dict[str, Any]:
        events = self.history.events()
        by_f: dict[str, dict[str, int]] = {}
        for e in events:
            if e["type"] != "invoke" and e["process"] not in ("nemesis", "lso", "runner"):
                by_f.setdefault(e["f"], {}).setdefault(e["type"], 0)
                by_f[e["f"]][e["type"]] += 1
        return {"seed": self.w.seed, "operations": self.ops, "events": len(events), "by_op": by_f,
                "faults": sum(1 for e in events if e["process"] == "nemesis" and e["type"] == "ok"),
                "elapsed_s": round(self.elapsed(), 1), **self.end, "worker_errors": self.worker_errors}

    def _transaction_timeouts_s(self) -> dict[str, float]:
        """transaction.timeout.ms of each transactional worker (Java's default: 60 s), seconds."""
        return {wk.name: float(wk.config.get("transaction.timeout.ms", 60000)) / 1000
                for wk in self.w.workers if wk.kind in ("transactional", "copier")}

    def check(self, outcome: dict[str, Any], transcript: list[dict] | None) -> list[Check]:
        """The row's checks: one per anomaly kind (ANOMALIES), plus that the workload ran. Writes
        anomalies.json, wire.json, timeline.html and final.json beside the row's results."""
        events = self.history.events()
        wins = wire_profile.windows(events, self.elapsed())
        wins += wire_profile.timeout_windows(events, self._transaction_timeouts_s(), self.elapsed())
        wins += wire_profile.stall_windows(transcript or [], decode_line, self.elapsed())
        errors = [dataclasses.replace(e, client_id=self.ns.unmap(e.client_id))
                  for e in wire_profile.wire_errors(transcript or [], decode_line)]
        extra = wire_profile.unexpected(errors, wins, self.case.topology.broker_configs)
        for h in self.end.get("hanging") or []:
            extra.append(Anomaly("hanging_transaction", f"{h['partition']}: last stable offset "
                                                        f"{h.get('last_stable')} < high watermark "
                                                        f"{h.get('high_watermark')} at the end", [h]))
        workers = {wk.name: wk for wk in self.w.workers}
        anomalies = check(events, workers, outcome, extra=extra, copier_groups=self._copier_groups())
        self.anomalies = anomalies
        wire = {"client": wire_profile.profile(errors).get("client", {}),
                "broker": wire_profile.profile(errors).get("broker", {}),
                "clients_reported": wire_profile.client_profile(events),
                "windows": [dataclasses.asdict(w) for w in wins]}
        self.summary = {**self._step_summary(), **wire_profile.node_downtime(events),
                        "anomalies": {a.kind: a.count for a in anomalies},
                        "wire_errors": wire["client"], "client_errors": wire["clients_reported"]}
        art = self.artifacts
        (art / "anomalies.json").write_text(json.dumps([a.to_dict() for a in anomalies], indent=1, default=str))
        (art / "wire.json").write_text(json.dumps(wire, indent=1, default=str))
        (art / "final.json").write_text(json.dumps(outcome, default=str))
        write_timeline(art / "timeline.html", self.case, events, anomalies, wins, errors)
        checks = [Check("workload ran (every worker ran its loop)", not self.worker_errors,
                        "; ".join(self.worker_errors) or f"{self.ops} operations")]
        found = {a.kind: a for a in anomalies}
        for kind, meaning in ANOMALIES.items():
            a = found.get(kind)
            checks.append(Check(f"no {kind}", a is None, a.message if a else f"none ({meaning})"))
        return checks


def plan_copiers(workers, default_client: str, every: bool) -> tuple[dict[str, str], list[str]]:
    """Copiers whose client cannot copy exactly once in a group whose members come and go
    (ClientSpec feature `eos_rebalance`, conformance/clients/registry.py says which and why:
    without KIP-447 fencing a client re-reads offsets a pending transaction has not committed
    yet; some with it still copy twice after a rebalance). Such a copier runs only as its
    group's one member, without churn: in a group that has members able to copy across
    rebalances it is left out (their coming and going would rebalance it: Sarama copied 213
    records twice so, seed 302), else the group's first such copier is kept alone -- the
    history then judges the broker, not a client's known flaw -- unless the workload asks for
    every member (`copier_members: all`, to show the flaw). Returns (left out: name -> why,
    the kept copiers that must not churn)."""
    skipped: dict[str, str] = {}
    copiers = [wk for wk in workers if wk.kind == "copier"]
    for wk in copiers:
        client = wk.client or default_client
        if "read_committed" not in CLIENTS[client].features:
            skipped[wk.name] = (f"{client} filters aborted transactions wrongly (ClientSpec feature "
                                "read_committed): its copier would copy aborted input")
    able: dict[str, list[str]] = {}
    for wk in copiers:
        if wk.name not in skipped and "eos_rebalance" in CLIENTS[wk.client or default_client].features:
            able.setdefault(wk.group, []).append(wk.name)
    first: dict[str, str] = {}
    alone: list[str] = []
    for wk in copiers:
        client = wk.client or default_client
        if wk.name in skipped or every or "eos_rebalance" in CLIENTS[client].features:
            continue
        why = f"{client} does not copy exactly once across rebalances (ClientSpec feature eos_rebalance): "
        if wk.group in able:
            skipped[wk.name] = why + f"{', '.join(able[wk.group])} come and go in {wk.group}"
        elif wk.group not in first:
            first[wk.group] = wk.name
            alone.append(wk.name)
        else:
            skipped[wk.name] = why + f"one copier per group ({first[wk.group]} copies for {wk.group})"
    return skipped, alone
