"""Kafka Streams under broker bounces as a row: tests/kafkatest/tests/streams/streams_broker_bounce_test.py,
`test_broker_type_bounce` with broker_type `leader` and failure_mode clean_bounce or hard_bounce.

The programs are the smoke test's (apps/streams_smoke.py: Kafka's own StreamsSmokeTest from the
kafka-streams test jar, unmodified); what differs is who fails: not the processors but the
brokers under them.

What the test does, and what this module does the same way:
- the smoke test's topics with 3 partitions, replication 3 and min.insync.replicas 2 (here:
  replication min(nodes, 3), min ISR 2 on 3+ nodes, else 1); Streams' own topics replicated the
  same way (its replication.factor);
- one processor (StreamsSmokeTest `process`) and the driver (`run`, 90 s of keyed integers, then
  the verification of every output topic);
- the leader of partition 0 of one topic is chased: found, stopped (SIGTERM) or killed (SIGKILL),
  started again -- five times (clean_bounce, hard_bounce);
- verdict: the driver's verification (SUCCESS; with at_least_once PROCESSED-MORE-THAN-GENERATED
  too) and the processor closed by itself at the end (SMOKE-TEST-CLIENT-CLOSED), not ended by an
  exception.

Differences, on purpose: ducktape waits 120 s before the first bounce, when its driver has
long stopped generating; here the bounces begin `bounce_after_s` after the processor processed
its first records, so that they land while data flows and transactions are open (each bounce
records whether the driver was still generating: `landed`). The topic whose leader is chased is
`data` (ducktape: a random one), so that a seed is not needed to replay a row. After each bounce
the ISR of `data` is awaited whole before the next, as a killed KRaft broker needs to be back
before its successor is chased (ducktape waited for the ZooKeeper deregistration).
"""
from __future__ import annotations

from typing import Any

from conformance.targets.maven import DEFAULT_KAFKA_VERSION, resolve_streams_tests
from conformance.targets.topology import TopicSpec

from ..results import Check
from .streams_smoke import (FIRST_RUNNING_S, PROCESSED, PROCESSED_S, RUNNING, TOPICS, VERIFYING, DRIVER_TIMEOUT_S,
                            StreamsSmokeRun, driver_result, driver_verdict, FAILURE_WORDS)

#: streams_broker_bounce_test's topics: 3 partitions each.
PARTITIONS = 3
#: The topic whose partition 0's leader is chased.
CHASED = "data"
CLOSED, EXCEPTION = "SMOKE-TEST-CLIENT-CLOSED", "SMOKE-TEST-CLIENT-EXCEPTION"


class StreamsBrokerBounceRun(StreamsSmokeRun):
    """The row's play for `application: {kind: streams_broker_bounce}` (module doc)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.bounces: list[dict] = []

    def run(self) -> list[Check]:
        a = self.app
        self.classpath = resolve_streams_tests(DEFAULT_KAFKA_VERSION)
        nodes = self.case.topology.nodes
        configs = {"min.insync.replicas": "2" if nodes >= 3 else "1"}
        self.target.create_topics([TopicSpec(name=t, partitions=PARTITIONS, replication_factor=min(nodes, 3),
                                             configs=dict(configs)) for t in TOPICS])
        checks: list[Check] = []
        processor = self._start("processor1", "process")
        entry: dict[str, Any] = {"name": processor.name}
        running = processor.wait_for(RUNNING, FIRST_RUNNING_S)
        entry["running_at_s"] = self.elapsed() if running is not None else None
        driver = self._start("driver", "run") if running is not None else None
        processed = processor.wait_for(PROCESSED, PROCESSED_S, since=running) if driver is not None else None
        entry["processed_at_s"] = self.elapsed() if processed is not None else None
        checks.append(Check("processor_ran", processed is not None,
                            "the processor reached RUNNING and processed records" if processed is not None else
                            f"no '{RUNNING if running is None else PROCESSED}' from the processor in "
                            f"{FIRST_RUNNING_S if running is None else PROCESSED_S} s"))
        if processed is None:
            self.summary = {"application": a.kind, "processors": [entry]}
            return checks
        self._phase("bounces")
        if driver.wait_for(VERIFYING, a.bounce_after_s) is None:
            # landed: the driver still writing (not yet verifying)
            self.bounces = self.chase_leader(CHASED, 0, a.bounces, a.failure_mode,
                                             lambda: driver.running() and driver.wait_for(VERIFYING, 0) is None)
        check, landed = self.chase_landed(self.bounces, CHASED, "the driver was generating")
        checks.append(check)
        rc = driver.wait(DRIVER_TIMEOUT_S)
        self._phase("driver ended", exit=rc)
        ok, why = driver_verdict(driver.lines, a.processing_guarantee, crash=True)
        checks.append(Check("verified", ok and rc == 0, f"{why}; driver exit {rc}"))
        alive = processor.running()
        entry["exit"] = processor.signal(clean=True)
        failed = [x for x in processor.lines if EXCEPTION in x]
        closed = any(CLOSED in x for x in processor.lines)
        checks.append(Check("processor_survived", alive and closed and not failed,
                            f"the processor ran until the driver ended: {alive}; closed by itself ({CLOSED}): "
                            f"{closed}" + (f"; {failed[:3]}" if failed else "")))
        self.summary = {
            "application": a.kind, "processing_guarantee": a.processing_guarantee, "failure_mode": a.failure_mode,
            "nodes": nodes, "program": f"kafka-streams {DEFAULT_KAFKA_VERSION} (test jar)",
            "driver_result": driver_result(driver.lines), "driver_s": self.elapsed(), "processors": [entry],
            "bounces": self.bounces, "bounces_landed": landed,
            "driver_failures": [x for x in driver.lines if any(w in x for w in FAILURE_WORDS)][:20],
        }
        return checks
