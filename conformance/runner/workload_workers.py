"""The workers of a workload: one thread per WorkerDef, each driving its client process.

A worker is an actor whose process comes and goes (runner/actors.py): the nemesis kills it
(`crash`: SIGKILL, a new process after `down_s`) or closes it (`restart`), and the worker starts
the next process itself, with the same config -- a restarted application, the same
transactional.id. Every operation goes into the history (conformance/history) at its
invocation and at its completion, with the client's own outcome; nothing is retried behind
the history's back.

What each kind does (one "operation" of the workload's op limit per loop):
- producer / idempotent: a batch of sends (`wait: false`) then `flush`; each record's delivery
  completes its `send` (ok with its offset, or info: it may or may not have been written).
- transactional: begin, the records (planned at invocation, so a process that dies mid-way
  still leaves what it tried in the history), flush, hold the transaction open for a while
  (others overlap it), then commit or abort (`end_txn` records that the EndTxn was requested).
  Errors: abortable -> abort; fatal, fenced, a dead driver -> a new process (init_transactions
  fences the old one).
- copier: poll (a consumer in the group), then one transaction: each record copied to the
  output as `<value>@<partition>:<offset>`, the consumed offsets sent to the transaction,
  commit (or abort, then a clean restart so the process resumes from the committed offsets).
- reader: poll its assigned partitions (from offset 0) and record what came.
"""
from __future__ import annotations

import random
import threading
import time
from typing import Any, Protocol

from conformance.clients import ClientProcess, DriverStartError, Outcome

from ..dsl.model import WorkerDef, WorkloadDef
from ..history import History
from .actors import Actors
from .namespace import Namespace

#: An op's time budget (ms): sends and polls, and the ends of transactions.
OP_DEADLINE_MS = 15_000
END_DEADLINE_MS = 30_000
INIT_DEADLINE_MS = 30_000
POLL_MS = 500
#: Records a copier takes per transaction once the workload drains.
DRAIN_RECORDS = 200
#: Seconds to wait before a new process when starting one failed.
RETRY_S = 1.0
#: A worker whose client refuses its config this many times in a row gives up (a config the
#: client cannot take is not a broker's fault, and retrying it changes nothing).
MAX_REFUSED = 3


class ConfigRefused(RuntimeError):
    """The worker's client refuses its config (INVALID_ARGUMENT at creation)."""


def _err(out: Outcome) -> dict[str, Any] | None:
    if out.ok or out.error is None:
        return None
    e = out.error
    d = {"name": e.name, "message": (e.message or "")[:300], "retriable": e.retriable, "abortable": e.abortable,
         "fatal": e.fatal, "fenced": e.fenced, "origin": e.origin}
    return d


def _broken(out: Outcome) -> bool:
    """An outcome after which this process is of no more use: fatal or fenced, or the driver gone."""
    e = out.error
    return e is not None and (e.fatal or e.fenced or e.name in ("DRIVER_DIED", "DRIVER_TIMEOUT", "DRIVER_ERROR",
                                                                "ILLEGAL_STATE", "PRODUCER_FENCED"))


class WorkloadContext(Protocol):
    """What a worker needs of the workload it runs in (runner/workload_run.WorkloadRun)."""

    history: History
    w: WorkloadDef
    actors: Actors
    ns: Namespace
    partitions: dict[str, int]
    t0: float
    #: stop issuing operations / copiers: go on until `drained` / the target is gone
    stopping: threading.Event
    draining: threading.Event
    drained: threading.Event
    aborted: threading.Event

    def elapsed(self) -> float: ...

    def count_op(self) -> None: ...

    def worker_failed(self, name: str, exc: BaseException) -> None: ...

    def copier_consumer_config(self, wk: WorkerDef) -> dict[str, str]: ...


class Worker:
    """One worker and its thread (`start`, `join`, `is_alive` as a thread's)."""

    def __init__(self, run: WorkloadContext, wk: WorkerDef) -> None:
        self.thread = threading.Thread(target=self.loop, name=f"worker-{wk.name}", daemon=True)
        self.run_ = run
        self.wk = wk
        self.rng = random.Random(f"{run.w.seed}/{wk.name}")
        self.h = run.history
        self.ops_done = 0
        self.values = 0
        self.txns = 0
        #: Set by the nemesis: no new process before this time (monotonic).
        self.down_until = 0.0
        self.restart_requested = False
        self.inited_gen = 0
        self.consumer_gen = 0
        #: Never leaves before the end (a copier whose client cannot survive a rebalance).
        self.no_churn = False
        self.left = False
        self.refused = 0
        self._mutex = threading.Lock()

    def start(self) -> None:
        self.thread.start()

    def again(self) -> "Worker":
        """A new thread for the same worker (its process, counters and state carried over):
        a copier that left the group comes back to help drain the input."""
        w = Worker(self.run_, self.wk)
        w.rng, w.values, w.txns, w.ops_done = self.rng, self.values, self.txns, self.ops_done
        w.inited_gen, w.consumer_gen, w.no_churn = self.inited_gen, self.consumer_gen, self.no_churn
        w.down_until = self.down_until
        return w

    def join(self, timeout: float | None = None) -> None:
        if self.thread.ident is not None:   # a worker the plan left out never started
            self.thread.join(timeout)

    def is_alive(self) -> bool:
        return self.thread.is_alive()

    # ----------------------------------------------------------------- identity
    @property
    def live(self):
        return self.run_.actors.live[self.wk.name]

    @property
    def pname(self) -> str:
        return f"{self.wk.name}#{self.live.generation}"

    def next_value(self) -> str:
        self.values += 1
        return f"{self.wk.name}-{self.values}"

    # ----------------------------------------------------------------- nemesis side
    def crash(self, down_s: float) -> None:
        """kill -9 this worker's process now; its next process starts after down_s."""
        with self._mutex:
            self.down_until = time.monotonic() + down_s
            self.run_.actors.crash(self.wk.name)

    def request_restart(self) -> None:
        self.restart_requested = True

    # ----------------------------------------------------------------- the loop
    def should_go_on(self) -> bool:
        run = self.run_
        if run.aborted.is_set():
            return False
        if self.wk.kind == "copier" and run.draining.is_set():
            return not run.drained.is_set()
        if run.stopping.is_set() or self.ops_done >= self.wk.ops:
            return False
        if self.wk.stop_s is not None and not self.no_churn and run.elapsed() >= self.wk.stop_s:
            return False
        return True

    def loop(self) -> None:
        run = self.run_
        start = run.t0 + (0.0 if self.no_churn else self.wk.start_s)
        while time.monotonic() < start and not run.stopping.is_set():
            time.sleep(0.05)
        try:
            while self.should_go_on():
                proc = self.ensure()
                if proc is None:
                    continue
                self.step(proc)
                self.ops_done += 1
                run.count_op()
                lo, hi = self.wk.pause_ms
                if hi:
                    time.sleep(self.rng.randint(lo, hi) / 1000)
        except Exception as exc:  # noqa: BLE001 - a worker's own bug must not hang the workload
            self.h.event(self.pname, "worker_error", {"error": f"{type(exc).__name__}: {exc}"}, type="fail")
            run.worker_failed(self.wk.name, exc)
        finally:
            if (self.wk.stop_s is not None and not self.no_churn and not run.stopping.is_set()
                    and run.elapsed() >= self.wk.stop_s):
                self.leave()

    def leave(self) -> None:
        """The worker leaves the workload (a group member that goes away): a clean close."""
        if self.live.proc is not None and self.live.proc.alive:
            i = self.h.invoke(self.pname, "leave")
            self.run_.actors.restart(self.wk.name)
            self.h.complete(i, "ok")
        self.left = True

    # ----------------------------------------------------------------- processes
    def ensure(self) -> ClientProcess | None:
        """The worker's process, a new one when the last died, was closed or is unusable;
        transactional ones have called init_transactions. None: not now (recorded)."""
        wait = self.down_until - time.monotonic()
        if wait > 0:
            time.sleep(min(wait, 0.25))
            return None
        if self.restart_requested:
            self.restart_requested = False
            if self.live.proc is not None and self.live.proc.alive:
                i = self.h.invoke(self.pname, "close")
                self.run_.actors.restart(self.wk.name)
                self.h.complete(i, "ok")
        fresh = self.live.proc is None or not self.live.proc.alive
        if fresh:
            i = self.h.invoke(f"{self.wk.name}#{self.live.generation + 1}", "start")
            try:
                proc, failed = self.run_.actors.process(self.wk.name)
            except DriverStartError as exc:
                proc, failed = None, Outcome.failure("start", "DRIVER_ERROR", f"driver did not start: {exc}")
            if failed is not None or proc is None:
                self.h.complete(i, "fail", error=_err(failed) if failed else {"name": "DRIVER_ERROR"})
                self.refused = self.refused + 1 if failed is not None and failed.error_name == "INVALID_ARGUMENT" else 0
                if self.refused >= MAX_REFUSED:
                    raise ConfigRefused(f"its client refused the config {MAX_REFUSED} times: "
                                        f"{failed.error.message if failed and failed.error else ''}")
                time.sleep(RETRY_S)
                return None
            self.refused = 0
            self.h.complete(i, "ok", {"client": self.live.client})
        proc = self.live.proc
        if self.wk.transactional_id and self.inited_gen != self.live.generation:
            i = self.h.invoke(self.pname, "init", {"tid": self.wk.transactional_id})
            out = proc.call("init_transactions", INIT_DEADLINE_MS)
            if not out.ok:
                self.h.complete(i, "fail", error=_err(out))
                if _broken(out):
                    self.run_.actors.crash(self.wk.name)
                time.sleep(RETRY_S)
                return None
            self.h.complete(i, "ok")
            self.inited_gen = self.live.generation
        if self.wk.kind == "copier" and self.consumer_gen != self.live.generation:
            # The consumer only now, once init_transactions returned: InitProducerId completes
            # the previous process's transaction first, so the committed offsets this consumer
            # fetches are those of every transaction before -- a client that reads offsets
            # without require_stable (no KIP-447) would otherwise start from stale ones.
            i = self.h.invoke(self.pname, "subscribe", {"topics": list(self.wk.topics)})
            out = proc.call("create_consumer", INIT_DEADLINE_MS, config=self.run_.copier_consumer_config(self.wk))
            if out.ok:
                out = proc.call("subscribe", INIT_DEADLINE_MS, topics=[self.run_.ns.name(t) for t in self.wk.topics])
            if not out.ok:
                self.h.complete(i, "fail", error=_err(out))
                self.run_.actors.crash(self.wk.name)
                time.sleep(RETRY_S)
                return None
            self.h.complete(i, "ok")
            self.consumer_gen = self.live.generation
        return proc

    def step(self, proc: ClientProcess) -> None:
        getattr(self, f"_{self.wk.kind}")(proc)

    # ----------------------------------------------------------------- kinds
    def _pick(self) -> tuple[str, int]:
        topic = self.rng.choice(self.wk.topics)
        return topic, self.rng.randrange(self.run_.partitions[topic])

    def _producer(self, proc: ClientProcess) -> None:
        ns = self.run_.ns
        pending: dict[int, int] = {}
        for _ in range(self.rng.randint(*self.wk.records)):
            topic, part = self._pick()
            v = self.next_value()
            i = self.h.invoke(self.pname, "send", {"v": v, "topic": topic, "partition": part})
            out = proc.call("send", OP_DEADLINE_MS, topic=ns.name(topic), partition=part, key=self.wk.name,
                            value=v, wait=False)
            if not out.ok:
                # refused before it was queued (or the driver is gone: it may have gone out)
                gone = out.error is not None and out.error.name in ("DRIVER_DIED", "DRIVER_TIMEOUT")
                self.h.complete(i, "info" if gone else "fail", error=_err(out))
                if _broken(out):
                    self._flush_pending(pending, None, out)
                    return
                continue
            pending[out.data["seq"]] = i
        if not pending:
            return
        out = proc.call("flush", OP_DEADLINE_MS)
        deliveries = out.data.get("deliveries") if out.ok else (out.error.extra.get("deliveries") if out.error else None)
        self._flush_pending(pending, deliveries or [], out)

    _idempotent = _producer

    def _flush_pending(self, pending: dict[int, int], deliveries: list[dict] | None, out: Outcome) -> None:
        for d in deliveries or []:
            i = pending.pop(d.get("seq"), None)
            if i is None:
                continue
            if d.get("error"):
                err = d["error"] if isinstance(d["error"], dict) else {"name": str(d["error"])}
                self.h.complete(i, "info", error=err)
            else:
                self.h.complete(i, "ok", {"offset": d.get("offset"), "partition": d.get("partition")})
        for i in pending.values():
            self.h.complete(i, "info", error=_err(out) or {"name": "UNDELIVERED"})
        pending.clear()

    def _transactional(self, proc: ClientProcess) -> None:
        records = []
        for _ in range(self.rng.randint(*self.wk.records)):
            topic, part = self._pick()
            records.append([self.next_value(), topic, part])
        self._transaction(proc, records, consumed=None)

    def _copier(self, proc: ClientProcess) -> None:
        run = self.run_
        i = self.h.invoke(self.pname, "poll")
        # while draining, a copier catches up in big transactions (the plan's sizes are for the
        # main phase, when the producers are still writing)
        size = self.rng.randint(*self.wk.records)
        out = proc.call("poll", OP_DEADLINE_MS, max_records=DRAIN_RECORDS if run.draining.is_set() else size,
                        timeout_ms=POLL_MS)
        if not out.ok:
            self.h.complete(i, "fail", error=_err(out))
            # a poll that failed may still have moved the consumer's position past records the
            # copier never got: start again from the group's committed offsets
            self._after(out, copier=True)
            return
        got = [[run.ns.unmap(r["topic"]), r["partition"], r["offset"], r.get("value")]
               for r in out.data.get("records", [])]
        self.h.complete(i, "ok", {"records": got})
        if not got:
            return
        out_parts = run.partitions[self.wk.to]
        records = [[f"{v}@{p}:{o}", self.wk.to, p % out_parts] for t, p, o, v in got]
        self._transaction(proc, records, consumed=got)

    def _transaction(self, proc: ClientProcess, records: list[list], consumed: list[list] | None) -> None:
        ns = self.run_.ns
        self.txns += 1
        name = f"{self.wk.name}/{self.txns}"
        abort = self.rng.random() < self.wk.abort_ratio
        # Half of the aborts come at once, the records still queued (an application giving up
        # mid-way, a group member revoked right after its last commit): under TV2 the EndTxn
        # then often reaches the coordinator while the previous commit's markers are in flight.
        at_once = self.rng.random() < 0.5
        lo, hi = self.wk.hold_ms
        hold = self.rng.randint(lo, hi) / 1000 if hi else 0.0
        value: dict[str, Any] = {"txn": name, "tid": self.wk.transactional_id, "intent": "abort" if abort else "commit",
                                 "records": records}
        if consumed is not None:
            value["consumed"] = consumed
        inv = self.h.invoke(self.pname, "txn", value)
        delivered: dict[str, int | None] = {}

        def done(type_: str, end: str | None, stage: str | None = None, out: Outcome | None = None) -> None:
            v: dict[str, Any] = {"end": end, "records": [[r[0], r[1], r[2], delivered.get(r[0])] for r in records]}
            if stage:
                v["stage"] = stage
            self.h.complete(inv, type_, v, error=_err(out) if out is not None else None)

        out = proc.call("begin_transaction", OP_DEADLINE_MS)
        if not out.ok:
            done("fail", None, "begin", out)
            self._after(out)
            return
        seqs: dict[int, str] = {}
        for v, topic, part in records:
            out = proc.call("send", OP_DEADLINE_MS, topic=ns.name(topic), partition=part, key=self.wk.name,
                            value=v, wait=False)
            if not out.ok:
                return self._abandon(proc, done, "send", out)
            seqs[out.data["seq"]] = v
        if abort and at_once and consumed is None:
            return self._end(proc, name, inv, done, commit=False, consumed=None)
        out = proc.call("flush", OP_DEADLINE_MS)
        deliveries = out.data.get("deliveries") if out.ok else (out.error.extra.get("deliveries") if out.error else [])
        # a flush also reports records of earlier transactions whose fate came late (a batch
        # answered after its transaction was given up): only this transaction's own count here
        bad = [d for d in deliveries or [] if d.get("error") and d.get("seq") in seqs]
        for d in deliveries or []:
            if not d.get("error") and d.get("seq") in seqs:
                delivered[seqs[d["seq"]]] = d.get("offset")
        if not out.ok or bad:
            cause = out if not out.ok else Outcome.failure("flush", (bad[0]["error"] or {}).get("name", "SEND_FAILED")
                                                           if isinstance(bad[0]["error"], dict) else str(bad[0]["error"]),
                                                           "a record of the transaction was not delivered",
                                                           origin="client", deliveries=bad[:5])
            return self._abandon(proc, done, "flush", cause)
        if consumed is not None:
            nxt: dict[tuple[str, int], int] = {}
            for t, p, o, _ in consumed:
                nxt[(t, p)] = max(nxt.get((t, p), 0), o + 1)
            offsets = [{"topic": ns.name(t), "partition": p, "offset": o} for (t, p), o in sorted(nxt.items())]
            out = proc.call("send_offsets_to_transaction", OP_DEADLINE_MS, offsets=offsets)
            if not out.ok:
                return self._abandon(proc, done, "send_offsets", out)
        if hold:
            time.sleep(hold)
        self._end(proc, name, inv, done, commit=not abort, consumed=consumed)

    def _end(self, proc: ClientProcess, name: str, inv: int, done, commit: bool, consumed: list | None) -> None:
        """Commit or abort the transaction `name` (its `txn` invocation `inv`), and what follows."""
        e = self.h.invoke(self.pname, "end_txn", {"txn": name, "commit": commit})
        out = proc.call("commit_transaction" if commit else "abort_transaction", END_DEADLINE_MS)
        self.h.complete(e, "ok" if out.ok else "info", error=_err(out))
        if out.ok:
            done("ok", "commit" if commit else "abort")
            if not commit and consumed is not None:
                self.request_restart()   # resume from the group's committed offsets
            return
        if commit:
            done("info", None, "commit", out)
        else:
            done("fail", None, "abort", out)
        if not _broken(out) and out.error is not None and out.error.abortable:
            self._abort(proc, name)
        self._after(out, consumed is not None)

    def _abandon(self, proc: ClientProcess, done, stage: str, out: Outcome) -> None:
        """A transaction that failed before its commit was sent: abort it (the commit was never
        sent, so whatever the abort answers it cannot have committed)."""
        name = f"{self.wk.name}/{self.txns}"
        if not _broken(out):
            self._abort(proc, name)
        done("fail", None, stage, out)
        self._after(out, copier=self.wk.kind == "copier")

    def _abort(self, proc: ClientProcess, name: str) -> bool:
        e = self.h.invoke(self.pname, "end_txn", {"txn": name, "commit": False})
        out = proc.call("abort_transaction", END_DEADLINE_MS)
        self.h.complete(e, "ok" if out.ok else "info", error=_err(out))
        if not out.ok:
            self._after(out)
        return out.ok

    def _after(self, out: Outcome, copier: bool = False) -> None:
        """After a failed transaction: a process that is broken is replaced; a copier starts
        again from the committed offsets (its consumer's position is past what it gave up)."""
        if _broken(out):
            self.run_.actors.crash(self.wk.name)
        elif copier or self.wk.kind == "copier":
            self.request_restart()

    def _reader(self, proc: ClientProcess) -> None:
        run = self.run_
        i = self.h.invoke(self.pname, "poll")
        out = proc.call("poll", OP_DEADLINE_MS, max_records=500, timeout_ms=POLL_MS)
        if not out.ok:
            self.h.complete(i, "fail", error=_err(out))
            if _broken(out):
                run.actors.crash(self.wk.name)
            return
        got = [[run.ns.unmap(r["topic"]), r["partition"], r["offset"], r.get("value")]
               for r in out.data.get("records", [])]
        self.h.complete(i, "ok", {"records": got})
