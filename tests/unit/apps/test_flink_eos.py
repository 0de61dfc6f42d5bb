"""The Flink application case: the restore point the harness picks among Flink's retained
checkpoints, the section's validation, the topics it needs and the JVM options Flink needs on
Java 17."""
from __future__ import annotations

from pathlib import Path

import pytest

from conformance.apps.flink_eos import JAVA17_OPTIONS, latest_checkpoint, task_failures
from conformance.dsl import parse_case
from conformance.dsl.loader import CaseError


def _chk(root: Path, job: str, n: int, complete: bool = True) -> Path:
    d = root / job / f"chk-{n}"
    d.mkdir(parents=True)
    if complete:
        (d / "_metadata").write_bytes(b"x")
    return d


def test_the_restore_point_is_the_newest_complete_checkpoint(tmp_path: Path):
    assert latest_checkpoint(tmp_path) is None
    _chk(tmp_path, "a1", 9)
    newest = _chk(tmp_path, "a1", 23)
    _chk(tmp_path, "a1", 24, complete=False)     # being written when the JVM died: no _metadata
    (tmp_path / "a1" / "shared").mkdir()
    assert latest_checkpoint(tmp_path) == newest  # by number, not by name (chk-9 < chk-23)


def test_the_section_is_read_with_one_partition_topics():
    case = parse_case({"title": "t", "topology": {"nodes": 3},
                       "application": {"kind": "flink_eos", "records": 900, "record_delay_ms": 0}}, "c.yaml", "apps/c")
    assert (case.application.records, case.application.record_delay_ms) == (900, 0)
    assert [(t.name, t.partitions, t.replication_factor) for t in case.topology.topics] == [
        ("flink-input", 1, 3), ("flink-output", 1, 3)]


@pytest.mark.parametrize("section, field", [
    ({"kind": "flink_eos", "records": 10}, "application.records"),
    ({"kind": "flink_eos", "record_delay_ms": -1}, "application.record_delay_ms"),
    ({"kind": "flink_eos", "messages": 100}, "application.messages"),
    ({"kind": "flink_eos", "failure_mode": "clean_bounce"}, "application.failure_mode"),
    ({"kind": "flink_eos", "bounces": 2}, "application.bounces"),
    ({"kind": "flink_eos", "bounce_target": "clients"}, "application.bounce_target"),
    ({"kind": "flink_eos", "bounce_target": "brokers"}, "topology.nodes"),
])
def test_a_bad_section_names_the_file_and_the_field(section, field):
    with pytest.raises(CaseError) as ei:
        parse_case({"title": "t", "application": section}, "c.yaml", "apps/c")
    assert "c.yaml" in str(ei.value) and field in str(ei.value)


def test_a_leader_chase_asks_for_restart_and_kill_or_stop():
    case = parse_case({"title": "t", "topology": {"nodes": 3},
                       "application": {"kind": "flink_eos", "bounce_target": "brokers", "failure_mode": "hard_bounce",
                                       "bounces": 2, "down_s": 1}}, "c.yaml", "apps/c")
    app = case.application
    assert (app.bounce_target, app.failure_mode, app.bounces, app.down_s) == ("brokers", "hard_bounce", 2, 1.0)
    assert app.node_actions() == {"restart", "kill"}
    paused = parse_case({"title": "t", "topology": {"nodes": 3},
                         "application": {"kind": "flink_eos", "bounce_target": "brokers", "failure_mode": "pause",
                                         "down_s": 8}}, "c.yaml", "apps/c").application
    assert (paused.failure_mode, paused.down_s, paused.node_actions()) == ("pause", 8.0, {"pause"})
    alone = parse_case({"title": "t", "application": {"kind": "flink_eos"}}, "c.yaml", "apps/c").application
    assert alone.bounce_target == "none" and alone.node_actions() == set()


def test_flink_gets_the_java_17_openings_its_launch_scripts_give():
    assert "--add-opens=java.base/java.util=ALL-UNNAMED" in JAVA17_OPTIONS
    assert "--add-opens=java.base/java.lang=ALL-UNNAMED" in JAVA17_OPTIONS
    assert all(o.startswith(("--add-opens=", "--add-exports=")) for o in JAVA17_OPTIONS)


def test_task_failures_are_counted_from_flinks_log(tmp_path: Path):
    log = tmp_path / "job.stderr"
    assert task_failures(log) == 0                # no log: none
    log.write_text(
        "[2026-11-28 05:45:43,717] WARN Source: input -> fail-once -> output: Writer -> output: Committer (1/1)#0 "
        "(d3cf_0_0) switched from RUNNING to FAILED with failure cause: (org.apache.flink.runtime.taskmanager.Task)\n"
        "[2026-11-28 05:45:44,001] WARN No tokens obtained so skipping notifications\n"
        "[2026-11-28 05:46:10,100] WARN Source: input (1/1)#1 (d3cf_0_1) switched from RUNNING to FAILED with "
        "failure cause: (org.apache.flink.runtime.taskmanager.Task)\n")
    assert task_failures(log) == 2


class _Nodes:
    """Records the node actions a chase takes (the cases run them on real brokers)."""

    def __init__(self):
        self.calls = []

    def partition_replicas(self, topic, partition):
        return 2, (1, 2, 3), (1, 2, 3)

    def __getattr__(self, action):
        if action in ("pause", "resume", "kill", "stop_node", "restart"):
            return lambda node: self.calls.append((action, node))
        raise AttributeError(action)


@pytest.mark.parametrize("mode, actions", [
    ("pause", ["pause", "resume"]), ("hard_bounce", ["kill", "restart"]), ("clean_bounce", ["stop_node", "restart"])])
def test_a_chase_pauses_or_bounces_the_leader_it_found(tmp_path: Path, mode, actions):
    from conformance.apps.base import ApplicationRun
    case = parse_case({"title": "t", "topology": {"nodes": 3},
                       "application": {"kind": "flink_eos", "bounce_target": "brokers", "failure_mode": mode,
                                       "down_s": 0, "bounces": 1}}, "c.yaml", "apps/c")
    nodes = _Nodes()
    run = ApplicationRun(case, nodes, "127.0.0.1:9", None, tmp_path)
    done = run.chase_leader("t", 0, 1, mode, lambda: True)
    assert nodes.calls == [(a, 2) for a in actions]
    assert done[0]["node"] == 2 and done[0]["landed"] and done[0]["mode"] == {"pause": "pause"}.get(
        mode, "clean" if mode == "clean_bounce" else "hard")


def test_the_chase_check_counts_landed_bounces_and_names_the_skipped(tmp_path: Path):
    from conformance.apps.base import ApplicationRun
    case = parse_case({"title": "t", "topology": {"nodes": 3},
                       "application": {"kind": "flink_eos", "bounce_target": "brokers", "bounces": 2}}, "c.yaml", "apps/c")
    run = ApplicationRun(case, _Nodes(), "127.0.0.1:9", None, tmp_path)
    check, landed = run.chase_landed([{"bounce": 1, "landed": True},
                                      {"bounce": 2, "landed": False, "skipped": "no leader of out-0"}], "out", "busy")
    assert (check.name, check.passed, landed) == ("bounces_landed", False, 1)
    assert "1 of 2 hard_bounces" in check.message and "bounce 2: no leader of out-0" in check.message
