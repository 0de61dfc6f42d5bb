"""Kafka Connect's exactly-once source support (KIP-618) as a row: a distributed Connect worker
with `exactly.once.source.support=enabled` runs Kafka's own FileStreamSourceConnector
(org.apache.kafka:connect-file, which declares exactly-once support for a file) with
`exactly.once.support: required`, and is killed (SIGKILL) and started again while it copies.

What happens, and why it tests the broker:
- the worker (org.apache.kafka.connect.cli.ConnectDistributed, connect-runtime of the release)
  creates its config, offset and status topics (compacted), joins its group, and on
  `PUT /connectors/<name>/config` its leader fences the task's earlier producers (the
  FenceProducers API), then the task writes each poll's records and the source offsets (the
  file position) in one transaction (`transaction.boundary: poll`);
- a writer appends `lines` integers to the input file over `write_s` seconds, so the copy is
  still going when the worker dies;
- each time a read_committed reader of the output has seen another `kill_every` records, the
  worker is killed (SIGKILL: no commit, no fencing of its own) and started again with the same
  configuration: it finds the connector in its config topic and the task resumes from the last
  committed position -- whatever the killed task wrote after that is in an aborted transaction
  or was never written;
- with `bounce_target: brokers`, while the copy goes the leader of the output's partition is
  chased `bounces` times as streams_broker_bounce_test.py chases one (found, stopped or killed,
  started again, its ISR whole before the next): the task's transactions, their markers and the
  offsets topic's writes meet leader changes;
- verdict: once the writer is done, a read_committed reader of the whole output must see every
  line exactly once, in file order (one task, one partition), and every kill and bounce must
  have landed while the copy was going.

The topics and the group carry the row's namespace; the connector's transactional ids derive
from the group (`<group>-<connector>-<task>`).
"""
from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from conformance.targets.maven import DEFAULT_KAFKA_VERSION, resolve_connect, resolve_kafka_tools
from conformance.targets.process import free_ports

from ..results import Check
from .base import BOUNCE_BUDGET_S, ApplicationRun
from .tools import Tool, wire_summary

MAIN = "org.apache.kafka.connect.cli.ConnectDistributed"
CONNECTOR = "file-source"
GROUP, OUTPUT = "connect-cluster", "connect-output"
CONFIGS, OFFSETS, STATUS = "connect-configs", "connect-offsets", "connect-status"
#: A worker's start (its REST server answering), and the copy's progress between kills.
START_TIMEOUT_S, PROGRESS_TIMEOUT_S = 120.0, 90.0
#: After the writer is done: how long the output may take to hold every line.
DRAIN_TIMEOUT_S = 120.0
#: The task producers' transaction timeout. A worker killed inside a task's transaction leaves it
#: open; the restarted worker reads its offsets topic to the end (the end offset from its admin
#: client, read_committed by its consumer) before its task can fence the old producer, so it waits
#: for the coordinator to abort that transaction on timeout -- measured with Kafka 4.3.1 and the
#: embedded broker alike: the default 60 s, once per kill that landed inside a transaction.
TASK_TRANSACTION_TIMEOUT_MS = 10_000


def worker_properties(bootstrap: str, ns_name, nodes: int, rest_port: int) -> str:
    """A distributed worker with exactly-once source support, its internal topics in the row's
    namespace, tasks handed over at once when a worker leaves (scheduled.rebalance.max.delay.ms 0:
    the restarted worker is the only one), task transactions timing out in 10 s (a killed task's
    open transaction stalls the restart until then)."""
    rf = min(nodes, 3)
    props = {"bootstrap.servers": bootstrap, "group.id": ns_name(GROUP),
             "key.converter": "org.apache.kafka.connect.storage.StringConverter",
             "value.converter": "org.apache.kafka.connect.storage.StringConverter",
             "config.storage.topic": ns_name(CONFIGS), "offset.storage.topic": ns_name(OFFSETS),
             "status.storage.topic": ns_name(STATUS), "config.storage.replication.factor": rf,
             "offset.storage.replication.factor": rf, "status.storage.replication.factor": rf,
             "offset.storage.partitions": 5, "status.storage.partitions": 1,
             "exactly.once.source.support": "enabled", "scheduled.rebalance.max.delay.ms": 0,
             "offset.flush.interval.ms": 1000, "producer.transaction.timeout.ms": TASK_TRANSACTION_TIMEOUT_MS,
             "listeners": f"http://127.0.0.1:{rest_port}",
             "rest.advertised.host.name": "127.0.0.1", "rest.advertised.port": rest_port}
    return "".join(f"{k}={v}\n" for k, v in props.items())


def connector_config(input_file: Path, topic: str) -> dict[str, str]:
    return {"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "tasks.max": "1",
            "file": str(input_file), "topic": topic, "exactly.once.support": "required",
            "transaction.boundary": "poll", "batch.size": "200"}


class ConnectEosRun(ApplicationRun):
    """The row's play for `application: {kind: connect_eos_source}` (module doc)."""

    program = f"connect-runtime {DEFAULT_KAFKA_VERSION}, connect-file {DEFAULT_KAFKA_VERSION}"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.worker: Tool | None = None
        self.rest_port = 0
        self.kills: list[dict] = []
        self.bounces: list[dict] = []
        self.worker_starts = 0
        self.writer_done = threading.Event()
        self.written = 0
        self.tools_classpath = ""

    # ----------------------------------------------------------------- the worker
    def _start_worker(self) -> bool:
        self.worker_starts += 1
        self.worker = Tool(self.classpath, MAIN, [str(self.art / "worker.properties")], self.art, "worker",
                           keep_lines=False)
        self._phase("worker started", start=self.worker_starts)
        end = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < end and self.worker.running():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.rest_port}/", timeout=2):
                    return True
            except (urllib.error.URLError, OSError):
                time.sleep(0.3)
        return False

    def _put_connector(self, config: dict[str, str]) -> int:
        req = urllib.request.Request(f"http://127.0.0.1:{self.rest_port}/connectors/{CONNECTOR}/config",
                                     data=json.dumps(config).encode(), method="PUT",
                                     headers={"Content-Type": "application/json"})
        end = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(req, timeout=30) as resp:
                    return resp.status
            except urllib.error.HTTPError as exc:
                # 409: the worker is still joining its group or rebalancing -- ask again
                if exc.code != 409 or time.monotonic() > end:
                    return exc.code
            except (urllib.error.URLError, OSError):
                if time.monotonic() > end:
                    return 0
            time.sleep(0.5)

    def _write(self, path: Path, lines: int, seconds: float) -> None:
        """The input: the integers 0..lines-1, appended in small chunks over `seconds`."""
        chunks = 50
        per = max(1, lines // chunks)
        with open(path, "a") as f:
            for start in range(0, lines, per):
                f.write("".join(f"{i}\n" for i in range(start, min(lines, start + per))))
                f.flush()
                self.written = min(lines, start + per)
                time.sleep(seconds / chunks)
        self.writer_done.set()

    # ----------------------------------------------------------------- the run
    def run(self) -> list[Check]:
        a = self.app
        self.classpath = resolve_connect(DEFAULT_KAFKA_VERSION)
        self.tools_classpath = resolve_kafka_tools(DEFAULT_KAFKA_VERSION)
        checks: list[Check] = []
        (self.rest_port,) = free_ports(1)
        (self.art / "worker.properties").write_text(
            worker_properties(self.bootstrap, self.ns.name, self.case.topology.nodes, self.rest_port))
        input_file = self.art / "input.txt"
        input_file.write_text("")
        started = self._start_worker()
        status = self._put_connector(connector_config(input_file, self.ns.name(OUTPUT))) if started else None
        checks.append(Check("connector_created", started and status in (200, 201),
                            f"worker answering: {started}; PUT /connectors/{CONNECTOR}/config: {status}"))
        if not checks[-1].passed:
            self.summary = {"application": a.kind, "worker_starts": self.worker_starts}
            return checks
        writer = threading.Thread(target=self._write, args=(input_file, a.lines, a.write_s), daemon=True,
                                  name="connect-input")
        copy_t0 = self.elapsed()
        writer.start()
        concurrent = self.reader(self.tools_classpath, OUTPUT, "concurrent_reader", DRAIN_TIMEOUT_S)
        bouncer = None
        if a.bounce_target == "brokers":
            # landed: the output did not hold every line yet
            bouncer = threading.Thread(
                target=lambda: self.bounces.extend(self.chase_leader(
                    self.ns.name(OUTPUT), 0, a.bounces, a.failure_mode,
                    lambda: concurrent.count < a.lines)), daemon=True, name="connect-bounces")
            bouncer.start()
        for n in range(a.kills):
            target = (n + 1) * a.kill_every
            end = time.monotonic() + PROGRESS_TIMEOUT_S
            while concurrent.count < target and time.monotonic() < end and concurrent.running():
                time.sleep(0.05)
            at, seen = self.elapsed(), concurrent.count
            # landed: the output did not hold every line yet (the task still had some to copy)
            entry = {"kill": n + 1, "at_s": at, "output_seen": seen, "written": self.written,
                     "writing": not self.writer_done.is_set(), "landed": target <= seen < a.lines}
            if seen < target:
                entry["skipped"] = f"the output did not reach {target} records in {PROGRESS_TIMEOUT_S} s"
                self.kills.append(entry)
                continue
            entry["exit"] = self.worker.signal(clean=False)
            self.fault_events.append({"fault": "SIGKILL worker", "at_s": at})
            entry["back"] = self._start_worker()
            entry["back_after_s"] = round(self.elapsed() - at, 2)
            self.kills.append(entry)
        writer.join(a.write_s + 60)
        if bouncer is not None:
            bouncer.join(a.bounces * BOUNCE_BUDGET_S)
        copy_s = round(self.elapsed() - copy_t0, 2)
        self._phase("verify")
        inputs = list(range(a.lines))
        concurrent_vals = self.drain(concurrent, a.lines, DRAIN_TIMEOUT_S)
        final = self.reader(self.tools_classpath, OUTPUT, "verifying_reader", DRAIN_TIMEOUT_S)
        final_vals = self.drain(final, a.lines, DRAIN_TIMEOUT_S)
        checks += self.read_checks("output", inputs, final_vals)
        checks += self.read_checks("concurrent", inputs, concurrent_vals)
        landed = sum(1 for k in self.kills if k.get("landed"))
        if a.kills:
            checks.append(Check("kills_landed", landed == a.kills and all(k.get("back") for k in self.kills),
                                f"{landed} of {a.kills} worker kills landed while the copy was going, "
                                f"{sum(1 for k in self.kills if k.get('back'))} restarts answered"))
        check, bounced = self.chase_landed(self.bounces, OUTPUT, "the copy was going")
        if a.bounce_target == "brokers":
            checks.append(check)
        self.summary.update({"application": a.kind, "nodes": self.case.topology.nodes,
                             "program": self.program,
                             "lines": a.lines, "write_s": a.write_s, "copy_s": copy_s,
                             "worker_starts": self.worker_starts, "kills": self.kills, "kills_landed": landed,
                             "bounces": self.bounces, "bounces_landed": bounced})
        return checks

    def wire(self, lines: list[dict] | None) -> dict:
        """Error codes per API that crossed the proxy, and what the worker's own log named."""
        return wire_summary(lines, [self.art / "worker.stderr"])

    def live_tools(self) -> list[Tool]:
        return self.tools + ([self.worker] if self.worker is not None else [])

