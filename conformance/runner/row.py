"""One row of a run: one case on one target with one client, always ending in a results row.

A row goes through four phases (RowRun): its plan (row_plan, decided before anything starts:
broker configs, proxy, shared instance or the worker's own, or why the row cannot run), the
start (a target instance, the rest of the applicability rules, the case's topics), the play
(the steps -- or a workload -- the end-of-case observations, the checks) and the finish
(artifacts written, the instance kept or released). The row itself is a
conformance.results.Row; its verdict is decided in one place per outcome: Row.judge for a case
that ran to its checks, Row.end for a verdict exception (NotApplicable, TargetUnavailable,
TargetCrashed), `error` for anything else.

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
from conformance.targets import Target, target_class

from .. import group_protocol, security
from ..dsl.model import Case
from ..history import client_flaws, reference_bugs
from ..proxy.transcript import decode_line
from ..results import Check, NotApplicable, Row, TargetCrashed, Verdict, VerdictException
from .actors import client_version
from .case_run import CaseRun
from .checks import evaluate
from .faults import plan_broker_configs
from .namespace import Namespace
from .observe import observe
from .proxying import ADVERTISE, EVENTS_FILE, REWRITE, ProxyFront, front_mode
from .slots import SharedTargets, TargetSlot, reuse_key
from .transcript_check import decode_transcript
from .workload_run import WorkloadRun
from ..apps import run_class as application_run_class
from ..apps.base import ApplicationRun

#: Broker configs that change transactional behaviour: a target that cannot apply them
#: (Tansu, external) makes a case that sets them not applicable.
BEHAVIOUR_CONFIG_PREFIXES = ("transaction", "transactional.id", "producer.id", "min.insync.replicas",
                             "unclean.leader.election")
#: Capabilities discovered only once the target runs (checked after start) or planned precisely
#: elsewhere (fault points: plan_broker_configs says why one cannot be realised).
LATE_CAPABILITIES = frozenset({"transactions", "describe_transactions", "list_transactions",
                               "describe_producers", "multi_node", "fault_points", "txn_verification",
                               "consumer_group_protocol"})
#: What a workload row writes beside its results (the row's artifacts name each by its stem).
WORKLOAD_ARTIFACTS = ("history.jsonl", "timeline.html", "anomalies.json", "wire.json", "final.json")


@dataclass(frozen=True)
class RowPlan:
    """How a row runs, decided before anything starts (row_plan)."""

    broker_configs: dict[str, str]
    #: ADVERTISE (the target's own proxy), REWRITE (the row's own proxy) or None.
    proxy: str | None
    #: On the run's shared instance of the target (slots.SharedTargets), not the worker's own.
    shared: bool
    #: Why the row cannot run at all; None when it can.
    not_applicable: str | None = None

    @classmethod
    def refused(cls, reason: str) -> "RowPlan":
        return cls({}, None, False, reason)

    def key(self, case: Case) -> tuple | None:
        """What a started instance must match to serve the row (None: the row starts nothing)."""
        if self.not_applicable is not None:
            return None
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


def known_reference_bug(case: Case, target: str) -> str | None:
    """The Kafka bug a row of `case` on `target` fails by, when the target is Apache Kafka (any
    release) and the case names one (Case.reference_bug); None elsewhere."""
    return case.reference_bug() if target_class(target).reference else None


def not_applicable(case: Case, name: str, proxy_mode: str, target: Target | None = None) -> str | None:
    """Why `case` cannot run on target `name` (None: it can) -- every rule in one place. Before
    the start (`target` None): what the target's class, this machine and the run's options
    decide; once `target` runs: what only it can answer (the capabilities it discovered from
    ApiVersions, the broker configs it refuses). The proxy's and the fault points' own reasons
    come from front_mode and plan_broker_configs, which row_plan asks."""
    if target is not None:
        essential = target.unappliable_configs(_behaviour_configs(case))
        if essential:
            return f"target {name!r} cannot apply the broker configs {essential}"
        topic_reason = target.topic_configs_reason(case.topology.topics)
        if topic_reason:
            return topic_reason
        lacking = sorted(case.needed_capabilities() - set(target.capabilities) - {"multi_node"})
        if lacking:
            return f"target {name!r} lacks {', '.join(lacking)}"
        return group_protocol.target_reason(case, name, target.capabilities)
    why = group_protocol.case_reason(case)
    if why is not None:
        return why
    cls = target_class(name)
    missing_clients = [c for c in case.pinned_clients() if not CLIENTS[c].availability()[0]]
    if missing_clients:
        return f"the case pins client(s) {missing_clients}, not available here"
    lacking = sorted(case.needed_capabilities() - LATE_CAPABILITIES - set(cls.static_capabilities))
    if lacking:
        return f"target {name!r} lacks {', '.join(lacking)}, which the case's faults need"
    if not cls.applies_broker_configs and _behaviour_configs(case):
        return f"target {name!r} cannot apply the broker configs {_behaviour_configs(case)}"
    if case.needs_proxy() and proxy_mode == "off":
        return "the case needs the proxy, and this run has it off (--proxy off)"
    return None


def row_plan(case: Case, name: str, proxy_mode: str, can_share: bool = True) -> RowPlan:
    """How the case runs on target `name` (RowPlan), or why it cannot run there at all. A
    fault-free case runs on the run's shared instance where the target is shareable (slots.py)."""
    why = not_applicable(case, name, proxy_mode)
    if why is not None:
        return RowPlan.refused(why)
    cls = target_class(name)
    shared = (can_share and cls.shareable and not case.topology.exclusive and not case.node_faults()
              and not case.changes_broker_wide_state()
              and not case.needs_broker_traffic() and case.workload is None and case.application is None)
    try:
        proxy = front_mode(cls, case, shared) if case.needs_proxy() or proxy_mode == "auto" else None
        return RowPlan({**case.topology.broker_configs, **plan_broker_configs(case, cls, name)}, proxy, shared)
    except NotApplicable as exc:
        return RowPlan.refused(exc.reason)


def run_one(case: Case, slot: TargetSlot, client: str, ctx: RowContext, fresh: bool,
            shared: SharedTargets | None = None, plan: RowPlan | None = None) -> Row:
    """Run one case on one target with one client; always returns its row. `shared`: the run's
    shared instances (None: every row on the slot's own); `plan`: the row's plan when the run
    made it already (runner.plan), else it is made here."""
    if plan is None:
        plan = row_plan(case, slot.name, slot.proxy_mode, can_share=shared is not None and not fresh)
    r = RowRun(case, slot, client, ctx, plan)
    try:
        r.start(shared, fresh)
        r.play()
    except VerdictException as exc:
        r.ended(exc)
    except Exception as exc:  # noqa: BLE001 - one broken run must not end the others
        r.errored(exc)
    finally:
        r.finish(shared, fresh)
    return r.row


class RowRun:
    """One row while it runs: the Row being built, and what one phase hands the next (module
    doc). Every attribute but `row` is None or empty until the phase that sets it."""

    def __init__(self, case: Case, slot: TargetSlot, client: str, ctx: RowContext, plan: RowPlan) -> None:
        self.t0 = time.monotonic()
        self.case, self.slot, self.client, self.plan = case, slot, client, plan
        self.art_rel = Path("artifacts") / slot.name / client / _safe(case.id)
        self.art = ctx.results_dir / self.art_rel
        if self.art.exists():
            shutil.rmtree(self.art)
        self.art.mkdir(parents=True, exist_ok=True)
        self.row = Row(run_id=ctx.run_id, started_at=now_iso(), case=case.id, case_title=case.title,
                       tags=list(case.tags), scenario=list(case.scenario), target=slot.name,
                       target_version="unknown", client=client, client_version=client_version(client),
                       artifacts={"steps": str(self.art_rel / "steps.json"), "logs": []},
                       known_difference=known_difference(case, slot.name, client),
                       known_reference_bug=known_reference_bug(case, slot.name),
                       security_protocol=security.current().protocol if security.current().secured else None,
                       group_protocol=group_protocol.row_protocol())
        self.ns = Namespace()
        # set by start()
        self.target: Target | None = None
        self.bootstrap = ""
        self.proxy: ProxyFront | None = None
        self.log_offsets: dict[Path, int] = {}
        # set by play(): the case's run and what its steps recorded (steps.json, a crash's outcome)
        self.case_run: CaseRun | WorkloadRun | ApplicationRun | None = None
        self.raw_outcome: dict = {}

    def start(self, shared: SharedTargets | None, fresh: bool) -> None:
        """A target instance for the row, the row's proxy, the case's topics."""
        case, slot, plan = self.case, self.slot, self.plan
        if plan.not_applicable is not None:
            raise NotApplicable(plan.not_applicable)
        why = case.not_for_client(self.client) or group_protocol.client_reason(
            case, self.client, CLIENTS[self.client].features)
        if why is not None:
            raise NotApplicable(why)
        if plan.shared:
            self.target, self.bootstrap = shared.acquire(slot.name, case, plan.broker_configs)
        else:
            self.target, self.bootstrap = slot.acquire(case, plan.broker_configs, plan.proxy, fresh)
            self.proxy = slot.proxy
        if plan.proxy == REWRITE:
            self.proxy = ProxyFront.rewriting(self.target)
            self.bootstrap = self.proxy.bootstrap
        self.row.target_version = self.target.version
        why = not_applicable(case, slot.name, slot.proxy_mode, self.target)
        if why is not None:
            raise NotApplicable(why)
        self.log_offsets = _log_sizes(self.target)
        if case.topology.topics:
            self.target.create_topics([dataclasses.replace(t, name=self.ns.name(t.name)) for t in case.topology.topics])
        if self.proxy is not None:
            self.proxy.begin_case()

    def play(self) -> None:
        """The steps (or the workload), the observations, the checks, the verdict."""
        case, target, proxy, ns = self.case, self.target, self.proxy, self.ns
        if case.application is not None:
            return self.play_application()
        run_class = WorkloadRun if case.workload is not None else CaseRun
        self.case_run = run_class(case, target, self.client, self.bootstrap, ns, self.art, proxy)
        try:
            steps = self.case_run.run_steps()
        finally:
            self.raw_outcome = {"steps": self.case_run.result.records, "faults": self.case_run.result.fault_events}
        if steps.fault_events or target.down or case.changes_broker_wide_state():
            self.slot.dirty = True
        # Observe while the actors still live: closing a producer aborts its open transaction
        # (librdkafka does), which would change what the case left behind.
        observed = observe(case, self.case_run.observer_client, target, self.bootstrap, ns, self.art)
        self.case_run.close()
        crashed = target.health()
        if crashed:
            raise TargetCrashed(None, crashed)
        if proxy is not None:
            steps.checks += proxy.fault_checks()
            members = group_protocol.members_check(case, proxy.transcript_lines())
            if members is not None:
                steps.checks.append(members)
        self.raw_outcome = {"steps": steps.records, **observed, "faults": steps.fault_events}
        outcome = ns.unmap(self.raw_outcome)
        if case.workload is not None:
            lines = proxy.transcript_lines() if proxy is not None else None
            checks = steps.checks + self.case_run.check(outcome, lines)
            self.row.workload = self.case_run.summary
            self._explain_by_reference_bug(lines or [])
            self._explain_by_client_flaws(lines or [])
            outcome = workload_outcome(self.case_run.summary)
            self.raw_outcome = {"steps": steps.records}
            for name in WORKLOAD_ARTIFACTS:
                self.row.artifacts[name.split(".")[0]] = str(self.art_rel / name)
        else:
            frames = decode_transcript(proxy.transcript_lines(), ns.unmap) if proxy is not None else None
            checks = steps.checks + evaluate(case, outcome, self.client, self.case_run.resolve_case, frames)
        if observed.get("observe_errors"):
            checks.append(Check("observation", False, "; ".join(ns.unmap(observed["observe_errors"]))))
        self.row.outcome = normalise_outcome(outcome)
        self.row.judge(checks)

    def _explain_by_reference_bug(self, transcript: list[dict]) -> None:
        """A workload row whose every anomaly is proved to be a known Kafka bug
        (history/reference_bugs.py) fails with that bug as its reason, and its summary keeps the
        proof; anything unproved stays an unexplained failure. Proved from the broker's own log on
        Apache Kafka; from the transcript on any target (a bug of the protocol state Kafka keeps,
        which a broker keeping the same state -- the embedded one -- shows the same way)."""
        if not self.case_run.anomalies:
            return
        found = None
        events = self.case_run.history.events()
        if target_class(self.slot.name).reference:
            lines = self.ns.unmap(_log_lines(self.target, self.log_offsets, reference_bugs.NEEDLES))
            found = reference_bugs.explain(self.case_run.anomalies, events, lines)
        if found is None and transcript:
            found = reference_bugs.explain_on_wire(self.case_run.anomalies, events, transcript, decode_line,
                                                   self.ns.unmap)
        if found is not None:
            self.row.known_reference_bug = found.key
            self.row.workload["reference_bug"] = found.to_dict()

    def _explain_by_client_flaws(self, lines: list[dict]) -> None:
        """Anomalies the transcript proves to be a client's protocol violation
        (history/client_flaws.py): kept in the summary; when they are all of the row's anomalies,
        the row fails with the client's flaw as its reason, not as a finding about the broker."""
        if not self.case_run.anomalies or self.row.known_reference_bug:
            return
        clients = {wk.name: wk.client or self.client for wk in self.case.workload.workers}
        found = client_flaws.explain(self.case_run.anomalies, lines, decode_line, clients, self.ns.unmap,
                                     self.case_run.history.events())
        if found is None:
            return
        self.row.workload["client_flaws"] = [f.to_dict() for f in found.flaws]
        if found.complete:
            self.row.client_flaw = found.reason()

    def play_application(self) -> None:
        """An application (conformance/apps) instead of steps: it verifies exactly-once itself;
        its checks are the row's, its summary the row's `application`, and its outcome (compared
        with the reference's row) the counts that must be 0 and the kinds of error codes on the wire."""
        target, proxy = self.target, self.proxy
        cls = application_run_class(self.case.application.kind)
        self.case_run = run = cls(self.case, target, self.bootstrap, self.ns, self.art, proxy)
        self.row.client_version = cls.program
        try:
            checks = run.run()
        finally:
            self.raw_outcome = {"steps": run.records, "faults": run.fault_events}
            if run.fault_events or target.down or run.leaves_state:
                self.slot.dirty = True
        run.close()
        crashed = target.health()
        if crashed:
            raise TargetCrashed(None, crashed)
        summary = {**run.summary, **run.wire(proxy.transcript_lines() if proxy is not None else None)}
        self.row.application = summary
        self.row.outcome = normalise_outcome(application_outcome(summary))
        self.row.judge(checks)

    def ended(self, exc: VerdictException) -> None:
        """A verdict exception ended the row: a crash keeps what the steps did and the target's
        last words; an instance a not-applicable row started for itself is not kept."""
        self.row.end(exc)
        if isinstance(exc, TargetCrashed):
            self.row.outcome = normalise_outcome(self.ns.unmap(self.raw_outcome))
            last_words = self.target.last_words(40) if self.target else ""
            (self.art / "crash.txt").write_text(f"{self.row.reason}\n\n{last_words}\n")
            self.row.artifacts["crash"] = str(self.art_rel / "crash.txt")
            self.slot.dirty = True
        elif self.target is not None and not self.plan.shared:
            self.slot.dirty = True

    def errored(self, exc: Exception) -> None:
        """kconform could not run the case: the row says what went wrong, error.txt where."""
        self.row.verdict = Verdict.ERROR
        self.row.reason = f"{type(exc).__name__}: {exc}"
        (self.art / "error.txt").write_text(traceback.format_exc())
        self.slot.dirty = True

    def finish(self, shared: SharedTargets | None, fresh: bool) -> None:
        """Whatever the verdict: drivers closed, the transcript, logs and step records beside
        the row, the instance kept for the next row or released."""
        row, art, art_rel = self.row, self.art, self.art_rel
        if self.case_run is not None:
            self.case_run.close()
        if self.proxy is not None:
            if self.proxy.end_case(art / "transcript.jsonl") is not None:
                row.artifacts["transcript"] = str(art_rel / "transcript.jsonl")
            if (art / EVENTS_FILE).is_file():
                row.artifacts["proxy_events"] = str(art_rel / EVENTS_FILE)
            if self.proxy is not self.slot.proxy:
                self.proxy.stop()
        row.artifacts["logs"] = _copy_logs(self.target, self.log_offsets, art, art_rel)
        steps = self.ns.unmap(self.raw_outcome.get("steps", []))
        (art / "steps.json").write_text(json.dumps(steps, indent=1, default=str))
        drivers = sorted(str(art_rel / p.name) for p in art.glob("*.log") if not p.name.startswith("broker-"))
        if drivers:
            row.artifacts["driver_logs"] = drivers
        if self.plan.shared:
            if self.target is not None:
                shared.release(self.slot.name, self.target, healthy=row.verdict != Verdict.CRASH)
        else:
            self.slot.after_row(fresh)
        row.duration_s = round(time.monotonic() - self.t0, 3)


def workload_outcome(summary: dict) -> dict:
    """What a workload row compares with the reference's row of the same seed: which anomalies
    it had and which error codes crossed the wire per API (and the clients reported per op) --
    kinds, not counts: two correct brokers answer different numbers of retriable errors, the
    counts are in the row's `workload` summary and `kconform workload`'s comparison."""
    return {"anomalies": sorted(summary.get("anomalies") or {}),
            "wire_errors": {api: sorted(codes) for api, codes in (summary.get("wire_errors") or {}).items()},
            "client_errors": {op: sorted(codes) for op, codes in (summary.get("client_errors") or {}).items()}}


def application_outcome(summary: dict) -> dict:
    """What an application row compares with the reference's row: the counts that must be 0 and
    the kinds of error codes that crossed the wire per API (the counts are in Row.application)."""
    if "driver_result" in summary:  # streams_smoke: what the driver's verification said
        out: dict = {"driver_result": summary["driver_result"]}
    else:
        out = {k: {x: (summary.get(k) or {}).get(x) for x in ("duplicates", "losses", "unexpected")}
               for k in ("output", "concurrent")}
    out["wire_errors"] = {api: sorted(codes) for api, codes in (summary.get("wire_errors") or {}).items()}
    return out


def _log_sizes(target) -> dict[Path, int]:
    """Where each node log stands now: the row keeps only what is written after."""
    out = {}
    for path in target.log_files():
        try:
            out[path] = path.stat().st_size
        except OSError:
            pass
    return out


def _log_lines(target, offsets: dict[Path, int], needles: tuple[str, ...]) -> list[str]:
    """The lines holding one of `needles` that every broker log got during this row."""
    out: list[str] = []
    for path in target.log_files() if target is not None else []:
        try:
            with open(path, "r", encoding="utf-8", errors="replace") as f:
                f.seek(offsets.get(path, 0))
                out += [line for line in f if any(n in line for n in needles)]
        except OSError:
            continue
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
