"""The observer's read when its time runs out (runner/observe._read_all).

Why: a read cut short by the observation deadline used to come back as an empty read, which a
case then reported as "read nothing" -- a broker fact that was never observed (a Java observer
that took 10 s to start on a loaded machine, apache-kafka@3.9.1 flink/downtime_exceeds_timeout).
It must be an observation error instead, unless the positions already stand at the ends. The
driver here is a scripted stand-in answering the observer's ops (the reads over real clients
and brokers are covered by every case run).
"""
from __future__ import annotations

import time

from conformance.clients.protocol import Outcome
from conformance.runner.observe import _read_all

TPS = [{"topic": "t1", "partition": 0}]


class ScriptedDriver:
    """Answers the observer's driver ops: no records, positions as given."""

    def __init__(self, position: int | None) -> None:
        self.position = position
        self.ops: list[str] = []
        self.assigned: list[dict] = []

    def call(self, op: str, deadline_ms: int = 0, **args) -> Outcome:
        self.ops.append(op)
        if op == "assign":
            self.assigned = args["partitions"]
        if op == "poll":
            return Outcome(op, True, {"records": []})
        if op == "position":
            return Outcome(op, True, {"positions": [{"topic": "t1", "partition": 0, "offset": self.position}]})
        return Outcome(op, True, {})


def test_a_read_cut_short_by_the_deadline_is_an_observation_error():
    errors: list[str] = []
    reads = _read_all(ScriptedDriver(position=None), "read_uncommitted", TPS, "b:1", {"t1-0": 2}, {},
                      time.monotonic() - 1, errors)
    assert reads == {"t1-0": []}
    assert len(errors) == 1 and errors[0].startswith("read(read_uncommitted): the observation deadline passed")


def test_no_error_when_the_positions_already_stand_at_the_ends():
    errors: list[str] = []
    driver = ScriptedDriver(position=2)
    _read_all(driver, "read_committed", TPS, "b:1", {"t1-0": 2}, {}, time.monotonic() - 1, errors)
    assert errors == []
    assert "poll" not in driver.ops


def test_no_error_for_an_empty_partition():
    errors: list[str] = []
    _read_all(ScriptedDriver(position=None), "read_committed", TPS, "b:1", {"t1-0": 0}, {}, time.monotonic() - 1, errors)
    assert errors == []


def test_the_read_starts_at_the_log_start_offset():
    """A partition whose first records DeleteRecords removed is read from its log start, not from
    offset 0 (which franz-go, Sarama and KafkaJS do not reset by auto.offset.reset when it is
    assigned explicitly); a partition of unknown start from 0."""
    driver = ScriptedDriver(position=3)
    tps = TPS + [{"topic": "t1", "partition": 1}]
    _read_all(driver, "read_uncommitted", tps, "b:1", {"t1-0": 3, "t1-1": 0}, {"t1-0": 2}, time.monotonic() + 5, [])
    assert driver.assigned == [{"topic": "t1", "partition": 0, "offset": 2}, {"topic": "t1", "partition": 1, "offset": 0}]
