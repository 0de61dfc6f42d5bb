"""The fault points' arming, firing and notices (broker_impl/faults) and the harness's side of
them (conformance/runner/faults.py: the configs it plans; the embedded target: how a restart
re-arms from the notices; /proc state).

`pause` stops the whole process, so it is tried in a child process (a real one, signalled by
PID), never in the test process itself."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
import pytest
import trio

from broker_impl.faults import FaultPoints, arming_configs, parse_arms
from broker_impl.faults.channel import FaultListener, FaultNotice, NoticeSender
from conformance.dsl import loader
from conformance.runner.faults import plan_broker_configs
from conformance.targets import NotApplicable
from conformance.targets.embedded import EmbeddedTarget
from conformance.targets.process import process_state

REPO = Path(__file__).resolve().parents[3]


def fired_lines(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("kconform fault point")]


# ----------------------------------------------------------------- configure
def test_per_point_settings_override_the_defaults():
    f = FaultPoints()
    f.configure({"kconform.fault": "after_prepare_durable, after_complete", "kconform.fault.skip": "2",
                 "kconform.fault.after_complete.action": "pause", "kconform.fault.after_complete.skip": "0",
                 "kconform.fault.exit.code": "9", "log.dirs": "/elsewhere"})
    assert f.armed and f.names == {"after_prepare_durable", "after_complete"}
    assert (f.arms["after_prepare_durable"].action, f.arms["after_prepare_durable"].skip) == ("crash", 2)
    assert (f.arms["after_complete"].action, f.arms["after_complete"].skip) == ("pause", 0)
    assert f.exit_code == 9
    f.disarm()
    assert not f.armed and not f.arms


@pytest.mark.parametrize("values", [
    {"kconform.fault": "after_nothing"},
    {"kconform.fault": "after_complete", "kconform.fault.action": "freeze"},
    {"kconform.fault": "after_complete", "kconform.fault.after_compete.action": "pause"},
    {"kconform.fault": "after_complete", "kconform.fault.after_complete.when": "1"},
    {"kconform.fault": "after_complete", "kconform.fault.skip": "-1"},
])
def test_wrong_fault_configs_raise(values):
    with pytest.raises(ValueError):
        FaultPoints().configure(values)


# ----------------------------------------------------------------- reach
def test_a_point_fires_once_at_hit_skip_plus_one_and_reports_passed_hits(capsys):
    f = FaultPoints()
    f.configure({"kconform.fault": "after_complete", "kconform.fault.action": "hold",
                 "kconform.fault.hold.ms": "0", "kconform.fault.skip": "2"})

    async def hit_four_times():
        for _ in range(4):
            await f.reach("after_complete", "txn-1")
        await f.reach("after_prepare_durable")  # not armed: silent

    trio.run(hit_four_times)
    assert fired_lines(capsys) == ["kconform fault point after_complete passed (hit 1)",
                                   "kconform fault point after_complete passed (hit 2)",
                                   "kconform fault point after_complete reached: hold txn-1",
                                   "kconform fault point after_complete released"]


def test_hold_waits_until_disarmed_while_other_tasks_run():
    f = FaultPoints()
    f.configure({"kconform.fault": "after_prepare_durable", "kconform.fault.action": "hold"})
    order = []

    async def main():
        async with trio.open_nursery() as nursery:
            async def held():
                await f.reach("after_prepare_durable")
                order.append("released")

            nursery.start_soon(held)
            await trio.testing.wait_all_tasks_blocked()
            order.append("others ran")
            f.disarm()

    import trio.testing  # noqa: F401 - wait_all_tasks_blocked

    trio.run(main)
    assert order == ["others ran", "released"]


CHILD = textwrap.dedent("""
    import sys, trio
    from broker_impl.faults import FAULTS
    FAULTS.configure(dict(a.split("=", 1) for a in sys.argv[1:]))
    async def main():
        print("before", flush=True)
        await FAULTS.reach("after_prepare_durable", "txn-x")
        print("after", flush=True)
    trio.run(main)
""")


def run_child(tmp_path: Path, *sets: str) -> tuple[subprocess.Popen, Path]:
    err = tmp_path / "child.err"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, *sets], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=open(err, "wb"), env={**os.environ, "PYTHONPATH": str(REPO)})
    return proc, err


def wait_state(pid: int, want: str, limit_s: float = 20.0) -> str | None:
    deadline = time.monotonic() + limit_s
    state = process_state(pid)
    while state != want and time.monotonic() < deadline:
        time.sleep(0.02)
        state = process_state(pid)
    return state


def test_pause_stops_the_process_after_saying_so_and_sigcont_continues_it(tmp_path):
    proc, err = run_child(tmp_path, "kconform.fault=after_prepare_durable", "kconform.fault.action=pause")
    try:
        assert proc.stdout.readline() == b"before\n"
        assert wait_state(proc.pid, "T") == "T"
        assert err.read_text().splitlines() == ["kconform fault point after_prepare_durable reached: pause txn-x"]
        os.kill(proc.pid, signal.SIGCONT)
        assert proc.stdout.readline() == b"after\n"
        assert proc.wait(20) == 0
        assert err.read_text().splitlines()[-1] == "kconform fault point after_prepare_durable continued"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_hold_holds_only_the_point_until_sigusr1_releases_it(tmp_path):
    """`hold` + the harness's `release`: the process keeps running (not stopped, unlike pause),
    the coroutine at the point waits, and SIGUSR1 lets it go on."""
    proc, err = run_child(tmp_path, "kconform.fault=after_prepare_durable", "kconform.fault.action=hold")
    try:
        assert proc.stdout.readline() == b"before\n"
        deadline = time.monotonic() + 20
        while "reached: hold" not in err.read_text() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert err.read_text().splitlines() == ["kconform fault point after_prepare_durable reached: hold txn-x"]
        time.sleep(0.2)
        assert proc.poll() is None and process_state(proc.pid) != "T"  # held, not stopped, not gone on
        os.kill(proc.pid, signal.SIGUSR1)
        assert proc.stdout.readline() == b"after\n"
        assert proc.wait(20) == 0
        assert err.read_text().splitlines()[-1] == "kconform fault point after_prepare_durable released"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_crash_exits_with_the_configured_code_and_says_so_first(tmp_path):
    proc, err = run_child(tmp_path, "kconform.fault=after_prepare_durable", "kconform.fault.exit.code=77")
    assert proc.wait(20) == 77
    assert proc.stdout.read() == b"before\n"
    assert err.read_text().splitlines() == ["kconform fault point after_prepare_durable reached: crash txn-x"]


def test_the_notice_arrives_before_the_point_crashes_or_stops_the_process(tmp_path):
    for action in ("crash", "pause"):
        listener = FaultListener()
        proc, _ = run_child(tmp_path, "kconform.fault=after_prepare_durable", f"kconform.fault.action={action}",
                            f"kconform.fault.notify={listener.address}", "node.id=4")
        try:
            notice = listener.wait_reached("after_prepare_durable", 20)
            assert notice is not None
            assert (notice.event, notice.action, notice.hit, notice.node, notice.pid, notice.detail) == \
                ("reached", action, 1, 4, proc.pid, "txn-x")
            assert listener.wait_reached("after_prepare_durable", 0.2) is None  # handed out once
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
            listener.close()


def test_passed_hits_are_told_too_and_a_listener_ignores_stray_datagrams():
    listener = FaultListener()
    f = FaultPoints()
    f.configure({"kconform.fault": "after_complete", "kconform.fault.action": "hold", "kconform.fault.hold.ms": "0",
                 "kconform.fault.skip": "1", "kconform.fault.notify": listener.address, "node.id": "2"})
    try:
        NoticeSender(listener.address).send(FaultNotice("x", "reached", "crash", 1, 9, 1))  # another node
        import socket
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"not a notice", tuple(listener.address.split(":")[:1]) + (int(listener.address.split(":")[1]),))

        async def hit_twice():
            await f.reach("after_complete", "t")
            await f.reach("after_complete", "t")

        trio.run(hit_twice)
        assert listener.wait_reached("after_complete", 20) is not None
        assert listener.hits(2) == {"after_complete": (1, True)}
        assert [(n.point, n.event) for n in listener.notices if n.node == 2] == \
            [("after_complete", "passed"), ("after_complete", "reached")]
    finally:
        listener.close()


def test_process_state_of_a_running_a_stopped_and_a_gone_process():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert process_state(proc.pid) in ("R", "S")
        os.kill(proc.pid, signal.SIGSTOP)
        assert wait_state(proc.pid, "T") == "T"
        os.kill(proc.pid, signal.SIGCONT)
    finally:
        proc.kill()
        proc.wait(10)
    assert process_state(proc.pid) is None
    assert process_state(None) is None


# ----------------------------------------------------------------- runner side
CASE = """\
title: t
scenario: S09
description: d
topology: {topics: [t1]}
actors: {p1: {role: producer, config: {transactional.id: txn-1}}}
steps:
  - p1: init_transactions
%s
checks: [{check: records, isolation: read_committed, topic: t1, values: []}]
"""


def case_with(tmp_path: Path, *faults: str):
    path = tmp_path / "cases" / "x" / "c.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(CASE % "\n".join(f"  - fault: {f}" for f in faults))
    return loader.load_case(path, tmp_path / "cases")


class EmbeddedLike:
    name = "embedded"
    static_capabilities = frozenset({"kill", "pause", "restart", "fault_points"})


class NoFaultPoints:
    name = "apache-kafka"
    static_capabilities = frozenset({"kill", "pause", "restart"})


def test_plan_arms_each_point_with_its_own_action_and_occurrence(tmp_path):
    case = case_with(tmp_path, "{pause: coordinator, of: txn-1, at: after_prepare_durable}",
                     "{crash: coordinator, of: txn-1, at: after_complete, occurrence: 3}")
    assert plan_broker_configs(case, EmbeddedLike) == {
        "kconform.fault": "after_prepare_durable,after_complete",
        "kconform.fault.after_prepare_durable.action": "pause",
        "kconform.fault.after_prepare_durable.skip": "0",
        "kconform.fault.after_complete.action": "crash",
        "kconform.fault.after_complete.skip": "2",
    }
    FaultPoints().configure(plan_broker_configs(case, EmbeddedLike))  # the broker accepts them
    assert arming_configs(parse_arms(plan_broker_configs(case, EmbeddedLike))) == \
        plan_broker_configs(case, EmbeddedLike)


def test_plan_refuses_a_target_without_fault_points_and_two_faults_at_one_point(tmp_path):
    case = case_with(tmp_path, "{pause: coordinator, of: txn-1, at: after_prepare_durable}")
    with pytest.raises(NotApplicable, match="cannot pause the coordinator exactly at protocol point"):
        plan_broker_configs(case, NoFaultPoints)
    twice = case_with(tmp_path, "{pause: coordinator, of: txn-1, at: after_complete}",
                      "{crash: coordinator, of: txn-1, at: after_complete, occurrence: 2}")
    with pytest.raises(NotApplicable, match="one fault per protocol point"):
        plan_broker_configs(twice, EmbeddedLike)


ARMED = {"kconform.fault": "after_prepare_durable,after_complete",
         "kconform.fault.after_prepare_durable.action": "pause",
         "kconform.fault.after_prepare_durable.skip": "0",
         "kconform.fault.after_complete.action": "crash",
         "kconform.fault.after_complete.skip": "2",
         "transaction.timeout.ms": "9"}


def embedded_armed(*notices: FaultNotice) -> EmbeddedTarget:
    """An embedded target as _launch leaves it, with these notices received from node 1."""
    t = EmbeddedTarget()
    t._plain_configs = {"transaction.timeout.ms": "9"}
    t._arms = parse_arms(ARMED)
    t.fault_listener = FaultListener()
    sender = NoticeSender(t.fault_listener.address)
    for n in notices:
        sender.send(n)
    deadline = time.monotonic() + 20
    while len(t.fault_listener.notices) < len(notices) and time.monotonic() < deadline:
        time.sleep(0.01)
    return t


def notice(point: str, event: str, node: int = 1) -> FaultNotice:
    return FaultNotice(point, event, "crash", 1, node, 123)


def test_restart_drops_the_fired_point_and_keeps_counting_the_other():
    t = embedded_armed(notice("after_complete", "passed"), notice("after_prepare_durable", "reached"),
                       notice("after_complete", "passed", node=7))
    try:
        configs = t._configs_for(1)
        assert configs == {"transaction.timeout.ms": "9", "kconform.fault": "after_complete",
                           "kconform.fault.after_complete.action": "crash",
                           "kconform.fault.after_complete.skip": "1",
                           "kconform.fault.notify": t.fault_listener.address}
    finally:
        t.stop()


def test_restart_after_every_point_fired_disarms_all():
    t = embedded_armed(notice("after_prepare_durable", "reached"), notice("after_complete", "passed"),
                       notice("after_complete", "passed"), notice("after_complete", "reached"))
    try:
        assert t._configs_for(1) == {"transaction.timeout.ms": "9"}
    finally:
        t.stop()


def test_restart_before_any_hit_keeps_every_point_armed():
    t = embedded_armed()
    try:
        assert t._configs_for(1) == {**ARMED, "kconform.fault.notify": t.fault_listener.address}
    finally:
        t.stop()
