"""A Flink job with exactly-once Kafka delivery as a row: KafkaSource (read_committed) -> KafkaSink
with DeliveryGuarantee.EXACTLY_ONCE in Flink's own MiniCluster (flink-streaming-java 2.2.1,
flink-connector-kafka 5.0.0-2.2), the job of `conformance/apps/flink/` built by Maven on first use.

Flink's two-phase commit over Kafka transactions: at each checkpoint the sink pre-commits (flushes
its open transaction and keeps its producer id and epoch in the checkpoint); when the checkpoint
completes it commits. A restored job commits what its checkpoint pre-committed (resuming the
transaction by producer id and epoch) and aborts the transactions of its prefix that the
checkpoint does not know (lingering ones). What the row does:
- VerifiableProducer seeds the input with the integers 0..records-1 (idempotent, acks=all);
- the job starts; after a third of the records its map fails once (a task failure): Flink's
  restart strategy restores the tasks from the last completed checkpoint in the same job;
- once two thirds of the records reached the output (read_committed), the job's JVM is killed
  (SIGKILL): no final checkpoint, a transaction left open;
- the job starts again from the last checkpoint it retained, and copies the rest;
- verdict: a read_committed reader of the whole output sees every input value exactly once, in
  input order (one partition, parallelism 1), and so did the reader that followed the copy.

With `bounce_target: brokers` the job runs once, without the task failure or the kill: while it
copies, the leader of the output's partition is chased `bounces` times (ApplicationRun.chase_leader,
as streams_broker_bounce_test.py chases one), so the sink's open transactions, its pre-commits and
its commits meet leader changes and coordinator restarts; the job must end by itself having copied
every record exactly once, in order. Flink's own recoveries (a task switched to FAILED and restarted
from its last checkpoint) are counted from its log, not judged: a sink that gives up on a retriable
answer shows there, side by side with Kafka's row.

Whether the restored job then ends by itself is recorded, not judged: with Kafka 4.3.1 and the
embedded broker alike, its committer's commit of the transaction the checkpoint pre-committed is
answered PRODUCER_FENCED (transactions v2 bumped the producer epoch when that transaction was
first committed, before the kill) and the bounded job did not end within minutes; the row stops
it after ENDING_S.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path

from conformance import buildcache
from conformance.targets.maven import DEFAULT_KAFKA_VERSION, resolve_kafka_tools

from ..results import Check
from .base import BOUNCE_BUDGET_S, ApplicationRun
from .tools import SEED_PRODUCER_PROPERTIES, Tool, wire_summary
from .verify import acked_values

SOURCE = Path(__file__).resolve().parent / "flink"
BUILD = buildcache.maven("flink-job", SOURCE)


def _pinned(prop: str) -> str:
    """A version the job's pom pins (its one source: the pom builds what runs)."""
    match = re.search(rf"<{re.escape(prop)}>([^<]+)</{re.escape(prop)}>", (SOURCE / "pom.xml").read_text())
    return match.group(1) if match else "?"


#: What the row's client_version says: Flink and its Kafka connector, as the pom pins them.
PROGRAM = f"flink {_pinned('flink.version')}, flink-connector-kafka {_pinned('flink.kafka.version')}"
MAIN = "kconform.flink.ExactlyOnceCopy"
INPUT, OUTPUT, GROUP, PREFIX = "flink-input", "flink-output", "flink-source", "flink-eos"
#: What Flink's own launch scripts open to it on Java 17 (its env.java.opts.all default).
JAVA17_OPTIONS = tuple(
    [f"--add-exports=java.base/{p}=ALL-UNNAMED" for p in ("sun.net.util",)]
    + [f"--add-exports={p}=ALL-UNNAMED" for p in ("java.rmi/sun.rmi.registry", "jdk.compiler/com.sun.tools.javac.api",
                                                  "jdk.compiler/com.sun.tools.javac.file",
                                                  "jdk.compiler/com.sun.tools.javac.parser",
                                                  "jdk.compiler/com.sun.tools.javac.tree",
                                                  "jdk.compiler/com.sun.tools.javac.util", "java.security.jgss/sun.security.krb5")]
    + [f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in (
        "java.lang", "java.net", "java.io", "java.nio", "sun.nio.ch", "java.lang.reflect", "java.text", "java.time",
        "java.util", "java.util.concurrent", "java.util.concurrent.atomic", "java.util.concurrent.locks")])
SEED_TIMEOUT_S, STEP_TIMEOUT_S, FINISH_TIMEOUT_S, DRAIN_TIMEOUT_S = 300.0, 120.0, 180.0, 90.0
#: How long a restored job that copied everything is given to end by itself.
ENDING_S = 20.0
#: Flink's log line when a task fails (it is then restarted from the last checkpoint).
TASK_FAILED = re.compile(r"switched from RUNNING to FAILED")


def classpath() -> str:
    """The job's classes and its runtime dependencies (built once per source, in the cache)."""
    target = BUILD.ensure() / "target"
    return os.pathsep.join([str(target / "classes"), str(target / "lib" / "*")])


def latest_checkpoint(root: Path) -> Path | None:
    """The newest complete checkpoint under Flink's checkpoint directory (`<job id>/chk-<n>` with
    its `_metadata`), or None."""
    found = [(int(p.parent.name.split("-", 1)[1]), p.parent) for p in root.glob("*/chk-*/_metadata")
             if p.parent.name.split("-", 1)[1].isdigit()]
    return max(found)[1] if found else None


def task_failures(log: Path) -> int:
    """How many times Flink failed the job's task and restarted it from the last checkpoint (its
    log's "switched from RUNNING to FAILED" lines; 0 without a log)."""
    try:
        return len(TASK_FAILED.findall(log.read_text(errors="replace")))
    except OSError:
        return 0


class FlinkEosRun(ApplicationRun):
    """The row's play for `application: {kind: flink_eos}` (module doc)."""

    program = PROGRAM

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.job: Tool | None = None
        self.job_starts = 0
        #: Flink's retained checkpoints: state of a small job, not evidence; removed at close()
        self.checkpoints = Path(tempfile.mkdtemp(prefix="kconform-flink-checkpoints-"))

    def _start_job(self, restore: Path | None, fail_after: int | None = None) -> Tool:
        """The job (its map fails once after `fail_after` records, a third by default; 0: never)."""
        a = self.app
        self.job_starts += 1
        fail_after = a.records // 3 if fail_after is None else fail_after
        args = [self.bootstrap, self.ns.name(INPUT), self.ns.name(OUTPUT), self.ns.name(GROUP), self.ns.name(PREFIX),
                str(self.checkpoints), str(fail_after), str(self.art / "task-failed.marker"),
                str(a.record_delay_ms)] + ([str(restore)] if restore else [])
        self.job = Tool(self.classpath, MAIN, args, self.art, "job", heap="1g", jvm_args=JAVA17_OPTIONS)
        self._phase("job started", start=self.job_starts, restore=str(restore) if restore else None)
        return self.job

    def run(self) -> list[Check]:
        a = self.app
        self.classpath = classpath()
        tools_cp = resolve_kafka_tools(DEFAULT_KAFKA_VERSION)
        checks: list[Check] = []
        (self.art / "producer.properties").write_text(SEED_PRODUCER_PROPERTIES)
        seed = self.tool(tools_cp, "VerifiableProducer",
                         ["--bootstrap-server", self.bootstrap, "--topic", self.ns.name(INPUT), "--max-messages",
                          str(a.records), "--command-config", str(self.art / "producer.properties")], "seed")
        rc = seed.wait(SEED_TIMEOUT_S)
        inputs = acked_values(seed.lines)
        checks.append(Check("seeded", rc == 0 and len(inputs) == a.records,
                            f"VerifiableProducer exit {rc}, {len(inputs)} of {a.records} acked"))
        if len(inputs) != a.records:
            self.summary = {"application": a.kind, "input": len(inputs)}
            return checks
        if a.bounce_target == "brokers":
            return checks + self._run_bounced(tools_cp, inputs)
        copy_t0 = self.elapsed()
        job = self._start_job(None)
        concurrent = self.reader(tools_cp, OUTPUT, "concurrent_reader", DRAIN_TIMEOUT_S)
        failed = job.wait_for('"task_failure"', STEP_TIMEOUT_S)
        failed_at = self.elapsed() if failed is not None else None
        if failed is not None:
            self.fault_events.append({"fault": "task failure (the map throws once)", "at_s": failed_at})
        kill_target = 2 * a.records // 3
        end = time.monotonic() + STEP_TIMEOUT_S
        while concurrent.count < kill_target and job.running() and time.monotonic() < end:
            time.sleep(0.05)
        seen, at = concurrent.count, self.elapsed()
        kill = {"at_s": at, "output_seen": seen, "landed": job.running() and kill_target <= seen < a.records}
        if job.running():
            kill["exit"] = job.signal(clean=False)
            self.fault_events.append({"fault": "SIGKILL job", "at_s": at})
        restore = latest_checkpoint(self.checkpoints)
        kill["restore_from"] = restore.name if restore else None
        job = self._start_job(restore)
        end = time.monotonic() + FINISH_TIMEOUT_S
        while concurrent.count < a.records and job.running() and time.monotonic() < end:
            time.sleep(0.1)
        copied = concurrent.count >= a.records
        copy_s = round(self.elapsed() - copy_t0, 2)
        # measured on Kafka 4.3.1 and the embedded broker alike: the restored job copies the rest,
        # but its committer's commit of the checkpoint's transaction is answered PRODUCER_FENCED
        # (transactions v2 bumped the epoch when it was first committed) and the job does not end
        # by itself -- so the row waits ENDING_S for it, then stops it and says which it was
        finished = job.wait_for('"job_finished"', ENDING_S) if copied else None
        rc = job.wait(10) if finished is not None else job.signal(clean=True, timeout=30)
        checks.append(Check("task_failure_recovered", failed is not None,
                            f"the map failed once after {a.records // 3} records at {failed_at} s, and Flink "
                            "restarted the task from its last checkpoint" if failed is not None else
                            f"no task failure in {STEP_TIMEOUT_S} s (the job printed no task_failure)"))
        checks.append(Check("kill_landed", bool(kill["landed"]) and restore is not None,
                            f"the job was killed at {at} s with {seen} of {a.records} records in the output, and "
                            f"started again from checkpoint {kill['restore_from']}"))
        checks.append(Check("restored_job_copied", copied,
                            f"the job restored from its checkpoint copied the rest: the output held "
                            f"{concurrent.count} of {a.records} records {copy_s} s after the first start"))
        self._phase("verify")
        final = self.reader(tools_cp, OUTPUT, "verifying_reader", DRAIN_TIMEOUT_S)
        checks += self.read_checks("concurrent", inputs, self.drain(concurrent, a.records, DRAIN_TIMEOUT_S))
        checks += self.read_checks("output", inputs, self.drain(final, a.records, DRAIN_TIMEOUT_S))
        self.summary.update({"application": a.kind, "nodes": self.case.topology.nodes,
                             "program": PROGRAM, "records": a.records,
                             "copy_s": copy_s, "task_failure_at_s": failed_at, "kill": kill,
                             "job_starts": self.job_starts, "job_ended_by_itself": finished is not None,
                             "job_exit": rc})
        return checks

    def _run_bounced(self, tools_cp: str, inputs: list[int]) -> list[Check]:
        """The job once, no task failure, no kill, while the output's leader is chased (module doc)."""
        a = self.app
        copy_t0 = self.elapsed()
        job = self._start_job(None, fail_after=0)
        concurrent = self.reader(tools_cp, OUTPUT, "concurrent_reader", DRAIN_TIMEOUT_S)
        bounces: list[dict] = []
        # the first bounce once the first checkpoint's transaction is committed: the sink is at work
        end = time.monotonic() + STEP_TIMEOUT_S
        while concurrent.count == 0 and job.running() and time.monotonic() < end:
            time.sleep(0.05)
        self._phase("bounces")
        bouncer = threading.Thread(
            target=lambda: bounces.extend(self.chase_leader(self.ns.name(OUTPUT), 0, a.bounces, a.failure_mode,
                                                            lambda: concurrent.count < a.records)),
            daemon=True, name="flink-bounces")
        bouncer.start()
        end = time.monotonic() + FINISH_TIMEOUT_S + a.bounces * BOUNCE_BUDGET_S
        while concurrent.count < a.records and job.running() and time.monotonic() < end:
            time.sleep(0.1)
        copied = concurrent.count >= a.records
        copy_s = round(self.elapsed() - copy_t0, 2)
        bouncer.join(a.bounces * BOUNCE_BUDGET_S)
        finished = job.wait_for('"job_finished"', ENDING_S) if copied else None
        rc = job.wait(10) if finished is not None else job.signal(clean=True, timeout=30)
        check, landed = self.chase_landed(bounces, OUTPUT, "the job was copying")
        checks = [
            check,
            Check("job_copied", copied,
                  f"the output held {concurrent.count} of {a.records} records {copy_s} s after the job started"),
            Check("job_ended", finished is not None,
                  "the job ended by itself" if finished is not None else
                  f"the job did not end within {ENDING_S} s of copying everything (stopped; exit {rc})")]
        self._phase("verify")
        final = self.reader(tools_cp, OUTPUT, "verifying_reader", DRAIN_TIMEOUT_S)
        checks += self.read_checks("concurrent", inputs, self.drain(concurrent, a.records, DRAIN_TIMEOUT_S))
        checks += self.read_checks("output", inputs, self.drain(final, a.records, DRAIN_TIMEOUT_S))
        self.summary.update({"application": a.kind, "nodes": self.case.topology.nodes, "program": PROGRAM,
                             "records": a.records, "copy_s": copy_s, "bounces": bounces, "bounces_landed": landed,
                             "task_failures": task_failures(self.art / "job.stderr"), "job_ended_by_itself": finished is not None,
                             "job_exit": rc})
        return checks

    def wire(self, lines: list[dict] | None) -> dict:
        """Error codes per API that crossed the proxy, and what the job's own log named."""
        return wire_summary(lines, [self.art / "job.stderr", self.art / "seed.stderr"])

    def live_tools(self) -> list[Tool]:
        return self.tools + ([self.job] if self.job is not None else [])

    def close(self) -> None:
        super().close()
        shutil.rmtree(self.checkpoints, ignore_errors=True)
