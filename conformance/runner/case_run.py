"""Replaying one case's steps against a started target with one client.

Why steps are interpreted here and not in the drivers: the drivers know one client op at a time;
a case also has waits, faults, background ops awaited later, application crashes and the
consume-transform-produce loop, and those must mean the same with every client. Every step
leaves a record (what the client saw, normalised by the driver) and, unless it expects `any`,
a check that the record matches the case's expectation.
"""
from __future__ import annotations

import dataclasses
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker_impl.codec import API

from conformance.clients import DriverStartError, Outcome
from conformance.targets import Target

from ..dsl.model import Case, Step
from .. import security
from ..raw import (RAW_RETRY, Connections, RequestError, change_scram_password, namespace_body, send_frame,
                   send_request)
from ..refs import RefError, dig, resolve, step_lookup
from ..results import Check, NotApplicable, TargetCrashed
from .actors import Actors
from .admin_ops import RUNNER_ANSWERS, answer_by_runner
from .checks import expect_matches, unspecified_check
from .faults import FaultRealiser
from .namespace import Namespace

#: The error a driver answers for an op its client library has no API for (clients/protocol.py).
UNSUPPORTED_BY_CLIENT = "UNSUPPORTED_BY_CLIENT"

DEFAULT_DEADLINE_MS = 20_000
#: How often the runner looks whether a target process ended while a step runs (Target.exited).
WATCH_INTERVAL_S = 0.5


@dataclass
class StepRun:
    records: list[dict] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    fault_events: list[dict] = field(default_factory=list)


def _step_key(step: Step) -> int | str:
    """What records call a step: its index, or "3.1" inside a repeat."""
    return step.index if "." not in step.label else step.label


def outcome_record(step: Step, out: Outcome) -> dict:
    rec: dict[str, Any] = {"step": _step_key(step), "actor": step.actor, "op": step.op, "ok": out.ok,
                           "elapsed_ms": round(out.elapsed_ms, 1)}
    if step.id:
        rec["id"] = step.id
    if out.ok:
        rec["data"] = out.data
    else:
        rec["error"] = out.error.to_dict() if out.error else {"name": "UNKNOWN"}
    return rec


class CaseRun:
    def __init__(self, case: Case, target: Target, client: str, bootstrap: str, ns: Namespace,
                 artifacts: Path, proxy=None) -> None:
        self.case = case
        self.target = target
        self.client = client
        self.bootstrap = bootstrap
        self.ns = ns
        self.artifacts = artifacts
        parts = {t.name: t.partitions for t in case.topology.topics}
        self.actors = Actors(case.actors, client, bootstrap, ns, artifacts, parts)
        self.faults = FaultRealiser(target, ns, proxy)
        self.result = StepRun()
        self._background: dict[str, tuple[threading.Thread, dict]] = {}
        self._skipped: set[str] = set()
        #: What "${id.field}" and "${name}" name: the data of the latest ok step with each id,
        #: and the captured values (both as the target gave them, unique names included).
        self.data_by_id: dict[str, dict] = {}
        self.captures: dict[str, Any] = {}
        self.t0 = time.monotonic()
        #: the run user's password after a change_run_password step (None: the run's own),
        #: known to that step only
        self._raw_password: str | None = None
        #: Set while a fault step acts on nodes (a killed node is marked down just after it died).
        self._in_fault = False
        #: Why the target's process ended during a step (the watcher saw it), else None.
        self.target_gone: str | None = None
        #: The raw actor's kept connections (raw.Connections), closed when the steps end.
        self.raw_connections = Connections()

    @property
    def observer_client(self) -> str:
        """The client whose fresh driver reads what the case left (observe.py): the run's."""
        return self.client

    # ----------------------------------------------------------------- references
    def lookup(self, name: str, path: str | None) -> Any:
        """The value a reference names (conformance/refs); RefError when there is none yet."""
        if path is None:
            if name not in self.captures:
                raise RefError(f"${{{name}}}: nothing was captured under {name!r} (a failed or skipped step?)")
            return self.captures[name]
        return step_lookup(self.data_by_id.get)(name, path)

    def resolve_case(self, value: Any) -> Any:
        """``value`` with its references resolved, in the case's own names (for comparisons)."""
        return self.ns.unmap(resolve(value, self.lookup))

    # ----------------------------------------------------------------- driving
    def run_steps(self) -> StepRun:
        """Run every step in order. NotApplicable propagates (the target cannot do a fault), and
        TargetCrashed when a step failed because the target is gone; everything else a step
        meets is recorded as its outcome."""
        self._require_raw_apis(self.case.steps)
        stop = threading.Event()
        watcher = threading.Thread(target=self._watch_target, args=(stop,), name="target-watch", daemon=True)
        watcher.start()
        try:
            for step in self.case.steps:
                seen = len(self.result.records)
                self._run(step)
                if self.target_gone or any(not r.get("ok", True) for r in self.result.records[seen:]):
                    crashed = self.target_gone or self.target.health()
                    if crashed:
                        raise TargetCrashed(step.index, crashed)
        finally:
            stop.set()
            watcher.join(timeout=2 * WATCH_INTERVAL_S)
            for ref, (thread, _) in self._background.items():
                thread.join(timeout=0)  # awaited steps are joined; a leftover means a failed await
            self.raw_connections.close()
        return self.result

    def _require_raw_apis(self, steps) -> None:
        """NotApplicable before the first step when a raw request of the case (repeats included)
        names an API or version the target does not serve: a case that bumps an epoch 30,000
        times before its Produce v12 must not learn only then that the release serves v0-11."""
        for step in steps:
            if step.kind == "repeat":
                self._require_raw_apis(step.body)
            elif (step.kind == "op" and step.actor == "raw" and step.op == "change_run_password"
                  and (not security.current().sasl or security.current().given)):
                raise NotApplicable("the case changes the run user's SCRAM password: a run over SASL with a user "
                                    "kconform made only (--security sasl_plaintext or sasl_ssl), never a user's own")
            elif step.kind == "op" and step.actor == "raw" and step.op == "request" and step.runs_for(self.client):
                version = step.args.get("version")
                if isinstance(version, int) and step.args.get("api") in API:
                    self.target.require_api(step.args["api"], API[step.args["api"]].key, version)

    def _watch_target(self, stop: threading.Event) -> None:
        """While the steps run: when a target process the case did not take down has ended
        (Target.exited, seen twice in a row, outside fault steps, with no `at:` fault armed --
        those end a process on purpose), SIGKILL the case's drivers, so that the step in flight
        returns at once instead of waiting out its deadline on a dead port; run_steps then ends
        the case as a crash."""
        seen_before = False
        while not stop.wait(WATCH_INTERVAL_S):
            why = None if self._in_fault or self.faults.armed else self.target.exited()
            if why and seen_before:
                self.target_gone = why
                self.actors.close_all()
                return
            seen_before = why is not None

    def _run(self, step: Step) -> None:
        if not step.runs_for(self.client):
            if step.id:
                self._skipped.add(step.id)
            self.result.records.append({"step": _step_key(step), "actor": step.actor, "op": step.op or step.kind,
                                        "skipped": f"runs only with {', '.join(step.clients)}"})
            return
        if step.kind == "repeat":
            self._repeat(step)
            return
        if step.kind == "wait":
            time.sleep(step.wait_ms / 1000)
            return
        if step.kind == "fault":
            self._in_fault = True
            try:
                event = self.faults.apply(step.fault)
            finally:
                self._in_fault = False
            self._record_event(step, event)
            return
        if step.kind == "wait_fault":
            try:
                event = self.faults.wait_fired(step.timeout_ms)
                self._record_event(step, event)
                self._check(step, {"step": step.index, "op": "wait_fault", "ok": True}, "wait_fault")
            except TimeoutError as exc:
                rec = {"step": step.index, "op": "wait_fault", "ok": False,
                       "error": {"name": "FAULT_NOT_REACHED", "message": str(exc)}}
                self.result.records.append(rec)
                self.result.checks.append(Check(f"step[{step.index}] wait_fault", False, str(exc)))
            return
        if step.kind == "await":
            if step.awaits in self._skipped:
                self.result.records.append({"step": step.index, "op": "await", "id": step.awaits,
                                            "skipped": f"background step {step.awaits} did not run with {self.client}"})
                return
            thread, holder = self._background.pop(step.awaits)
            thread.join(timeout=step.timeout_ms / 1000)
            if thread.is_alive():
                rec = {"step": step.index, "op": "await", "id": step.awaits, "ok": False,
                       "error": {"name": "DEADLINE_EXCEEDED",
                                 "message": f"background step {step.awaits} still running after {step.timeout_ms} ms"}}
            else:
                rec = dict(holder["record"], awaited_at=step.index)
                if rec.get("ok"):
                    self.data_by_id[step.awaits] = rec.get("data") or {}
            self.result.records.append(rec)
            self._check(step, rec, f"await {step.awaits}")
            return
        # an op
        if step.background:
            holder: dict = {}

            def work() -> None:
                holder["record"] = self._op_record(step)

            thread = threading.Thread(target=work, name=f"step-{step.index}", daemon=True)
            thread.start()
            self._background[step.id] = (thread, holder)
            return
        rec = self._op_record(step)
        self._require_client_op(step, rec)
        self.result.records.append(rec)
        self.result.checks += self._after_op(step, rec)

    def _require_client_op(self, step: Step, rec: dict) -> None:
        """NotApplicable when the step's client has no API for its op (UNSUPPORTED_BY_CLIENT: a
        kafka-clients release older than the API, java@3.1.2 and Admin.fenceProducers) and the
        case does not expect exactly that: the row cannot say what the client does."""
        error = rec.get("error") or {}
        if rec.get("ok", True) or error.get("name") != UNSUPPORTED_BY_CLIENT:
            return
        client = self._client_of(step.actor)
        expect = step.expect.for_client(client)
        if expect is None or expect.any or UNSUPPORTED_BY_CLIENT in expect.errors:
            return   # not specified for this client, recorded only, or expected as it is
        raise NotApplicable(f"client {client} cannot {step.op}: {error.get('message') or 'no API for it'}")

    def _after_op(self, step: Step, rec: dict) -> list[Check]:
        """An op's check, then its id's data and its captures for the steps after it."""
        out = []
        check = self._check_result(step, rec, None)
        if check is not None:
            out.append(check)
        if rec.get("ok"):
            data = rec.get("data") or {}
            if step.id:
                self.data_by_id[step.id] = data
            for name, path in step.capture.items():
                try:
                    self.captures[name] = dig(data, path, f"the data of step {step.label}")
                except RefError as exc:
                    self.captures.pop(name, None)
                    out.append(Check(f"step[{step.label}] capture {name}", False, str(exc)))
        elif step.capture:
            for name in step.capture:
                self.captures.pop(name, None)
        return out

    def _repeat(self, step: Step) -> None:
        """A repeat block: its steps `times` times, or until `until` holds (at most `times`).
        Every iteration's checks count; the block stops at the first that fails. Records keep
        the first and the last iteration (the failed one, when one failed): a loop of 30,000
        requests must not make a results row of 30,000 steps. A loop with `until` keeps only
        its last iteration, without its number: how many polls it took until the state was
        reached is timing, which differs between two correct brokers (the repeat's own record
        keeps the count). Each inner step has one check, over all iterations."""
        tally: dict[str, list] = {}  # label -> [name, iterations checked, first failure, unspecified]
        last: list[dict] = []
        done = 0
        until_held = False
        failed = False
        for k in range(1, step.times + 1):
            this: list[dict] = []
            for inner in step.body:
                if not inner.runs_for(self.client):
                    continue
                if inner.kind == "wait":
                    time.sleep(inner.wait_ms / 1000)
                    continue
                rec = dict(self._op_record(inner), iteration=k)
                this.append(rec)
                checks = self._after_op(inner, rec)
                for c in checks:
                    entry = tally.setdefault(c.name, [c.name, 0, None, c.unspecified])
                    entry[1] += 1
                    if not c.passed and entry[2] is None:
                        entry[2] = f"iteration {k}: {c.message}"
                        failed = True
                if inner.id and step.until and inner.id == step.until.step:
                    expect = step.until.expect.for_client(self.client)
                    try:
                        until_held = expect is not None and expect_matches(
                            step.until.expect, self.ns.unmap(rec), self.client, self.resolve_case)[0]
                    except RefError:
                        until_held = False
                if not rec.get("ok") and self.target.health():
                    self.result.records += this
                    raise TargetCrashed(step.index, self.target.health() or "the target is gone")
            done = k
            if k == 1 and step.until is None:
                self.result.records += this
            else:
                last = this
            if failed or until_held:
                break
        if step.until is not None:
            last = [{key: v for key, v in rec.items() if key != "iteration"} for rec in last]
        self.result.records += last
        self.result.records.append({"step": step.index, "op": "repeat", "ok": True, "data": {"iterations": done}})
        for name, checked, failure, unspecified in tally.values():
            self.result.checks.append(Check(f"{name} (x{checked})", failure is None,
                                            failure or f"as expected in all {checked} iteration(s)", unspecified))
        if step.until is not None and not until_held and not failed:
            self.result.checks.append(Check(f"step[{step.index}] {step.describe()}", False,
                                            f"{step.until.step} was not {step.until.expect.describe()} "
                                            f"within {step.times} iterations"))

    def _record_event(self, step: Step, event: dict) -> None:
        event = dict(event, step=step.index, t=round(time.monotonic() - self.t0, 3))
        self.result.fault_events.append(event)
        self.result.records.append({"step": step.index, "op": "fault", "ok": True, "data": event})

    def _client_of(self, actor: str | None) -> str:
        """The client an actor runs: its pinned one, else the run's."""
        definition = self.case.actors.get(actor) if actor else None
        return (definition.client if definition is not None else None) or self.client

    def _check(self, step: Step, rec: dict, label: str | None) -> None:
        check = self._check_result(step, rec, label)
        if check is not None:
            self.result.checks.append(check)

    def _check_result(self, step: Step, rec: dict, label: str | None) -> Check | None:
        """The step's check (None when it expects `any`). A per-client expectation is keyed by
        the run's client -- on a pinned actor's step too: its own client never varies, what
        varies from row to row is the client the other actors run."""
        expect = step.expect.for_client(self.client)
        name = f"step[{step.label or step.index}] {label or f'{step.actor}.{step.op}'}: {step.expect.describe()}"
        if expect is None:
            return unspecified_check(name, rec, self.client)
        if expect.any:
            return None
        try:
            passed, message = expect_matches(step.expect, self.ns.unmap(rec), self.client, self.resolve_case)
        except RefError as exc:
            passed, message = False, f"cannot evaluate: {exc}"
        return Check(name, passed, message)

    def _op_record(self, step: Step) -> dict:
        try:
            out = self._op(step)
        except DriverStartError as exc:
            out = Outcome.failure(step.op, "DRIVER_ERROR", f"driver did not start: {exc}")
        rec = outcome_record(step, out)
        rec["t"] = round(time.monotonic() - self.t0, 3)
        return rec

    # ----------------------------------------------------------------- ops
    def _op(self, step: Step) -> Outcome:
        deadline = step.deadline_ms or DEFAULT_DEADLINE_MS
        if step.actor == "raw":
            live = self.target.live_addresses()
            if not live:
                return Outcome.failure(step.op, "NETWORK_EXCEPTION", "every node is down")
            address = live[0][1]
            if step.broker is not None:
                node = self.faults.resolve(step.broker, prefer_remembered=False, remember=False)
                address = dict(live).get(node)
                if address is None:
                    return Outcome.failure(step.op, "NETWORK_EXCEPTION", f"node {node} ({step.broker.describe()}) is down")
            if step.op == "request":
                return self._raw_request(step, address)
            if step.op == "change_run_password":
                return self._change_run_password(step, address)
            return send_frame(address, step.args)
        if step.op == "crash":
            self.actors.crash(step.actor)
            return Outcome(op="crash", ok=True)
        if step.op == "restart":
            self.actors.restart(step.actor)
            return Outcome(op="restart", ok=True)
        proc, failed = self.actors.process(step.actor)
        if failed is not None:
            return failed
        if step.op == "start":
            return Outcome(op="start", ok=True)
        try:
            args = self.ns.args(resolve(step.args, self.lookup))
        except RefError as exc:
            return Outcome.failure(step.op, "DRIVER_ERROR", str(exc))
        live = self.actors.live[step.actor]
        if step.op == "transform":
            if not live.inited and "transactional.id" in live.definition.config:
                out = proc.call("init_transactions", deadline)
                if not out.ok:
                    return Outcome(op="transform", ok=False, error=out.error, data={"stage": "init_transactions"},
                                   elapsed_ms=out.elapsed_ms)
                live.inited = True
            return self._transform(step, proc, args, deadline)
        if step.op == "send_many":
            return self._send_many(proc, args, deadline)
        if step.op == "poll_until":
            return self._poll_until(proc, args)
        if step.op in RUNNER_ANSWERS and step.op not in proc.ops:
            return answer_by_runner(step.op, self.target, args, deadline, proc.client)
        out = proc.call(step.op, deadline, **args)
        if step.op == "init_transactions" and out.ok:
            live.inited = True
        return out

    def _raw_request(self, step: Step, address: tuple[str, int]) -> Outcome:
        args = step.args
        self.target.require_api(args["api"], API[args["api"]].key, int(args["version"]))
        try:
            body = namespace_body(resolve(args.get("body") or {}, self.lookup), self.ns.name)
        except (RequestError, RefError) as exc:
            return Outcome.failure("request", "DRIVER_ERROR", str(exc))
        # Like a client: "not ready yet" answers are retried until the step's time is up (the
        # case's `retry:` list replaces RAW_RETRY; `[]`: none).
        return send_request(address, args["api"], int(args["version"]), body,
                            timeout_s=int(args.get("timeout_ms", 5000)) / 1000,
                            retry=set(args.get("retry", RAW_RETRY)), pool=self.raw_connections)

    def _change_run_password(self, step: Step, address: tuple[str, int]) -> Outcome:
        """AlterUserScramCredentials for the run's user, logged in with its current password;
        every other connection of the run (drivers, raw requests) keeps logging in with the
        run's own, so they are refused until `password: original` gives it back."""
        run = security.current()
        original = step.args["password"] == "original"
        new = run.password if original else secrets.token_urlsafe(18)
        login = run if self._raw_password is None else dataclasses.replace(run, password=self._raw_password)
        out = change_scram_password(address, login, new)
        if out.ok and out.data.get("error") == "NONE":
            self._raw_password = None if original else new
        return out

    def _send_many(self, proc, args: dict, deadline: int) -> Outcome:
        t0 = time.monotonic()
        offsets = []
        start = int(args.get("start", 0))
        for i in range(start, start + int(args["count"])):
            send = {"topic": args["topic"], "key": args.get("key"), "value": f"{args.get('value_prefix', 'v')}{i}"}
            if args.get("partition") is not None:
                send["partition"] = args["partition"]
            out = proc.call("send", deadline, **send)
            if not out.ok:
                return Outcome(op="send_many", ok=False, error=out.error, elapsed_ms=(time.monotonic() - t0) * 1000,
                               data={"sent": len(offsets)})
            offsets.append(out.data.get("offset"))
        return Outcome(op="send_many", ok=True, data={"count": len(offsets), "offsets": offsets},
                       elapsed_ms=(time.monotonic() - t0) * 1000)

    def _poll_until(self, proc, args: dict) -> Outcome:
        t0 = time.monotonic()
        want = int(args.get("count", 1))
        end = t0 + int(args.get("timeout_ms", 10_000)) / 1000
        records: list[dict] = []
        while len(records) < want and time.monotonic() < end:
            left_ms = max(50, int((end - time.monotonic()) * 1000))
            out = proc.call("poll", left_ms + 10_000, max_records=want - len(records), timeout_ms=min(left_ms, 1000))
            if not out.ok:
                return Outcome(op="poll_until", ok=False, error=out.error, data={"records": records},
                               elapsed_ms=(time.monotonic() - t0) * 1000)
            records += out.data.get("records", [])
        slim = [{k: r.get(k) for k in ("topic", "partition", "offset", "key", "value")} for r in records]
        return Outcome(op="poll_until", ok=True, data={"records": slim, "count": len(slim)},
                       elapsed_ms=(time.monotonic() - t0) * 1000)

    def _transform(self, step: Step, proc, args: dict, deadline: int) -> Outcome:
        """One consume-transform-produce transaction (see model.RUNNER_OPS['transform'])."""
        t0 = time.monotonic()
        crash_after = args.get("crash_after")
        data: dict[str, Any] = {"consumed": 0, "produced": 0}

        def done(ok: bool, error=None, **extra) -> Outcome:
            data.update(extra)
            return Outcome(op="transform", ok=ok, error=error, data=data, elapsed_ms=(time.monotonic() - t0) * 1000)

        out = proc.call("poll", deadline, max_records=int(args.get("max_records", 10)),
                        timeout_ms=int(args.get("timeout_ms", 3000)))
        if not out.ok:
            return done(False, out.error, stage="poll")
        records = out.data.get("records", [])
        data["consumed"] = len(records)
        data["input"] = [{"partition": r["partition"], "offset": r["offset"]} for r in records]
        if crash_after == "poll":
            self.actors.crash(step.actor)
            return done(True, crashed_after="poll")
        if not records:
            return done(True)
        out = proc.call("begin_transaction", deadline)
        if not out.ok:
            return done(False, out.error, stage="begin_transaction")
        for r in records:
            out = proc.call("send", deadline, topic=args["to"], key=r.get("key"), value=r.get("value"), wait=False)
            if not out.ok:
                return done(False, out.error, stage="send")
            data["produced"] += 1
        out = proc.call("flush", deadline)
        if not out.ok:
            return done(False, out.error, stage="flush")
        if crash_after == "send":
            self.actors.crash(step.actor)
            return done(True, crashed_after="send")
        next_offsets: dict[tuple[str, int], int] = {}
        for r in records:
            key = (r["topic"], r["partition"])
            next_offsets[key] = max(next_offsets.get(key, 0), r["offset"] + 1)
        offsets = [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(next_offsets.items())]
        out = proc.call("send_offsets_to_transaction", deadline, offsets=offsets)
        if not out.ok:
            return done(False, out.error, stage="send_offsets_to_transaction")
        if crash_after == "send_offsets":
            self.actors.crash(step.actor)
            return done(True, crashed_after="send_offsets")
        end_op = "abort_transaction" if args.get("abort") else "commit_transaction"
        out = proc.call(end_op, deadline)
        if not out.ok:
            return done(False, out.error, stage=end_op)
        if args.get("abort"):
            self.actors.restart(step.actor)  # rewind: the next process starts at the committed offsets
        return done(True)

    def close(self) -> None:
        self.actors.close_all()
