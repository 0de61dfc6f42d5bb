"""The conformance run: every case on every target with every client, into DIR/results.jsonl.

Isolation choice (measured on this 2-core machine: the embedded broker starts in ~0.7 s and
stops in ~0.1 s; a single-node Apache Kafka 4.x starts in ~3.6 s and stops in ~0.6 s):
- every case run gets unique topic / transactional.id / group names (namespace.py), so no two
  runs share records, producer state or offsets even on one broker;
- the embedded broker and Tansu are started FRESH for every (case, client) run;
- Apache Kafka (and the external target) is REUSED across consecutive runs that need the same
  topology size and broker configs, as long as the previous run did nothing to its nodes (no
  fault step, no node down). Any fault, any node down, or different configs -> a fresh start.
  `--fresh` forces a fresh start everywhere.
Both keep each case's state isolated; the second saves ~4 s per case on Kafka.

The reference target (apache-kafka when it is part of the run) runs first, so every other
row can carry its structural diff against the reference as it is written.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import secrets
import shutil
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from conformance.clients.registry import CLIENTS
from conformance.compare import normalise_outcome, structural_diff
from conformance.targets import NotApplicable, Target, TopicSpec, Topology, make_target, split_name, target_class
from conformance.targets.base import TargetUnavailable

from ..dsl.model import Case
from .actors import client_version
from .case_run import CaseRun
from .checks import evaluate
from .faults import plan_broker_configs
from .namespace import Namespace
from .observe import observe
from .proxying import ProxyFront, can_front

REFERENCE_TARGET = "apache-kafka"
#: Targets whose start is slow enough that reusing a started instance pays (see module doc).
REUSABLE_TARGETS = frozenset({"apache-kafka", "external"})
#: Broker configs that change transactional behaviour: a target that cannot apply them
#: (Tansu, external) makes a case that sets them not applicable.
BEHAVIOUR_CONFIG_PREFIXES = ("transaction", "transactional.id", "producer.id", "min.insync.replicas",
                             "unclean.leader.election")


@dataclass
class RunOptions:
    targets: list[str]
    clients: list[str]
    cases: list[Case]
    results_dir: Path
    reference: str | None = None
    fresh: bool = False
    proxy: str = "auto"  # auto: front every target it can; needed: only cases that need it; off
    run_id: str = ""
    target_options: dict[str, dict] = field(default_factory=dict)


def default_clients() -> list[str]:
    return [name for name, spec in CLIENTS.items() if spec.availability()[0]]


def new_run_id() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def _now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _safe(name: str) -> str:
    return name.replace("/", "__")


# ============================================================================ target pool
class TargetSlot:
    """The started instance of one target, reused or replaced per case run (module doc)."""

    def __init__(self, name: str, options: dict, workroot: Path, proxy_mode: str) -> None:
        self.name = name
        self.options = options
        self.workroot = workroot
        self.proxy_mode = proxy_mode
        self.target: Target | None = None
        self.proxy: ProxyFront | None = None
        self.bootstrap: str | None = None
        self.key: tuple | None = None
        self.dirty = False
        self.starts = 0
        self.start_seconds: list[float] = []

    def release(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None
        if self.target is not None:
            try:
                self.target.stop()
            finally:
                self.target = None
        self.key = None

    def acquire(self, case: Case, broker_configs: dict[str, str], want_proxy: bool, fresh: bool) -> tuple[Target, str]:
        key = (case.topology.nodes, case.topology.controller, tuple(sorted(broker_configs.items())), want_proxy)
        reusable = (not fresh and split_name(self.name)[0] in REUSABLE_TARGETS and self.target is not None
                    and self.key == key and not self.dirty and not self.target.down)
        if reusable:
            return self.target, self.bootstrap
        self.release()
        target = make_target(self.name, **self.options)
        self.starts += 1
        workdir = self.workroot / f"{self.name}-{self.starts:03d}"
        configs = dict(broker_configs)
        # The proxy fronts every node: node i advertises proxy port i, so clients and the
        # brokers' own connections to each other cross it. It runs before the target starts
        # (brokers replicate from each other while the cluster is starting) and follows the
        # addresses the target fills in.
        proxy = ProxyFront(case.topology.nodes) if want_proxy else None
        t0 = time.monotonic()
        try:
            topology = Topology(nodes=case.topology.nodes, controller=case.topology.controller)
            if proxy is not None:
                proxy.follow(target)
            bootstrap = target.start(topology, configs, workdir,
                                     node_configs=proxy.node_configs() if proxy is not None else None)
            if proxy is not None:
                bootstrap = proxy.attach(target)
        except BaseException:
            if proxy is not None:
                proxy.stop()
            target.stop()
            raise
        self.start_seconds.append(time.monotonic() - t0)
        self.target, self.proxy, self.bootstrap, self.key, self.dirty = target, proxy, bootstrap, key, False
        return target, bootstrap


# ============================================================================ one run
@dataclass
class RowContext:
    run_id: str
    results_dir: Path
    reference: str | None
    reference_outcomes: dict[tuple[str, str], dict]


def _behaviour_configs(case: Case) -> dict[str, str]:
    return {k: v for k, v in case.topology.broker_configs.items() if k.startswith(BEHAVIOUR_CONFIG_PREFIXES)}


def run_one(case: Case, slot: TargetSlot, client: str, ctx: RowContext, fresh: bool) -> dict:
    """Run one case on one target with one client; always returns a results row."""
    started_at = _now_iso()
    t0 = time.monotonic()
    art_rel = Path("artifacts") / slot.name / client / _safe(case.id)
    art = ctx.results_dir / art_rel
    if art.exists():
        shutil.rmtree(art)
    art.mkdir(parents=True, exist_ok=True)
    row = {
        "run_id": ctx.run_id, "started_at": started_at, "case": case.id, "case_title": case.title,
        "tags": list(case.tags), "scenario": list(case.scenario), "target": slot.name, "target_version": "unknown",
        "client": client, "client_version": client_version(client), "verdict": "error", "checks": [],
        "outcome": {}, "diff": None, "reference_target": None, "duration_s": 0.0, "reason": None,
        "artifacts": {"steps": str(art_rel / "steps.json"), "logs": []},
    }
    ns = Namespace()
    case_run: CaseRun | None = None
    raw_outcome: dict = {}
    log_offsets: dict[Path, int] = {}
    target = None
    try:
        missing_clients = [c for c in case.pinned_clients() if not CLIENTS[c].availability()[0]]
        if missing_clients:
            raise NotApplicable(f"the case pins client(s) {missing_clients}, not available here")
        cls_caps = target_class(slot.name).static_capabilities
        # fault_points: plan_broker_configs below says precisely why a point cannot be realised
        static_needs = case.needed_capabilities() - {"transactions", "describe_transactions", "list_transactions",
                                                     "describe_producers", "multi_node", "fault_points"}
        lacking = sorted(static_needs - set(cls_caps))
        if lacking:
            raise NotApplicable(f"target {slot.name!r} lacks {', '.join(lacking)}, which the case's faults need")
        want_proxy = False
        if case.needs_proxy():
            reason = can_front(slot.name, case.topology.nodes)
            if reason:
                raise NotApplicable(f"the case needs the proxy: {reason}")
            want_proxy = True
        elif slot.proxy_mode == "auto" and can_front(slot.name, case.topology.nodes) is None:
            want_proxy = True
        probe = slot.target or make_target(slot.name, **slot.options)
        broker_configs = {**case.topology.broker_configs, **plan_broker_configs(case, probe)}
        target, bootstrap = slot.acquire(case, broker_configs, want_proxy, fresh)
        row["target_version"] = target.version
        unsupported = getattr(target, "unsupported_configs", None)
        if unsupported:
            essential = _behaviour_configs(case)
            if essential:
                slot.dirty = True
                raise NotApplicable(f"target {slot.name!r} cannot apply the broker configs {essential}")
        lacking = sorted(case.needed_capabilities() - set(target.capabilities) - {"multi_node"})
        if lacking:
            raise NotApplicable(f"target {slot.name!r} lacks {', '.join(lacking)}")
        if case.topology.topics:
            target.create_topics([TopicSpec(ns.name(t.name), t.partitions, t.replication_factor, dict(t.configs))
                                  for t in case.topology.topics])
        for path in target.log_files():
            try:
                log_offsets[path] = path.stat().st_size
            except OSError:
                pass
        if slot.proxy is not None:
            slot.proxy.begin_case()
        case_run = CaseRun(case, target, client, bootstrap, ns, art, log_offsets, slot.proxy)
        steps = case_run.run_steps()
        if steps.fault_events or target.down:
            slot.dirty = True
        # Observe while the actors still live: closing a producer aborts its open transaction
        # (librdkafka does), which would change what the case left behind.
        observed = observe(case, client, bootstrap, ns, art)
        case_run.close()
        if slot.proxy is not None:
            steps.checks += slot.proxy.fault_checks()
        raw_outcome = {"steps": steps.records, **observed, "faults": steps.fault_events}
        outcome = ns.unmap(raw_outcome)
        checks = steps.checks + evaluate(case, outcome, client)
        if observed.get("observe_errors"):
            checks.append({"name": "observation", "passed": False,
                           "message": "; ".join(ns.unmap(observed["observe_errors"]))})
        row["checks"] = checks
        row["outcome"] = normalise_outcome(outcome)
        row["verdict"] = "pass" if all(c["passed"] for c in checks) else "fail"
        known = case.known_differences.get(slot.name)
        if known and row["verdict"] == "fail":
            row["reason"] = f"known difference: {known}"
    except NotApplicable as exc:
        row["verdict"] = "not_applicable"
        row["reason"] = exc.reason
        slot.dirty = slot.dirty or target is not None
    except TargetUnavailable as exc:
        row["verdict"] = "not_applicable"
        row["reason"] = str(exc)
    except Exception as exc:  # noqa: BLE001 - one broken run must not end the others
        row["verdict"] = "error"
        row["reason"] = f"{type(exc).__name__}: {exc}"
        (art / "error.txt").write_text(traceback.format_exc())
        slot.dirty = True
    finally:
        if case_run is not None:
            case_run.close()
        if slot.proxy is not None and target is not None:
            path = slot.proxy.end_case(art / "transcript.jsonl")
            if path is not None:
                row["artifacts"]["transcript"] = str(art_rel / "transcript.jsonl")
        row["artifacts"]["logs"] = _copy_logs(slot, log_offsets, art, art_rel)
        (art / "steps.json").write_text(json.dumps(ns.unmap(raw_outcome.get("steps", [])), indent=1, default=str))
        drivers = sorted(str(art_rel / p.name) for p in art.glob("*.log") if not p.name.startswith("broker-"))
        if drivers:
            row["artifacts"]["driver_logs"] = drivers
        if split_name(slot.name)[0] not in REUSABLE_TARGETS or fresh or slot.dirty:
            slot.release()
    row["duration_s"] = round(time.monotonic() - t0, 3)
    _attach_diff(row, ctx)
    return row


def _copy_logs(slot: TargetSlot, offsets: dict[Path, int], art: Path, art_rel: Path) -> list[str]:
    """The part of every broker log written during this case, beside the results."""
    if slot.target is None:
        return []
    out = []
    for i, path in enumerate(slot.target.log_files()):
        name = f"broker-{path.parent.name}-{path.name}"
        try:
            with open(path, "rb") as src, open(art / name, "wb") as dst:
                src.seek(offsets.get(path, 0))
                shutil.copyfileobj(src, dst)
            out.append(str(art_rel / name))
        except OSError:
            continue
    return out


def _attach_diff(row: dict, ctx: RowContext) -> None:
    if ctx.reference is None or row["verdict"] in ("not_applicable", "error"):
        return
    key = (row["case"], row["client"])
    if row["target"] == ctx.reference:
        ctx.reference_outcomes[key] = row["outcome"]
        return
    ref = ctx.reference_outcomes.get(key)
    if ref is None:
        return
    row["reference_target"] = ctx.reference
    row["diff"] = structural_diff(ref, row["outcome"])


# ============================================================================ whole run
def run(opts: RunOptions, on_row: Callable[[dict, int, int], None] | None = None,
        on_start: Callable[[str, str, str], None] | None = None) -> list[dict]:
    """Run the matrix; rows are appended to DIR/results.jsonl as they are produced."""
    opts.results_dir.mkdir(parents=True, exist_ok=True)
    run_id = opts.run_id or new_run_id()
    reference = opts.reference
    if reference is None and REFERENCE_TARGET in opts.targets and len(opts.targets) > 1:
        reference = REFERENCE_TARGET
    targets = sorted(opts.targets, key=lambda t: (t != reference,))  # reference first
    ctx = RowContext(run_id, opts.results_dir, reference, {})
    results_path = opts.results_dir / "results.jsonl"
    results_path.write_text("")
    shutil.rmtree(opts.results_dir / "artifacts", ignore_errors=True)  # no stale artifacts of an older run
    work = opts.results_dir / "work"
    total = len(targets) * len(opts.cases) * len(opts.clients)
    done = 0
    rows = []
    meta = {"run_id": run_id, "started_at": _now_iso(), "targets": targets, "clients": opts.clients,
            "cases": [c.id for c in opts.cases], "reference_target": reference, "target_starts": {},
            "target_start_seconds": {}}
    with open(results_path, "a", encoding="utf-8") as out:
        for tname in targets:
            slot = TargetSlot(tname, opts.target_options.get(tname, {}), work, opts.proxy)
            try:
                for case in _order_for_reuse(opts.cases, tname):
                    for client in opts.clients:
                        if on_start:
                            on_start(case.id, tname, client)
                        row = run_one(case, slot, client, ctx, opts.fresh)
                        rows.append(row)
                        out.write(json.dumps(row, default=str) + "\n")
                        out.flush()
                        done += 1
                        if on_row:
                            on_row(row, done, total)
            finally:
                slot.release()
                meta["target_starts"][tname] = slot.starts
                meta["target_start_seconds"][tname] = [round(s, 3) for s in slot.start_seconds]
    meta["finished_at"] = _now_iso()
    (opts.results_dir / "run.json").write_text(json.dumps(meta, indent=1))
    shutil.rmtree(work, ignore_errors=True) if not os.environ.get("KCONFORM_KEEP_WORK") else None
    return rows


def _order_for_reuse(cases: Iterable[Case], target: str) -> list[Case]:
    """On reusable targets, cases with the same topology size and configs run back to back."""
    cases = list(cases)
    if split_name(target)[0] not in REUSABLE_TARGETS:
        return cases
    return sorted(cases, key=lambda c: (c.topology.nodes, sorted(c.topology.broker_configs.items()),
                                        bool(c.faults())))
