"""The zygote (conformance/zygote.py): a forked child is the process `python -m MODULE ARGS`
would have been -- its stdio, working directory, session, exit status -- and the harness
signals it by PID. Real processes throughout: json.tool for stdio and exit codes, the embedded
broker for signals."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance import zygote
from conformance.targets import EmbeddedTarget, Topology, wire
from conformance.targets.process import NodeProcess, StdoutLines, process_state, python_env

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not zygote.enabled(), reason="no zygote here (not Linux, or KCONFORM_ZYGOTE=0)")]


def json_tool(tmp_path: Path, text: str) -> tuple[zygote.Forked, bytes]:
    child = zygote.spawn([sys.executable, "-m", "json.tool", "--compact"], env=dict(os.environ), cwd=tmp_path,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=open(tmp_path / "err.log", "ab"))
    child.stdin.write(text.encode())
    child.stdin.close()
    out = child.stdout.read()
    child.stdout.close()
    child.wait(timeout=30)
    return child, out


def test_a_child_reads_its_stdin_writes_its_stdout_and_exits_with_its_status(tmp_path):
    ok, out = json_tool(tmp_path, '{"a": [1, 2]}')
    assert (ok.returncode, json.loads(out)) == (0, {"a": [1, 2]})
    assert ok.pid != os.getpid() and ok.cpu_s is not None
    bad, out = json_tool(tmp_path, "{not json")
    assert bad.returncode == 1 and out == b""
    assert "Expecting property name" in (tmp_path / "err.log").read_text()


def test_a_forked_broker_is_its_own_session_in_its_directory_and_dies_by_sigkill(tmp_path):
    proc = NodeProcess([sys.executable, "-m", "broker_impl", "--listen", "127.0.0.1:0",
                        "--data-dir", str(tmp_path / "data"), "--node-id", "1"],
                       tmp_path / "broker.log", cwd=tmp_path, env=python_env("broker_impl"),
                       stdout_pipe=True, fork_server=True)
    proc.start()
    try:
        assert isinstance(proc.popen, zygote.Forked)
        host, _, port = StdoutLines(proc).read_until(lambda line: line.startswith("listening "), 30)[-1] \
            .split()[1].rpartition(":")
        assert wire.api_versions((host, int(port))).api_versions
        assert os.getsid(proc.pid) == proc.pid                     # a session of its own
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        assert [a.decode() for a in cmdline] == proc.argv          # what ps shows: its own argv
        assert Path(f"/proc/{proc.pid}/comm").read_text().strip() == "broker_impl"
        assert os.readlink(f"/proc/{proc.pid}/cwd") == str(tmp_path)
        proc.pause()
        assert process_state(proc.pid) in ("T", "t")
        proc.resume()
        proc.kill()
        assert proc.returncode() == -signal.SIGKILL
        assert not proc.running() and process_state(proc.pid) is None   # reaped
    finally:
        proc.kill()


def test_without_the_zygote_the_broker_is_exec_ed(tmp_path, monkeypatch, start_target):
    monkeypatch.setenv("KCONFORM_ZYGOTE", "0")
    target, _ = start_target("embedded", Topology())
    assert isinstance(target.procs[1].popen, subprocess.Popen)
    monkeypatch.setenv("KCONFORM_ZYGOTE", "1")
    forked, _ = start_target("embedded", Topology())
    assert isinstance(forked.procs[1].popen, zygote.Forked)
    assert EmbeddedTarget.availability()[0]


def test_a_terminated_broker_reports_a_clean_exit(start_target):
    target, _ = start_target("embedded", Topology())
    proc = target.procs[1]
    t0 = time.monotonic()
    proc.terminate(grace=20)
    assert proc.returncode() == 0 and time.monotonic() - t0 < 20


def test_with_its_zygote_gone_a_child_is_still_seen_to_end(tmp_path):
    """Nobody reports the exit of an orphan: its PID is watched instead (a wait must not hang)."""
    env = dict(os.environ)
    child = zygote.spawn([sys.executable, "-m", "json.tool"], env=env, cwd=tmp_path,
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    z = zygote.zygote_for(sys.executable, "json.tool", env)
    z.proc.kill()                                # the zygote we started, by its PID
    z.proc.wait(timeout=10)
    assert child.poll() is None                  # still reading its stdin
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(timeout=0.2)
    child.stdin.close()                          # it ends; init (or nobody) reaps it
    assert child.wait(timeout=10) == -9          # its status is lost with the zygote
    assert zygote.zygote_for(sys.executable, "json.tool", env) is not z   # a new one on next use


def test_a_reused_pid_is_not_taken_for_the_child_that_had_it_before(tmp_path):
    """PIDs wrap within one long run (a library run starts thousands of processes): a child that
    is given the PID of one that ended before is still running, with its own exit status. The
    kernel is asked to hand the same PID out again (ns_last_pid, root only)."""
    last_pid = Path("/proc/sys/kernel/ns_last_pid")
    if not os.access(last_pid, os.W_OK):
        pytest.skip("cannot choose the next PID here (ns_last_pid needs root)")
    env = dict(os.environ)
    for _ in range(10):
        first, _ = json_tool(tmp_path, "{not json")             # ends with status 1
        assert first.returncode == 1
        last_pid.write_text(str(first.pid - 1))
        second = zygote.spawn([sys.executable, "-m", "json.tool"], env=env, cwd=tmp_path,
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if second.pid != first.pid:                              # another process forked between
            second.stdin.close()
            second.wait(timeout=30)
            continue
        assert second.poll() is None                             # running: not the old one's exit
        second.stdin.write(b"[1]")
        second.stdin.close()
        assert second.wait(timeout=30) == 0
        return
    pytest.skip("the kernel did not give the same PID again in 10 tries")
