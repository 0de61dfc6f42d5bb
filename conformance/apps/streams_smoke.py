"""Kafka Streams' smoke system test as a row: tests/kafkatest/tests/streams/streams_smoke_test.py.

The programs are Kafka's own, unmodified, from the kafka-streams test jar of the release
(targets/maven.resolve_streams_tests): `StreamsSmokeTest <props> process` is one Kafka Streams
instance of the smoke topology (application.id `SmokeTest`: aggregations, windows, suppression,
a table join, state stores with changelogs), `StreamsSmokeTest <props> run` the driver, which
writes keyed integers to `data` for 90 s and then reads every output topic back and verifies
each result against what it wrote (with exactly_once_v2 also that every transaction ended:
read_committed and read_uncommitted agree).

What the test does, and what this module does the same way:
- topics data, echo, min, min-suppressed, min-raw, max, sum, sws-raw, sws-suppressed, dif, cnt,
  avg, wcnt, tagg (and fk, which this release's driver writes): 5 partitions, replication 1;
  Streams' own topics replicated min(nodes, 3) times (replication.factor 3 there);
- processor 1 starts and reaches RUNNING, the driver starts, processor 1 prints `processed`, and
  is stopped -- killed (SIGKILL) when `crash` -- before the driver began its verification;
- processor 2 starts, reaches RUNNING, processes, and is stopped the same way; processor 3
  starts, reaches RUNNING and processes; the driver ends; processor 3 is stopped cleanly;
- verdict: the driver printed SUCCESS (at_least_once with crashes: PROCESSED-MORE-THAN-GENERATED
  is accepted too: duplicates are what at-least-once allows).

Each processor has a state directory of its own (ducktape runs each on its own host), so a
killed processor's successor restores its stores from the changelogs, as a new host would; the
directories are temporary (RocksDB stores, ~200 MB each) and not kept with the row.
The topic names and the application id are fixed in the program: the row's namespace does not
apply, and the instance is never reused by a later row.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from conformance.targets.maven import DEFAULT_KAFKA_VERSION, resolve_streams_tests
from conformance.targets.topology import TopicSpec

from ..results import Check
from .base import ApplicationRun
from .tools import Tool, wire_summary

MAIN = "org.apache.kafka.streams.tests.StreamsSmokeTest"
TOPICS = ("data", "echo", "min", "min-suppressed", "min-raw", "max", "sum", "sws-raw", "sws-suppressed", "dif", "cnt",
          "avg", "wcnt", "tagg", "fk")
PARTITIONS = 5
#: ducktape's waits: the first processor's RUNNING, a later one's, and `processed` after RUNNING.
FIRST_RUNNING_S, LATER_RUNNING_S, PROCESSED_S = 60.0, 120.0, 30.0
#: The driver writes for 90 s, then verifies; it gives up after 600 s without a new record.
DRIVER_TIMEOUT_S = 900.0
RUNNING = "REBALANCING -> RUNNING"
PROCESSED = "processed"
VERIFYING = "Result Verification"
SUCCESS = "SUCCESS"
MORE = "PROCESSED-MORE-THAN-GENERATED"
#: Driver lines kept in the row's summary when the verification failed: the test's own words.
FAILURE_WORDS = ("fail", "FAIL", "PROCESSED-LESS-THAN-GENERATED", MORE, "Could not read")


def properties(bootstrap: str, guarantee: str, state_dir: Path, nodes: int) -> str:
    """The processors' and the driver's properties, as streams_smoke_test.py's services write
    them (StreamsSmokeTestBaseService.prop_file), replication.factor bounded by the nodes."""
    props = {"bootstrap.servers": bootstrap, "processing.guarantee": guarantee, "state.dir": str(state_dir),
             "num.stream.threads": 3, "replication.factor": min(nodes, 3), "num.standby.replicas": 2,
             "buffered.records.per.partition": 100, "commit.interval.ms": 1000, "auto.offset.reset": "earliest",
             "acks": "all", "acceptable.recovery.lag": 9223372036854775807, "session.timeout.ms": 10000}
    return "".join(f"{k}={v}\n" for k, v in props.items())


def driver_result(lines: list[str]) -> str | None:
    """The driver's last word: SUCCESS, PROCESSED-MORE-THAN-GENERATED, FAILURE (an output did not
    match), FAILED (with exactly_once_v2: a transaction had not ended -- read_committed and
    read_uncommitted differed; the details are on its stderr), or None (it never said)."""
    words = {x.strip() for x in lines}
    for word in (SUCCESS, "FAILED", "FAILURE"):
        if word in words:
            return word
    return MORE if any(MORE in x for x in lines) else None


def driver_verdict(lines: list[str], guarantee: str, crash: bool) -> tuple[bool, str]:
    """Whether the driver's output is a pass (streams_smoke_test.py's final grep), and why."""
    result = driver_result(lines)
    if result == SUCCESS:
        return True, "the driver verified every output topic: SUCCESS"
    if result == MORE and crash and guarantee == "at_least_once":
        return True, "the driver read more than it generated, which at_least_once with crashes allows"
    if result == "FAILED":
        return False, "a transaction never ended: read_committed and read_uncommitted differ (driver.stderr)"
    failed = [x for x in lines if any(w in x for w in FAILURE_WORDS)][:5]
    if not any(VERIFYING in x for x in lines):
        return False, "the driver never reached its verification" + (f": {failed}" if failed else "")
    return False, "the driver's verification failed: " + " | ".join(failed or lines[-3:])


class StreamsSmokeRun(ApplicationRun):
    """The row's play for `application: {kind: streams_smoke}` (module doc); the same place in a
    row as TransactionsTestRun."""

    #: The instance holds topics and a group whose names are the program's: never reused.
    leaves_state = True
    program = f"kafka-streams {DEFAULT_KAFKA_VERSION}"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        #: the processors' state directories: RocksDB stores of ~200 MB each, not evidence (the
        #: changelogs are), so outside the row's artifacts and removed at close()
        self.state_root = Path(tempfile.mkdtemp(prefix="kconform-streams-state-"))

    def _start(self, name: str, command: str) -> Tool:
        props = self.art / f"{name}.properties"
        props.write_text(properties(self.bootstrap, self.app.processing_guarantee, self.state_root / name,
                                    self.case.topology.nodes))
        tool = Tool(self.classpath, MAIN, [str(props), command], self.art, name)
        self.tools.append(tool)
        self._phase(f"start {name}")
        return tool

    def run(self) -> list[Check]:
        a = self.app
        self.classpath = resolve_streams_tests(DEFAULT_KAFKA_VERSION)
        self.target.create_topics([TopicSpec(name=t, partitions=PARTITIONS, replication_factor=1) for t in TOPICS])
        checks: list[Check] = []
        processors: list[dict] = []
        driver: Tool | None = None
        p: Tool | None = None
        for n in (1, 2, 3):
            p = self._start(f"processor{n}", "process")
            entry: dict[str, Any] = {"name": p.name}
            processors.append(entry)
            running = p.wait_for(RUNNING, FIRST_RUNNING_S if n == 1 else LATER_RUNNING_S)
            entry["running_at_s"] = self.elapsed() if running is not None else None
            if running is None:
                break
            if driver is None:
                driver = self._start("driver", "run")
            processed = p.wait_for(PROCESSED, PROCESSED_S, since=running)
            entry["processed_at_s"] = self.elapsed() if processed is not None else None
            if processed is None:
                break
            if n < 3:
                # ducktape: the driver must still be generating, else the stop proves nothing
                entry["driver_verifying"] = driver.wait_for(VERIFYING, 0) is not None
                at = self.elapsed()
                entry["exit"] = p.signal(clean=not a.crash)
                entry["stopped_at_s"] = at
                self.fault_events.append({"fault": f"{'SIGKILL' if a.crash else 'SIGTERM'} {p.name}", "at_s": at})
        ran = [e for e in processors if e.get("processed_at_s") is not None]
        checks.append(Check("processors_ran", len(ran) == 3,
                            f"{len(ran)} of 3 processors reached RUNNING and processed records"
                            + "".join(f"; {e['name']}: no '{RUNNING if e.get('running_at_s') is None else PROCESSED}'"
                                      f" in {LATER_RUNNING_S if e.get('running_at_s') is None else PROCESSED_S} s"
                                      for e in processors if e.get("processed_at_s") is None)))
        landed = [e for e in processors if "stopped_at_s" in e and not e["driver_verifying"]]
        checks.append(Check("stops_landed", len(landed) == 2,
                            f"{len(landed)} of 2 processor {'kills' if a.crash else 'stops'} landed while the driver "
                            "was still generating"))
        rc = driver.wait(DRIVER_TIMEOUT_S) if driver is not None else None
        self._phase("driver ended", exit=rc)
        lines = driver.lines if driver is not None else []
        ok, why = driver_verdict(lines, a.processing_guarantee, a.crash)
        checks.append(Check("verified", ok and rc == 0, f"{why}; driver exit {rc}"))
        if p is not None and p.running():
            processors[-1]["exit"] = p.signal(clean=True)
        self.summary = {
            "application": a.kind, "processing_guarantee": a.processing_guarantee, "crash": a.crash,
            "nodes": self.case.topology.nodes, "program": f"kafka-streams {DEFAULT_KAFKA_VERSION} (test jar)",
            "driver_result": driver_result(lines),
            "driver_s": self.elapsed(), "processors": processors,
            "driver_failures": [x for x in lines if any(w in x for w in FAILURE_WORDS)][:20],
        }
        return checks

    def wire(self, lines: list[dict] | None) -> dict:
        """Error codes per API that crossed the proxy, and what the programs' own logs named."""
        return wire_summary(lines, [t.stderr_path for t in self.tools])

    def close(self) -> None:
        super().close()
        shutil.rmtree(self.state_root, ignore_errors=True)
