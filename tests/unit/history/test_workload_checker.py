"""The workload checker on hand-made histories: each anomaly is found when the history and the
final state prove it, and not when they do not (conformance/history/checker.py)."""
from __future__ import annotations

import pytest

from conformance.dsl.model import WorkerDef
from conformance.history import History, check

WORKERS = {
    "p1": WorkerDef(name="p1", kind="producer", topics=("data",)),
    "i1": WorkerDef(name="i1", kind="idempotent", topics=("data",)),
    "t1": WorkerDef(name="t1", kind="transactional", topics=("data",), config={"transaction.timeout.ms": "20000"}),
    "c1": WorkerDef(name="c1", kind="copier", topics=("in",), to="out", group="etl"),
    "r1": WorkerDef(name="r1", kind="reader", topics=("data",)),
    "u1": WorkerDef(name="u1", kind="reader", topics=("data",), config={"isolation.level": "read_uncommitted"}),
}
GROUPS = {"etl": (["in"], "out")}


def reads(committed=None, uncommitted=None) -> dict:
    """final state: {tp: [(offset, value)]} per isolation level."""
    def one(d):
        return {tp: [{"offset": o, "key": None, "value": v} for o, v in recs] for tp, recs in (d or {}).items()}
    return {"reads": {"read_committed": one(committed), "read_uncommitted": one(uncommitted)},
            "offsets": {}, "group_offsets": {}}


def send(h: History, proc: str, value: str, partition: int, offset: int | None, topic: str = "data") -> None:
    i = h.invoke(proc, "send", {"v": value, "topic": topic, "partition": partition})
    if offset is None:
        h.complete(i, "info", error={"name": "REQUEST_TIMED_OUT"})
    else:
        h.complete(i, "ok", {"offset": offset, "partition": partition})


def txn(h: History, proc: str, name: str, records: list[tuple], end: str | None, *, commit_sent: bool = True,
        consumed=None) -> None:
    """records: (value, topic, partition, offset-or-None); end: commit/abort (ok), None: commit
    answered an error (info) or, with commit_sent False, a transaction that failed before it."""
    value = {"txn": name, "tid": "txn-" + proc.split("#")[0], "records": [[v, t, p] for v, t, p, _ in records]}
    if consumed is not None:
        value["consumed"] = consumed
    i = h.invoke(proc, "txn", value)
    done = {"end": end, "records": [list(r) for r in records]}
    if end is None and not commit_sent:
        h.complete(i, "fail", dict(done, stage="flush"), error={"name": "NOT_ENOUGH_REPLICAS"})
        return
    e = h.invoke(proc, "end_txn", {"txn": name, "commit": end != "abort"})
    if end is None:
        h.complete(e, "info", error={"name": "REQUEST_TIMED_OUT"})
        h.complete(i, "info", dict(done, stage="commit"), error={"name": "REQUEST_TIMED_OUT"})
    else:
        h.complete(e, "ok")
        h.complete(i, "ok", done)


def kinds(h: History, final: dict) -> dict[str, int]:
    return {a.kind: a.count for a in check(h.events(), WORKERS, final, copier_groups=GROUPS)}


def test_a_clean_history_has_no_anomaly():
    h = History()
    send(h, "i1#1", "i1-1", 0, 0)
    txn(h, "t1#1", "t1/1", [("t1-1", "data", 0, 1), ("t1-2", "data", 1, 0)], "commit")
    txn(h, "t1#1", "t1/2", [("t1-3", "data", 0, 3)], "abort")
    final = reads({"data-0": [(0, "i1-1"), (1, "t1-1")], "data-1": [(0, "t1-2")]},
                  {"data-0": [(0, "i1-1"), (1, "t1-1"), (3, "t1-3")], "data-1": [(0, "t1-2")]})
    assert kinds(h, final) == {}


def test_lost_write_acknowledged_send_and_committed_transaction():
    h = History()
    send(h, "i1#1", "i1-1", 0, 0)
    txn(h, "t1#1", "t1/1", [("t1-1", "data", 0, 1)], "commit")
    assert kinds(h, reads({}, {"data-0": [(1, "t1-1")]})) == {"lost_write": 2}


def test_an_unacknowledged_send_may_be_missing():
    h = History()
    send(h, "i1#1", "i1-1", 0, None)
    assert kinds(h, reads()) == {}


def test_read_committed_skipping_a_plain_record_is_a_lost_write():
    """A committed non-transactional record that read_committed filters out (an aborted-index
    entry in the wrong place) is lost to every read_committed consumer."""
    h = History()
    send(h, "p1#1", "p1-1", 0, 0)
    assert kinds(h, reads({}, {"data-0": [(0, "p1-1")]})) == {"lost_write": 1}


def test_aborted_read_and_a_commit_never_sent():
    h = History()
    txn(h, "t1#1", "t1/1", [("t1-1", "data", 0, 0)], "abort")
    txn(h, "t1#1", "t1/2", [("t1-2", "data", 0, 2)], None, commit_sent=False)
    final = reads({"data-0": [(0, "t1-1"), (2, "t1-2")]}, {"data-0": [(0, "t1-1"), (2, "t1-2")]})
    assert kinds(h, final) == {"aborted_read": 2}


def test_unknown_transaction_may_end_either_way_but_not_torn():
    h = History()
    txn(h, "t1#1", "t1/1", [("t1-1", "data", 0, 0), ("t1-2", "data", 1, 0)], None)
    assert kinds(h, reads({"data-0": [(0, "t1-1")], "data-1": [(0, "t1-2")]})) == {}
    assert kinds(h, reads({})) == {}
    assert kinds(h, reads({"data-0": [(0, "t1-1")]})) == {"torn_transaction": 1}


def test_duplicates_of_idempotent_and_transactional_records_but_not_of_plain_ones():
    h = History()
    send(h, "p1#1", "p1-1", 0, 0)
    send(h, "i1#1", "i1-1", 0, 2)
    txn(h, "t1#1", "t1/1", [("t1-1", "data", 0, 3)], "commit")
    dup = {"data-0": [(0, "p1-1"), (1, "p1-1"), (2, "i1-1"), (3, "t1-1"), (5, "t1-1")]}
    assert kinds(h, reads(dup, dup)) == {"duplicate": 1}   # t1-1 in read_committed; p1-1 may be doubled
    dup_i = {"data-0": [(0, "p1-1"), (2, "i1-1"), (3, "t1-1"), (4, "i1-1")]}
    assert kinds(h, reads(dup_i, dup_i)) == {"duplicate": 2}    # i1-1 in both isolation levels


def test_wrong_offset():
    h = History()
    send(h, "i1#1", "i1-1", 0, 7)
    assert kinds(h, reads({"data-0": [(6, "i1-1")]}, {"data-0": [(6, "i1-1")]})) == {"wrong_offset": 1}


def test_live_reads_undecided_aborted_vanished_and_nonmonotonic():
    h = History()
    i = h.invoke("t1#1", "txn", {"txn": "t1/1", "records": [["t1-1", "data", 0]]})
    r = h.invoke("r1#1", "poll")
    h.complete(r, "ok", {"records": [["data", 0, 0, "t1-1"]]})     # before the commit is even sent
    e = h.invoke("t1#1", "end_txn", {"txn": "t1/1", "commit": True})
    h.complete(e, "ok")
    h.complete(i, "ok", {"end": "commit", "records": [["t1-1", "data", 0, 0]]})
    send(h, "i1#1", "i1-1", 0, 2)
    r = h.invoke("r1#1", "poll")
    h.complete(r, "ok", {"records": [["data", 0, 2, "i1-1"], ["data", 0, 1, "x"]]})   # goes back
    u = h.invoke("u1#1", "poll")
    h.complete(u, "ok", {"records": [["data", 0, 2, "i1-1"]]})
    final = reads({"data-0": [(0, "t1-1")]}, {"data-0": [(0, "t1-1")]})   # i1-1 vanished (and is lost)
    found = kinds(h, final)
    assert found["undecided_read"] == 1
    assert found["nonmonotonic_read"] == 1
    assert found["vanished_read"] == 2
    assert found["lost_write"] == 1


def test_unexpected_fencing_unless_a_newer_process_initialised():
    h = History()
    i = h.invoke("t1#1", "init", {"tid": "txn-t1"})
    h.complete(i, "ok")
    t = h.invoke("t1#1", "txn", {"txn": "t1/1", "records": []})
    h.complete(t, "fail", {"end": None, "records": []}, error={"name": "PRODUCER_FENCED", "fatal": True})
    assert kinds(h, reads()) == {"unexpected_fencing": 1}
    h2 = History()
    i = h2.invoke("t1#1", "init", {"tid": "txn-t1"})
    h2.complete(i, "ok")
    i = h2.invoke("t1#2", "init", {"tid": "txn-t1"})   # a zombie's successor
    h2.complete(i, "ok")
    t = h2.invoke("t1#1", "txn", {"txn": "t1/1", "records": []})
    h2.complete(t, "fail", {"end": None, "records": []}, error={"name": "PRODUCER_FENCED", "fatal": True})
    assert kinds(h2, reads()) == {}


def test_copier_offsets_and_outputs():
    h = History()
    txn(h, "c1#1", "c1/1", [("a@0:0", "out", 0, 0)], "commit", consumed=[["in", 0, 0, "a"]])
    final = reads({"in-0": [(0, "a"), (1, "b"), (2, "c")], "out-0": [(0, "a@0:0"), (1, "c@0:2")]})
    final["group_offsets"] = {"etl": {"in-0": 2}}
    found = kinds(h, final)
    # b (offset 1) committed past without output; c (offset 2) copied without its offset; the
    # group never committed past c either: its input was not all copied
    assert found["offsets_without_output"] == 1
    assert found["output_without_offsets"] == 1
    assert found["stalled"] == 1


def test_a_copy_written_again_after_an_abort_is_not_an_aborted_read():
    h = History()
    txn(h, "c1#1", "c1/1", [("a@0:0", "out", 0, 0)], "abort", consumed=[["in", 0, 0, "a"]])
    txn(h, "c1#2", "c1/2", [("a@0:0", "out", 0, 2)], "commit", consumed=[["in", 0, 0, "a"]])
    final = reads({"in-0": [(0, "a")], "out-0": [(2, "a@0:0")]})
    final["group_offsets"] = {"etl": {"in-0": 1}}
    assert kinds(h, final) == {}


def test_lso_going_back():
    h = History()
    h.event("lso", "lso", {"data-0": 5})
    h.event("lso", "lso", {"data-0": 4})
    assert kinds(h, reads()) == {"nonmonotonic_lso": 1}


def test_history_refuses_a_double_completion():
    h = History()
    i = h.invoke("p1#1", "send", {})
    h.complete(i, "ok")
    with pytest.raises(ValueError):
        h.complete(i, "ok")


def test_a_copy_of_an_aborted_input_record_is_an_aborted_read():
    h = History()
    txn(h, "c1#1", "c1/1", [("x@0:1", "out", 0, 0)], "commit", consumed=[["in", 0, 1, "x"]])
    final = reads({"in-0": [(0, "a")], "out-0": [(0, "x@0:1")]})   # x (offset 1) was aborted in the input
    final["group_offsets"] = {"etl": {"in-0": 2}}
    found = kinds(h, final)
    assert found["aborted_read"] == 1


def test_an_acknowledgement_naming_another_record_of_the_producer_is_the_clients_mixup():
    h = History()
    send(h, "i1#1", "i1-1", 0, None)     # failed, yet it is the one in the log
    send(h, "i1#1", "i1-2", 0, 0)        # "acknowledged" at offset 0
    final = reads({"data-0": [(0, "i1-1")]}, {"data-0": [(0, "i1-1")]})
    assert kinds(h, final) == {"misattributed_ack": 1}



def test_records_behind_a_hanging_transaction_are_not_lost_nor_torn() -> None:
    """A transaction nobody ends holds a partition's LSO: every record after it is in the log but
    out of read_committed's reach. hanging_transaction reports the partition (the end phase); the
    checker does not also call each record behind it lost, nor a transaction with some of them
    torn -- but a record missing from the log is lost, hang or not."""
    h = History()
    send(h, "p1#1", "p1-1", 0, 5)
    send(h, "p1#1", "p1-2", 0, 6)
    txn(h, "t1#1", "t1/1", [("t1-1", "data", 0, 7), ("t1-2", "data", 1, 0)], None)   # commit answer lost
    final = reads(committed={"data-1": [(0, "t1-2")]},
                  uncommitted={"data-0": [(5, "p1-1"), (7, "t1-1")], "data-1": [(0, "t1-2")]})
    final["offsets"] = {"data-0": {"high_watermark": 8, "last_stable": 4}}
    # p1-1 and t1-1 sit behind the stuck LSO (4): not lost, not torn; p1-2 is nowhere in the log
    assert kinds(h, final) == {"lost_write": 1}
    # the same log with the LSO at the high watermark: both are gone from read_committed
    final["offsets"] = {"data-0": {"high_watermark": 8, "last_stable": 8}}
    assert kinds(h, final) == {"lost_write": 2, "torn_transaction": 1}
