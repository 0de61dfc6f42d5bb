"""`pause` at a fault point on the real broker process: the broker SIGSTOPs itself at the point,
and SIGCONT (or SIGTERM + SIGCONT, or a second point's crash) decides what happens next.

Why these: a pause must freeze the process exactly there -- a decided, durable PrepareCommit
that nobody can act on -- and whatever follows (continue, clean restart, crash) must still end
in the commit Kafka promises once Prepare* is durable (S09)."""

from __future__ import annotations

import os
import signal
import threading

from conformance.targets.process import process_state

from .ck_helpers import ck, consume_all, open_txn, wait_until


def commit_in_background(producer) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def run():
        try:
            producer.commit_transaction(60)
            outcome["ok"] = True
        except ck.KafkaException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def log_lines(b) -> list[str]:
    return [line for line in b.log_path.read_text(errors="replace").splitlines()
            if line.startswith("kconform fault point")]


def test_pause_freezes_the_broker_at_the_point_and_sigcont_finishes_the_commit(broker_factory):
    b = broker_factory({"kconform.fault": "after_prepare_durable", "kconform.fault.action": "pause"})
    p = open_txn(b, "tx-pause", "p")
    thread, outcome = commit_in_background(p)
    assert wait_until(lambda: process_state(b.proc.pid) == "T"), "broker did not stop itself"
    assert log_lines(b)[0].startswith("kconform fault point after_prepare_durable reached: pause tx-pause")
    assert thread.is_alive() and not outcome, "EndTxn answered by a stopped broker"
    os.kill(b.proc.pid, signal.SIGCONT)
    thread.join(60)
    assert outcome == {"ok": True}
    # running again: on the CPU, asleep, or in a disk wait (an fsync right after SIGCONT) -- not stopped
    assert process_state(b.proc.pid) in ("R", "S", "D")
    assert sorted(consume_all(b.bootstrap, "p", "read_committed", 2, partitions=2)) == [b"v0", b"v1"]
    assert log_lines(b)[-1] == "kconform fault point after_prepare_durable continued"


def test_a_paused_broker_terminated_and_restarted_recovers_the_commit(broker_factory):
    """What the target's restart does to a paused node: SIGTERM, SIGCONT so that it acts on it,
    then the same command line without the fault configs."""
    b = broker_factory({"kconform.fault": "after_prepare_durable", "kconform.fault.action": "pause"})
    p = open_txn(b, "tx-pause-restart", "p")
    commit_in_background(p)
    assert wait_until(lambda: process_state(b.proc.pid) == "T")
    os.kill(b.proc.pid, signal.SIGTERM)
    os.kill(b.proc.pid, signal.SIGCONT)
    b.proc.wait(30)
    b.sets = {k: v for k, v in b.sets.items() if not k.startswith("kconform.fault")}
    b.start()
    assert sorted(consume_all(b.bootstrap, "p", "read_committed", 2, timeout=20, partitions=2)) == [b"v0", b"v1"]


def test_two_points_pause_at_one_then_crash_at_the_other(broker_factory):
    b = broker_factory({"kconform.fault": "after_prepare_durable,after_complete",
                        "kconform.fault.after_prepare_durable.action": "pause",
                        "kconform.fault.after_complete.action": "crash"})
    p = open_txn(b, "tx-two-points", "p")
    commit_in_background(p)
    assert wait_until(lambda: process_state(b.proc.pid) == "T")
    os.kill(b.proc.pid, signal.SIGCONT)
    assert wait_until(lambda: b.proc.poll() is not None), "no crash at after_complete"
    assert b.proc.returncode == 86
    assert [line.split(" tx-")[0] for line in log_lines(b)] == [
        "kconform fault point after_prepare_durable reached: pause",
        "kconform fault point after_prepare_durable continued",
        "kconform fault point after_complete reached: crash"]
    b.sets = {k: v for k, v in b.sets.items() if not k.startswith("kconform.fault")}
    b.start()
    assert sorted(consume_all(b.bootstrap, "p", "read_committed", 2, timeout=20, partitions=2)) == [b"v0", b"v1"]


def test_skip_lets_the_first_commit_pass_and_pauses_the_second(broker_factory):
    b = broker_factory({"kconform.fault": "after_prepare_durable", "kconform.fault.action": "pause",
                        "kconform.fault.skip": "1"})
    p = open_txn(b, "tx-skip", "p")
    p.commit_transaction(30)  # hit 1 passes
    assert log_lines(b) == ["kconform fault point after_prepare_durable passed (hit 1)"]
    p.begin_transaction()
    p.produce("p", value=b"w0", partition=0)
    thread, outcome = commit_in_background(p)
    assert wait_until(lambda: process_state(b.proc.pid) == "T")
    os.kill(b.proc.pid, signal.SIGCONT)
    thread.join(60)
    assert outcome == {"ok": True}
    assert sorted(consume_all(b.bootstrap, "p", "read_committed", 3, partitions=2)) == [b"v0", b"v1", b"w0"]
