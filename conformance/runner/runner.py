"""The conformance run: every case on every target with every client, into DIR/results.jsonl.

Isolation (a target start costs seconds, a row's unique names nothing; the figures are in
docs/measurements.md):
- every case run gets unique topic / transactional.id / group names (namespace.py), so no two
  runs share records, producer state or offsets even on one broker;
- a started target serves the next case run when that is safe (slots.py): same topology and
  broker configs, nothing done to its nodes, and a target that is reusable at all -- a peer
  under test starts fresh every time. `--fresh` forces fresh starts everywhere.

Parallel rows (`jobs`): the rows (case x target x client) are independent, and a row spends most
of its time waiting -- on timeouts the case sets, on client start-up, on the broker -- so N
workers run N rows at once. Each worker owns its target instances (slots.TargetSlot: its own
brokers, proxy and work directory), except that fault-free rows on a target built for many
clients (Apache Kafka: `shareable`) run on one shared instance per broker configuration
(slots.SharedTargets), each behind its own rewriting proxy -- so no row sees another's frames,
rules or broker state. Work is handed out so that a worker keeps getting rows its own instance
can serve (same target and reuse key), which keeps starts few. `jobs=1` is the sequential run,
through the same code and the same instances.

The results are the same whatever `jobs` is: rows go to DIR/results.jsonl as they finish (so an
interrupted run keeps what it did), and when the run ends the file is rewritten in the plan's
order (targets as given, the reference first; cases; clients), each non-reference row carrying
its structural diff against the reference target's row for the same case and client
(RunRecord: the pytest plugin records its rows the same way).

Each row's plan (row.row_plan: broker configs, proxy, shared instance, or why it cannot run) is
made once, with the run's plan, and both the work hand-out and the row itself use it.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import secrets
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from conformance.clients.process import ClientProcess
from conformance.clients.registry import CLIENTS
from conformance.compare import structural_diff
from conformance.targets import split_name, target_class

from .. import baseline as baselines_
from .. import group_protocol, security
from ..security import Security
from ..dsl.model import APPLICATION_CLIENT, Case
from ..provenance import environment
from ..results import ResultsFile, Row
from .row import RowContext, RowPlan, now_iso, row_plan, run_one
from .slots import SharedTargets, TargetSlot

#: Rows one core can overlap: a row is mostly waiting (on timeouts, client start-up, the broker;
#: docs/measurements.md), so two per core keeps the cores busy without making the cases' own
#: timeouts late.
ROWS_PER_CPU = 2
#: Rows one core overlaps when no node of the run is a heavy process (Target.heavy_nodes: no JVM
#: broker) and the run is plaintext (no TLS or SCRAM on every connection): the whole library on
#: embedded used 72 % of two cores at three rows per core, with the same verdicts as at two
#: (docs/measurements.md).
ROWS_PER_CPU_LIGHT = 3
MAX_DEFAULT_JOBS = 8


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
    #: Rows run at once (None: default_jobs(targets, security)).
    jobs: int | None = None
    #: Target -> its baseline (conformance/baseline.py): every row is judged against it.
    baselines: dict = field(default_factory=dict)
    #: (I, N): run only the I-th of N parts of the plan (shard.py); None: all of it.
    shard: tuple[int, int] | None = None
    #: What balances the shards (shard.Durations; None: the library's cases/durations.json).
    durations: object | None = None
    #: The command line that made the run, without machine paths (provenance.command_line).
    command: str | None = None
    #: What every target, driver and internal question of the run speaks (conformance/security.py).
    security: Security = field(default_factory=Security)
    #: The consumer group protocol of every consumer the run's cases create (conformance/group_protocol.py).
    group_protocol: str = group_protocol.CLASSIC


@dataclass(frozen=True)
class PlannedRow:
    """One row of the plan; `index` is its place in results.jsonl, `how` its RowPlan."""

    index: int
    target: str
    case: Case
    client: str
    how: RowPlan


def default_jobs(targets: Iterable[str] = (), sec: Security | None = None) -> int:
    """What suits this machine and the run: two rows per core (module doc), three when the run
    names its targets and none of them has heavy nodes and it is plaintext; at least 2, at most 8."""
    light = bool(targets) and not any(target_class(t).heavy_nodes for t in targets) \
        and not (sec or Security()).secured
    per_cpu = ROWS_PER_CPU_LIGHT if light else ROWS_PER_CPU
    return max(2, min(MAX_DEFAULT_JOBS, per_cpu * (os.cpu_count() or 1)))


def default_clients() -> list[str]:
    return [name for name, spec in CLIENTS.items() if spec.availability()[0]]


def new_run_id() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def reference_target(targets: list[str]) -> str | None:
    """The target every other one is diffed against, when the run has other targets too: Apache
    Kafka at its default release (`apache-kafka`, the release the cases' expectations are
    measured on) where the run has it, else the first Apache Kafka release given -- so
    `--target apache-kafka@3.9.1 --target apache-kafka` shows 3.9.1 against the current release."""
    if len(targets) < 2:
        return None
    kafkas = [t for t in targets if target_class(t).reference]
    return next((t for t in kafkas if split_name(t)[1] is None), kafkas[0] if kafkas else None)


def case_clients(case: Case, clients: list[str]) -> list[str]:
    """The clients a case runs with: the run's, except for an application, which brings its own
    (Kafka's tools, conformance/apps): one row per target."""
    return [APPLICATION_CLIENT] if case.application is not None else clients


def plan(targets: list[str], cases: Iterable[Case], clients: list[str], reference: str | None,
         proxy_mode: str = "auto", fresh: bool = False) -> list[PlannedRow]:
    """Every row, in results order: the reference target first, then the others as given; each
    with its RowPlan (a fresh run shares no instance)."""
    ordered = sorted(targets, key=lambda t: t != reference)
    cases = list(cases)
    rows = []
    for t in ordered:
        for case in cases:
            how = row_plan(case, t, proxy_mode, can_share=not fresh)
            for client in case_clients(case, clients):
                rows.append(PlannedRow(len(rows), t, case, client, how))
    return rows


def attach_diffs(rows: list[Row], reference: str | None) -> None:
    """Each row's structural diff against the reference target's row for the same case and
    client (when both ran: pass or fail)."""
    if reference is None:
        return
    ref = {(r.case, r.client): r.outcome for r in rows if r.target == reference and r.verdict.ran}
    for r in rows:
        if r.target == reference or not r.verdict.ran:
            continue
        outcome = ref.get((r.case, r.client))
        if outcome is not None:
            r.reference_target = reference
            r.diff = structural_diff(outcome, r.outcome)


class RunRecord:
    """The rows of a run as they finish, into results.jsonl (conformance.results.ResultsFile):
    each appended at once -- with its diff when the reference's row of its case and client is
    already there -- and the whole file rewritten at the end, every diff attached, in the order
    given (module doc). Safe to add to from several workers."""

    def __init__(self, run_dir: Path, reference: str | None, baselines: dict | None = None) -> None:
        self.file = ResultsFile(run_dir)
        self.reference = reference
        #: target -> Baseline: each row is judged against its target's as it is added.
        self.baselines = baselines or {}
        self.rows: list[Row] = []
        self._references: dict[tuple[str, str], Row] = {}
        self._lock = threading.Lock()
        self.file.start()

    def add(self, row: Row) -> None:
        baselines_.apply([row], self.baselines)
        with self._lock:
            if row.target == self.reference:
                self._references[(row.case, row.client)] = row
            elif (ref := self._references.get((row.case, row.client))) is not None:
                attach_diffs([ref, row], self.reference)
            self.rows.append(row)
            self.file.append(row)

    def finish(self, order: list[Row] | None = None) -> list[Row]:
        """The final file: `order` (default: as added), diffed against the reference."""
        with self._lock:
            rows = self.rows if order is None else order
            attach_diffs(rows, self.reference)
            self.file.write(rows)
            return rows


# ============================================================================ work hand-out
def cost_class(case: Case) -> int:
    """A coarse guess of a row's length from the case alone: 2 for a multi-node cluster (start,
    elections: the longest rows, docs/measurements.md), 1 for a case that waits 5 s or more on
    its own waits, proxy delays and node faults, else 0."""
    if case.topology.nodes > 1:
        return 2
    waited = sum(s.wait_ms for s in case.steps if s.kind == "wait")
    waited += sum(f.proxy.delay_ms or 0 for f in case.faults() if f.proxy is not None)
    waited += 5000 * len(case.node_faults())
    return 1 if waited >= 5000 else 0


def heavy(row: PlannedRow) -> bool:
    """A row that starts a multi-node instance of a target whose nodes are heavy processes
    (Target.heavy_nodes: Apache Kafka's JVMs)."""
    return row.case.topology.nodes > 1 and target_class(row.target).heavy_nodes


def default_heavy_limit() -> int:
    """Heavy rows at once: one per two cores. Several multi-node JVM clusters starting together
    on a 2-core machine overload it until a cluster misses its own registration timeout, while
    one at a time beside light workers starts in time (docs/measurements.md)."""
    return max(1, (os.cpu_count() or 2) // 2)


class WorkQueue:
    """The rows not yet started, handed out so that workers keep their instances busy.

    Order: the long rows first (cost_class: multi-node clusters, then cases that wait on
    faults and timeouts), so that the run does not end on one of them while the other workers
    are idle; within that, per target, the rows whose target instance can be reused grouped by
    reuse key (topology, broker configs, proxy) -- fault-free cases before those that dirty an
    instance -- and a worker asks for a row its slot already holds an instance for before
    taking the next in line. At most `heavy_limit` heavy rows (see heavy()) run at once: a
    worker passes over them while the limit is reached, and waits only when nothing else is
    left."""

    def __init__(self, rows: list[PlannedRow], heavy_limit: int | None = None) -> None:
        self._cond = threading.Condition()
        self.heavy_limit = heavy_limit or default_heavy_limit()
        self._heavy_running = 0
        self._heavy = {r.index for r in rows if heavy(r)}  # decided once per row
        keyed = [(r, r.how.key(r.case)) for r in rows]  # None: not applicable, starts nothing
        # Stable sort: the plan's order within a group; groups of a target stay together.
        targets = list(dict.fromkeys(r.target for r in rows))
        keyed.sort(key=lambda rk: (-cost_class(rk[0].case), targets.index(rk[0].target)) + self._group(rk))
        self._pending: list[tuple[PlannedRow, tuple | None]] = keyed


    @staticmethod
    def _group(rk: tuple[PlannedRow, tuple | None]) -> tuple:
        row, key = rk
        if key is None or not target_class(row.target).reusable:
            return (0, "", bool(row.case.faults()))
        return (1, repr(key), bool(row.case.faults()))

    def _choose(self, slots: dict[str, TargetSlot]) -> int | None:
        """The index of the row to hand out now, or None while only held-back heavy rows remain."""
        room = self._heavy_running < self.heavy_limit
        admissible = [i for i, (row, _) in enumerate(self._pending) if room or row.index not in self._heavy]
        for i in admissible:
            row, key = self._pending[i]
            slot = slots.get(row.target)
            # key[-1]: the row runs on a shared instance, which any worker may use
            if key is not None and not key[-1] and slot is not None and slot.holds(key[:-1]):
                return i
        return admissible[0] if admissible else None

    def take(self, slots: dict[str, TargetSlot], stop: Callable[[], bool] = lambda: False) -> PlannedRow | None:
        """The next row for a worker holding `slots`; None when the queue is empty or stop()."""
        with self._cond:
            while self._pending and not stop():
                i = self._choose(slots)
                if i is not None:
                    row = self._pending.pop(i)[0]
                    self._heavy_running += row.index in self._heavy
                    return row
                self._cond.wait(timeout=1.0)  # a heavy row is running; another may end it
            return None

    def done(self, row: PlannedRow) -> None:
        """The worker finished `row` (whatever its verdict)."""
        if row.index in self._heavy:
            with self._cond:
                self._heavy_running -= 1
                self._cond.notify_all()


# ============================================================================ whole run
RUN_META = "run.json"


def write_meta(results_dir: Path, meta: dict) -> None:
    """DIR/run.json (docs/results-schema.md), replaced whole."""
    tmp = results_dir / (RUN_META + ".tmp")
    tmp.write_text(json.dumps(meta, indent=1))
    os.replace(tmp, results_dir / RUN_META)


def mark_failed(results_dir: Path, error: str) -> None:
    """run.json says the run did not finish, and why (kconform itself failed or was stopped)."""
    path = results_dir / RUN_META
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError):
        meta = {}
    meta.update(status="failed", error=error, finished_at=now_iso())
    results_dir.mkdir(parents=True, exist_ok=True)
    write_meta(results_dir, meta)


def _versions(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    out: dict[str, set[str]] = {}
    for name, version in pairs:
        if version and version != "unknown":
            out.setdefault(name, set()).add(version)
    return {name: ", ".join(sorted(v)) for name, v in out.items()}


def select_shard(rows: list[PlannedRow], shard: tuple[int, int], durations=None) -> tuple[list[PlannedRow], dict]:
    """The rows of shard I of N (shard.py), in plan order, and what run.json says of the split."""
    from .shard import DEFAULT_DURATIONS, Durations, split

    if durations is None:
        durations = Durations.load([DEFAULT_DURATIONS]) if DEFAULT_DURATIONS.is_file() else Durations()
    index, count = shard
    assignment = split(rows, count, durations, cost_class)
    mine = [r for r in rows if assignment.shard_of[(r.case.id, r.client)] == index]
    return mine, {"index": index, "count": count, "rows": len(mine), "planned_rows": len(rows),
                  "estimated_s": assignment.seconds, "split": assignment.digest(),
                  "durations": durations.source or "guessed from the cases"}


OnRow = Callable[[Row, int, int, int], None]  # row, done, total, worker
OnStart = Callable[[str, str, str, int], None]  # case, target, client, worker


def run(opts: RunOptions, on_row: OnRow | None = None, on_start: OnStart | None = None) -> list[Row]:
    """Run the plan with opts.jobs workers; returns the rows in results order (module doc)."""
    with security.use(opts.security), group_protocol.use(opts.group_protocol):
        return _run(opts, on_row, on_start)


def _run(opts: RunOptions, on_row: OnRow | None, on_start: OnStart | None) -> list[Row]:
    opts.results_dir.mkdir(parents=True, exist_ok=True)
    run_id = opts.run_id or new_run_id()
    reference = opts.reference or reference_target(opts.targets)
    rows_plan = plan(opts.targets, opts.cases, opts.clients, reference, opts.proxy, opts.fresh)
    targets = list(dict.fromkeys(p.target for p in rows_plan))
    shard_meta = None
    if opts.shard is not None:
        rows_plan, shard_meta = select_shard(rows_plan, opts.shard, opts.durations)
    jobs = max(1, min(opts.jobs or default_jobs(opts.targets, opts.security), len(rows_plan) or 1))
    record = RunRecord(opts.results_dir, reference, opts.baselines)
    shutil.rmtree(opts.results_dir / "artifacts", ignore_errors=True)  # no stale artifacts of an older run
    work = opts.results_dir / "work"
    ctx = RowContext(run_id, opts.results_dir)
    meta = {"run_id": run_id, "started_at": now_iso(), "status": "running", "targets": targets,
            "security_protocol": opts.security.protocol, "group_protocol": opts.group_protocol,
            "clients": opts.clients, "cases": [c.id for c in opts.cases], "reference_target": reference,
            "jobs": jobs, "command": opts.command, "versions": environment(),
            "baselines": {t: b.source for t, b in opts.baselines.items() if t in targets},
            "target_starts": {}, "target_start_seconds": {}}
    if shard_meta is not None:
        meta["shard"] = shard_meta
    write_meta(opts.results_dir, meta)  # `running` until the end: an interrupted run says so
    queue = WorkQueue(rows_plan)
    meta["heavy_limit"] = queue.heavy_limit
    shared = SharedTargets(opts.target_options, work)
    done_rows: dict[int, Row] = {}
    lock = threading.Lock()
    errors: list[BaseException] = []

    worker_slots: list[dict[str, TargetSlot]] = []

    def worker(wid: int) -> None:
        slots: dict[str, TargetSlot] = {}
        with lock:
            worker_slots.append(slots)
        try:
            while not errors:
                item = queue.take(slots, stop=lambda: bool(errors))
                if item is None:
                    return
                slot = slots.get(item.target)
                if slot is None:
                    slot = slots[item.target] = TargetSlot(item.target, opts.target_options.get(item.target, {}),
                                                           work / f"w{wid}", opts.proxy)
                if on_start:
                    on_start(item.case.id, item.target, item.client, wid)
                try:
                    row = run_one(item.case, slot, item.client, ctx, opts.fresh, shared, item.how)
                finally:
                    queue.done(item)
                record.add(row)
                with lock:
                    done_rows[item.index] = row
                    if on_row:
                        on_row(row, len(done_rows), len(rows_plan), wid)
        except BaseException as exc:  # noqa: BLE001 - stop the others, re-raised below
            errors.append(exc)
        finally:
            for name, slot in slots.items():
                slot.release()
                with lock:
                    meta["target_starts"][name] = meta["target_starts"].get(name, 0) + slot.starts
                    meta["target_start_seconds"].setdefault(name, []).extend(round(s, 3) for s in slot.start_seconds)

    threads: list[threading.Thread] = []
    try:
        if jobs == 1:
            worker(1)
        else:
            threads = [threading.Thread(target=worker, args=(w,), name=f"kconform-worker-{w}", daemon=True)
                       for w in range(1, jobs + 1)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM (cli.py): no worker takes another row, and every target this run
        # started is stopped here -- the workers are daemon threads and would leave their
        # brokers running when the interpreter exits.
        errors.append(KeyboardInterrupt())
        ClientProcess.kill_all()   # the rows' actors and observers: their own session, so still running
        for slots in list(worker_slots):
            for slot in list(slots.values()):
                slot.release()
        shared.stop_all()
        for t in threads:
            t.join(timeout=10)
        raise
    shared.stop_all()
    for name, n in shared.starts.items():
        meta["target_starts"][name] = meta["target_starts"].get(name, 0) + n
        meta["target_start_seconds"].setdefault(name, []).extend(round(s, 3) for s in shared.start_seconds.get(name, []))
    if errors:
        raise errors[0]
    rows = record.finish([done_rows[p.index] for p in rows_plan])
    meta["finished_at"] = now_iso()
    meta["status"] = "finished"
    meta["versions"]["targets"] = _versions((r.target, r.target_version) for r in rows)
    meta["versions"]["clients"] = _versions((r.client, r.client_version) for r in rows)
    write_meta(opts.results_dir, meta)
    shutil.rmtree(work, ignore_errors=True) if not os.environ.get("KCONFORM_KEEP_WORK") else None
    return rows
