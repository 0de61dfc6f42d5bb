"""Reading a target's log for internal errors, and naming the frame behind each."""
from __future__ import annotations

from pathlib import Path

from conformance.fuzz.watch import LogWatch


class FakeTarget:
    """Only what LogWatch reads of a target: its name and its log files."""

    def __init__(self, name: str, log: Path) -> None:
        self.name = name
        self.log = log

    def log_files(self) -> list[Path]:
        return [self.log]


def test_new_internal_errors_only_and_the_peer_they_came_from(tmp_path):
    log = tmp_path / "broker.log"
    log.write_text("2026 ERROR kconform.broker.connection: closing connection 3 from 127.0.0.1:40001 "
                   "after an internal error\n")
    watch = LogWatch(FakeTarget("embedded", log))
    assert watch.scan().internal_errors == 0  # what was there before the fuzzing started
    with open(log, "a") as fh:
        fh.write("2026 WARNING kconform.broker.connection: closing connection 4 from 127.0.0.1:40002: malformed\n")
        fh.write("2026 ERROR kconform.broker.connection: closing connection 5 from 127.0.0.1:40003 after an "
                 "internal error\nTraceback (most recent call last):\n  File x\nTypeError: boom\n")
        fh.write("2026 ERROR kconform.broker.connection: half a line")
    scan = watch.scan()
    assert (scan.internal_errors, scan.peer_ports) == (1, [40003])
    with open(log, "a") as fh:
        fh.write(" now whole\n")
    assert watch.scan().internal_errors == 1
    assert watch.log_bytes() > 0


def test_a_target_without_patterns_reports_none():
    watch = LogWatch(FakeTarget("external", Path("/nonexistent")))
    assert not watch.readable and watch.scan().internal_errors == 0
