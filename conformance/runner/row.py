"""One row of a run: one case on one target with one client, always ending in a results row.

Verdicts (docs/results-schema.md): `pass` / `fail` (the case's checks), `not_applicable` (the
target or client cannot do what the case needs, with the reason), `crash` (the TARGET died or
stopped answering during the case: a finding about the target, with the step after which it
was seen dead and the end of its logs), `error` (kconform itself could not run the case).

Why `crash` is its own verdict: a peer that panics on one case used to take every later case
down with it (each waited out its timeouts against a dead port, and ended as `error`). Here a
failed step asks the target whether it still serves (Target.health: processes alive, ApiVersions
answered); when it does not, the case stops at once, the row says so, and the slot starts a
fresh instance for the next case.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import shutil
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from conformance.clients.registry import CLIENTS
from conformance.compare import normalise_outcome
from conformance.targets import NotApplicable, TargetUnavailable, target_class

from ..dsl.model import Case
from .actors import client_version
from .case_run import CaseRun, TargetCrashed
from .checks import evaluate
from .transcript_check import decode_transcript
from .faults import plan_broker_configs
from .namespace import Namespace
from .observe import observe
from .proxying import ADVERTISE, REWRITE, ProxyFront, front_mode
from .slots import SharedTargets, TargetSlot, reuse_key
from .workload_run import WorkloadRun

#: Broker configs that change transactional behaviour: a target that cannot apply them
#: (Tansu, external) makes a case that sets them not applicable.
BEHAVIOUR_CONFIG_PREFIXES = ("transaction", "transactional.id", "producer.id", "min.insync.replicas",
                             "unclean.leader.election")
#: Capabilities discovered only once the target runs (checked after start) or planned precisely
#: elsewhere (fault points: plan_broker_configs says why one cannot be realised).
LATE_CAPABILITIES = frozenset({"transactions", "describe_transactions", "list_transactions",
                               "describe_producers", "multi_node", "fault_points"})


@dataclass(frozen=True)
class RowPlan:
    """How a row runs, decided before anything starts."""

    broker_configs: dict[str, str]
    #: ADVERTISE (the target's own proxy), REWRITE (the row's own proxy) or None.
    proxy: str | None
    #: On the run's shared instance of the target (slots.SharedTargets), not the worker's own.
    shared: bool

    def key(self, case: Case) -> tuple:
        return reuse_key(case, self.broker_configs, self.proxy == ADVERTISE) + (self.shared,)


@dataclass
class RowContext:
    run_id: str
    results_dir: Path


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _safe(name: str) -> str:
    return name.replace("/", "__")


def _behaviour_configs(case: Case) -> dict[str, str]:
    return {k: v for k, v in case.topology.broker_configs.items() if k.startswith(BEHAVIOUR_CONFIG_PREFIXES)}


def known_difference(case: Case, target: str, client: str) -> str | None:
    """The documented difference a row of `case` on `target` with `client` carries: the case's
    `known_differences` entry for the target (NAME or NAME@VERSION), else the target's
    difference with that client (every case meets it)."""
    return case.known_differences.get(target) or target_class(target).client_differences.get(client)


def row_plan(case: Case, slot: TargetSlot, can_share: bool = True) -> RowPlan:
    """How the case runs on the slot's target (RowPlan); NotApplicable with the reason when the
    target cannot run it at all (decided before anything starts). A fault-free case runs on the
    run's shared instance where the target is shareable (slots.py)."""
    missing_clients = [c for c in case.pinned_clients() if not CLIENTS[c].availability()[0]]
    if missing_clients:
        raise NotApplicable(f"the case pins client(s) {missing_clients}, not available here")
    lacking = sorted(case.needed_capabilities() - LATE_CAPABILITIES - set(slot.cls.static_capabilities))
    if lacking:
        raise NotApplicable(f"target {slot.name!r} lacks {', '.join(lacking)}, which the case's faults need")
    if not slot.cls.applies_broker_configs and _behaviour_configs(case):
        raise NotApplicable(f"target {slot.name!r} cannot apply the broker configs {_behaviour_configs(case)}")
    shared = (can_share and slot.cls.shareable and not case.topology.exclusive and not case.node_faults()
              and not case.needs_broker_traffic() and case.workload is None)
    proxy = None
    if case.needs_proxy():
        if slot.proxy_mode == "off":
            raise NotApplicable("the case needs the proxy, and this run has it off (--proxy off)")
        proxy = front_mode(slot.cls, case, shared)
    elif slot.proxy_mode == "auto":
        proxy = front_mode(slot.cls, case, shared)
    return RowPlan({**case.topology.broker_configs, **plan_broker_configs(case, slot.cls, slot.name)}, proxy, shared)


def run_one(case: Case, slot: TargetSlot, client: str, ctx: RowContext, fresh: bool,
            shared: SharedTargets | None = None) -> dict:
    """Run one case on one target with one client; always returns a results row. `shared`: the
    run's shared instances (None: every row on the slot's own)."""
    started_at = now_iso()
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
        "known_difference": known_difference(case, slot.name, client),
    }
    ns = Namespace()
    case_run: CaseRun | None = None
    raw_outcome: dict = {}
    log_offsets: dict[Path, int] = {}
    target = None
    plan: RowPlan | None = None
    proxy: ProxyFront | None = None
    try:
        plan = row_plan(case, slot, shared is not None and not fresh)
        if plan.shared:
            target, bootstrap = shared.acquire(slot.name, case, plan.broker_configs)
        else:
            target, bootstrap = slot.acquire(case, plan.broker_configs, plan.proxy, fresh)
            proxy = slot.proxy
        if plan.proxy == REWRITE:
            proxy = ProxyFront.rewriting(target)
            bootstrap = proxy.bootstrap
        row["target_version"] = target.version
        essential = target.unappliable_configs(_behaviour_configs(case))
        if essential:
            raise NotApplicable(f"target {slot.name!r} cannot apply the broker configs {essential}")
        lacking = sorted(case.needed_capabilities() - set(target.capabilities) - {"multi_node"})
        if lacking:
            raise NotApplicable(f"target {slot.name!r} lacks {', '.join(lacking)}")
        log_offsets = _log_sizes(target)
        if case.topology.topics:
            target.create_topics([dataclasses.replace(t, name=ns.name(t.name)) for t in case.topology.topics])
        if proxy is not None:
            proxy.begin_case()
        case_run = (WorkloadRun if case.workload is not None else CaseRun)(case, target, client, bootstrap, ns,
                                                                             art, proxy)
        try:
            steps = case_run.run_steps()
        finally:
            raw_outcome = {"steps": case_run.result.records, "faults": case_run.result.fault_events}
        if steps.fault_events or target.down:
            slot.dirty = True
        # Observe while the actors still live: closing a producer aborts its open transaction
        # (librdkafka does), which would change what the case left behind.
        observed = observe(case, client, target, bootstrap, ns, art)
        case_run.close()
        crashed = target.health()
        if crashed:
            raise TargetCrashed(None, crashed)
        if proxy is not None:
            steps.checks += proxy.fault_checks()
        raw_outcome = {"steps": steps.records, **observed, "faults": steps.fault_events}
        outcome = ns.unmap(raw_outcome)
        if case.workload is not None:
            checks = steps.checks + case_run.check(outcome, proxy.transcript_lines() if proxy is not None else None)
            row["workload"] = case_run.summary
            outcome = workload_outcome(case_run.summary)
            raw_outcome = {"steps": steps.records}
            for name in ("history.jsonl", "timeline.html", "anomalies.json", "wire.json", "final.json"):
                row["artifacts"][name.split(".")[0]] = str(art_rel / name)
        else:
            frames = decode_transcript(proxy.transcript_lines(), ns.unmap) if proxy is not None else None
            checks = steps.checks + evaluate(case, outcome, client, case_run.resolve_case, frames)
        if observed.get("observe_errors"):
            checks.append({"name": "observation", "passed": False,
                           "message": "; ".join(ns.unmap(observed["observe_errors"]))})
        row["checks"] = checks
        row["unspecified"] = sum(1 for c in checks if c.get("unspecified"))
        row["outcome"] = normalise_outcome(outcome)
        row["verdict"] = "pass" if all(c["passed"] for c in checks) else "fail"
        if row["known_difference"] and row["verdict"] == "fail":
            row["reason"] = f"known difference: {row['known_difference']}"
    except TargetCrashed as exc:
        row["verdict"] = "crash"
        where = f"after step {exc.step}" if exc.step is not None else "by the end of the case"
        row["reason"] = f"the target died {where}: {exc.reason}"
        row["outcome"] = normalise_outcome(ns.unmap(raw_outcome))
        (art / "crash.txt").write_text(f"{row['reason']}\n\n{target.last_words(40) if target else ''}\n")
        row["artifacts"]["crash"] = str(art_rel / "crash.txt")
        slot.dirty = True
    except NotApplicable as exc:
        row["verdict"] = "not_applicable"
        row["reason"] = exc.reason
        slot.dirty = slot.dirty or (target is not None and not plan.shared)
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
        if proxy is not None:
            path = proxy.end_case(art / "transcript.jsonl")
            if path is not None:
                row["artifacts"]["transcript"] = str(art_rel / "transcript.jsonl")
            if proxy is not slot.proxy:
                proxy.stop()
        row["artifacts"]["logs"] = _copy_logs(target, log_offsets, art, art_rel)
        (art / "steps.json").write_text(json.dumps(ns.unmap(raw_outcome.get("steps", [])), indent=1, default=str))
        drivers = sorted(str(art_rel / p.name) for p in art.glob("*.log") if not p.name.startswith("broker-"))
        if drivers:
            row["artifacts"]["driver_logs"] = drivers
        if plan is not None and plan.shared:
            if target is not None:
                shared.release(slot.name, target, healthy=row["verdict"] != "crash")
        else:
            slot.after_row(fresh)
    row["duration_s"] = round(time.monotonic() - t0, 3)
    return row


def workload_outcome(summary: dict) -> dict:
    """What a workload row compares with the reference's row of the same seed: which anomalies
    it had and which error codes crossed the wire per API (and the clients reported per op) --
    kinds, not counts: two correct brokers answer different numbers of retriable errors, the
    counts are in the row's `workload` summary and `kconform workload`'s comparison."""
    return {"anomalies": sorted(summary.get("anomalies") or {}),
            "wire_errors": {api: sorted(codes) for api, codes in (summary.get("wire_errors") or {}).items()},
            "client_errors": {op: sorted(codes) for op, codes in (summary.get("client_errors") or {}).items()}}


def _log_sizes(target) -> dict[Path, int]:
    """Where each node log stands now: the row keeps only what is written after."""
    out = {}
    for path in target.log_files():
        try:
            out[path] = path.stat().st_size
        except OSError:
            pass
    return out


def _copy_logs(target, offsets: dict[Path, int], art: Path, art_rel: Path) -> list[str]:
    """The part of every broker log written during this case, beside the results."""
    if target is None:
        return []
    out = []
    for path in target.log_files():
        name = f"broker-{path.parent.name}-{path.name}"
        try:
            with open(path, "rb") as src, open(art / name, "wb") as dst:
                src.seek(offsets.get(path, 0))
                shutil.copyfileobj(src, dst)
            out.append(str(art_rel / name))
        except OSError:
            continue
    return out
