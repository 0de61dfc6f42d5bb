"""A transactional worker judges a transaction by its own records: a flush also reports records
of an earlier transaction whose answer came late (workloads/cluster seed 604: a batch held 27 s
behind a lost transaction verification, answered INVALID_PRODUCER_EPOCH after its transaction
was given up), which must not fail the next one."""
from __future__ import annotations

import threading
from types import SimpleNamespace

from conformance.clients.protocol import Outcome
from conformance.dsl.model import WorkerDef
from conformance.history import History
from conformance.runner.workload_workers import Worker


class ScriptedProcess:
    """A client process whose calls answer from a script (what the driver would have said)."""

    def __init__(self, flush_deliveries: list[dict]):
        self.flush_deliveries = flush_deliveries
        self.calls: list[str] = []
        self.seq = 0

    def call(self, op: str, deadline_ms: int, **args) -> Outcome:
        self.calls.append(op)
        if op == "send":
            self.seq += 1
            return Outcome(op, True, {"seq": self.seq})
        if op == "flush":
            return Outcome(op, True, {"deliveries": self.flush_deliveries})
        return Outcome(op, True, {})


def _worker() -> Worker:
    run = SimpleNamespace(history=History(), w=SimpleNamespace(seed=1, workers=()), partitions={"data": 1},
                          ns=SimpleNamespace(name=lambda n: n, unmap=lambda n: n), stopping=threading.Event(),
                          draining=threading.Event(), actors=SimpleNamespace(live={"t1": SimpleNamespace(generation=1)}))
    wk = WorkerDef(name="t1", kind="transactional", topics=("data",), records=(2, 2), abort_ratio=0.0)
    return Worker(run, wk)


def test_a_late_failure_of_an_earlier_transactions_record_does_not_fail_this_one():
    w = _worker()
    late = {"seq": 99, "error": {"name": "INVALID_PRODUCER_EPOCH"}}       # an earlier transaction's record
    proc = ScriptedProcess([{"seq": 1, "offset": 10}, {"seq": 2, "offset": 11}, late])
    w._transactional(proc)
    assert proc.calls[-1] == "commit_transaction"
    [txn] = [e for e in w.h.events() if e.get("f") == "txn" and e["type"] != "invoke"]
    assert txn["type"] == "ok" and [r[3] for r in txn["value"]["records"]] == [10, 11]


def test_a_failure_of_one_of_its_own_records_fails_it():
    w = _worker()
    proc = ScriptedProcess([{"seq": 1, "offset": 10}, {"seq": 2, "error": {"name": "INVALID_PRODUCER_EPOCH"}}])
    w._transactional(proc)
    assert "commit_transaction" not in proc.calls and proc.calls[-1] == "abort_transaction"
    [txn] = [e for e in w.h.events() if e.get("f") == "txn" and e["type"] != "invoke"]
    assert txn["type"] == "fail" and txn["error"]["name"] == "INVALID_PRODUCER_EPOCH"
