"""Kafka's transactions system test as a row: tests/kafkatest/tests/core/transactions_test.py.

What the test does, and what this module does the same way:
- topics `input-topic` (2 partitions) and `output-topic` (3), replication 3, min.insync.replicas
  2 (here: replication min(nodes, 3), min ISR 2 on 3+ nodes, else 1); with `check_order` one
  partition each and a third of the messages;
- VerifiableProducer (idempotent, acks=all) seeds the input with the integers 0..N-1; the acked
  values are the input;
- one TransactionalMessageCopier per input partition (transactional id `copier-<i>`, group
  `transactions-test-consumer-group`, transactions of 750 records, timeout 40 s, random aborts,
  `--use-group-metadata` per cell) copies it to the output; a read_committed ConsoleConsumer
  (group `concurrent_consumer`) reads the output meanwhile;
- bounces: `brokers` -- each broker in turn stopped cleanly (SIGTERM) or killed (SIGKILL), started
  again, then every partition's ISR whole again before the next (await_no_under_replicated_
  partitions); `clients` -- three rounds over the copiers, each copier restarted (SIGTERM or
  SIGKILL) once it copied 20 % of what it had left since its last start;
- once every copier copied its whole partition (`remaining` 0 at its ShutdownComplete), the
  concurrent consumer is drained and a second read_committed ConsoleConsumer (group
  `verifying_consumer`) reads the output from the beginning;
- verdict: both reads hold every input value exactly once (0 duplicates, 0 losses, nothing that
  is not an input value); with `check_order` the input was acked in order and both reads are
  the input in order.

One difference, on purpose: ducktape leaves a hard-killed broker down for 23 s (the broker
session timeout and a grace) and starts bouncing at once, so on a fast cluster the copy (100k
messages in under 30 s) is over before the second broker goes down. Here a broker stays down
`down_s` (default 3 s) and every bounce records whether it landed while a copier was still
copying (`landed`); the row's check `bounces_landed` holds when every one did.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

from conformance.targets import Target
from conformance.targets.maven import DEFAULT_KAFKA_VERSION, resolve_kafka_tools

from ..dsl.model import Case
from ..results import Check
from .base import ApplicationRun, Namespace
from .tools import SEED_PRODUCER_PROPERTIES, Tool, wire_summary
from .verify import acked_values, compare


INPUT, OUTPUT = "input-topic", "output-topic"
GROUP = "transactions-test-consumer-group"
#: ducktape's timeouts: a copier's progress between client bounces, the consumers' drain.
PROGRESS_TIMEOUT_S = 60.0
DRAIN_TIMEOUT_S = 90.0
FINISHED = "copier already finished"
SEED_TIMEOUT_S = 600.0


# ============================================================================ the run
class Copier:
    """One TransactionalMessageCopier, restarted in place by a client bounce."""

    def __init__(self, run: "TransactionsTestRun", index: int) -> None:
        self.run, self.index = run, index
        self.name = f"copier-{index}"
        self.tool: Tool | None = None
        self.starts = 0
        self.exits: list[int | None] = []
        self.finished = threading.Event()
        self.finished_at: float | None = None

    def args(self) -> list[str]:
        a, ns = self.run.app, self.run.ns
        args = ["--broker-list", self.run.bootstrap, "--transactional-id", ns.name(self.name),
                "--consumer-group", ns.name(GROUP), "--input-topic", ns.name(INPUT), "--output-topic",
                ns.name(OUTPUT), "--input-partition", str(self.index), "--transaction-size", str(a.transaction_size),
                "--transaction-timeout", str(a.transaction_timeout_ms), "--enable-random-aborts"]
        return args + (["--use-group-metadata"] if a.use_group_metadata else [])

    def start(self) -> None:
        self.starts += 1
        self.tool = Tool(self.run.classpath, "TransactionalMessageCopier", self.args(), self.run.art, self.name,
                         keep_lines=False, on_line=self._status)

    def _status(self, tool: Tool, status: dict) -> None:
        # ducktape's copier service: finished only when ShutdownComplete says 0 remaining
        if status.get("stage") == "ShutdownComplete" and status.get("remaining") == 0 and tool is self.tool:
            self.finished_at = self.run.elapsed()
            self.finished.set()

    def progress_percent(self) -> float:
        s = self.tool.status if self.tool else {}
        consumed, remaining = s.get("consumed", -1), s.get("remaining", -1)
        if remaining is None or remaining < 0 or consumed < 0:
            return 0.0
        return 100.0 if consumed + remaining == 0 else 100.0 * consumed / (consumed + remaining)

    def restart(self, clean: bool) -> None:
        self.exits.append(self.tool.signal(clean))
        self.start()

    def summary(self) -> dict:
        return {"starts": self.starts, "exits": self.exits, "finished_at_s": self.finished_at,
                "last": self.tool.status if self.tool else None}


class TransactionsTestRun(ApplicationRun):
    """The row's play for `application: {kind: transactions_test}` (module doc); the same place in
    a row as CaseRun and WorkloadRun (runner/row.py). Its topics and groups carry the row's
    namespace: the instance may serve later rows."""

    program = f"kafka-tools {DEFAULT_KAFKA_VERSION}"

    def __init__(self, case: Case, target: Target, bootstrap: str, ns: Namespace, artifacts: Path,
                 proxy=None) -> None:
        super().__init__(case, target, bootstrap, ns, artifacts, proxy)
        self.copiers: list[Copier] = []
        self.bounces: list[dict] = []

    def _consumer(self, group: str) -> Tool:
        return self.reader(self.classpath, OUTPUT, group, DRAIN_TIMEOUT_S)

    def copying(self) -> list[str]:
        return [c.name for c in self.copiers if not c.finished.is_set()]

    # ----------------------------------------------------------------- phases
    def run(self) -> list[Check]:
        a = self.app
        self.classpath = resolve_kafka_tools(DEFAULT_KAFKA_VERSION)
        checks: list[Check] = []
        (self.art / "producer.properties").write_text(SEED_PRODUCER_PROPERTIES)
        self._phase("seed")
        seed = self.tool(self.classpath, "VerifiableProducer",
                         ["--bootstrap-server", self.bootstrap, "--topic", self.ns.name(INPUT), "--max-messages",
                          str(a.messages), "--command-config", str(self.art / "producer.properties")], "seed")
        rc = seed.wait(SEED_TIMEOUT_S)
        inputs = acked_values(seed.lines)
        seed_s = self.elapsed()
        checks.append(Check("seeded", rc == 0 and len(inputs) == a.messages,
                            f"VerifiableProducer exit {rc}, {len(inputs)} of {a.messages} acked"))
        if len(inputs) != a.messages:
            self.summary = {"seed_s": seed_s, "input": len(inputs)}
            return checks
        self._phase("copy")
        copy_t0 = self.elapsed()
        self.copiers = [Copier(self, i) for i in range(a.input_partitions)]
        for c in self.copiers:
            c.start()
        concurrent = self._consumer("concurrent_consumer")
        if a.bounce_target == "brokers":
            time.sleep(a.bounce_after_s)
            self.bounce_brokers(clean=a.failure_mode == "clean_bounce")
        elif a.bounce_target == "clients":
            self.bounce_copiers(clean=a.failure_mode == "clean_bounce")
        deadline = time.monotonic() + a.copy_timeout_s
        for c in self.copiers:
            c.finished.wait(max(0.0, deadline - time.monotonic()))
        copy_s = round(self.elapsed() - copy_t0, 2)
        unfinished = self.copying()
        checks.append(Check("copiers_finished", not unfinished,
                            f"every copier copied its partition in {copy_s} s" if not unfinished else
                            f"{unfinished} not done after {a.copy_timeout_s} s: "
                            + "; ".join(f"{c.name} {c.tool.status}" for c in self.copiers if c.name in unfinished)))
        self._phase("verify")
        concurrent_vals = self.drain(concurrent, len(inputs), DRAIN_TIMEOUT_S)
        final = self._consumer("verifying_consumer")
        final_vals = self.drain(final, len(inputs), DRAIN_TIMEOUT_S)
        verify_s = round(self.elapsed() - copy_s - copy_t0, 2)
        out = compare(inputs, final_vals[0], a.check_order)
        out["not_integer"] = final_vals[1]
        conc = compare(inputs, concurrent_vals[0], a.check_order)
        conc["not_integer"] = concurrent_vals[1]
        for label, r in (("output", out), ("concurrent", conc)):
            prefix = "" if label == "output" else "concurrent_"
            checks.append(Check(f"{prefix}no_duplicates", r["duplicates"] == 0,
                                f"{label}: {r['duplicates']} duplicates in {r['read']} read_committed records"))
            checks.append(Check(f"{prefix}no_losses", r["losses"] == 0 and r["unexpected"] == 0 and r["not_integer"] == 0,
                                f"{label}: {r['losses']} of {len(inputs)} input values never read, {r['unexpected']} "
                                f"values read that were never input, {r['not_integer']} lines not a value"))
        if a.check_order:
            checks.append(Check("order", inputs == sorted(inputs) and out["in_order"] and conc["in_order"],
                                f"input acked in order: {inputs == sorted(inputs)}; output in input order: "
                                f"{out['in_order']} (first difference at {out['first_out_of_order']}); concurrent: "
                                f"{conc['in_order']} (at {conc['first_out_of_order']})"))
        # a copier that finished is not restarted (ducktape's restart() returns): not a bounce
        done = [b for b in self.bounces if b.get("skipped") != FINISHED]
        landed = sum(1 for b in done if b.get("landed"))
        if a.bounce_target != "none":
            checks.append(Check("bounces_landed", bool(done) and landed == len(done),
                                f"{landed} of {len(done)} bounces landed while copiers were copying"
                                + "".join(f"; {b.get('copier', b.get('node'))}: {b['skipped']}"
                                          for b in done if b.get("skipped"))))
        self.summary = {
            "application": a.kind, "bounce_target": a.bounce_target, "failure_mode": a.failure_mode,
            "use_group_metadata": a.use_group_metadata, "check_order": a.check_order,
            "messages": a.messages, "nodes": self.case.topology.nodes, "tools": f"kafka-tools {DEFAULT_KAFKA_VERSION}",
            "seed_s": seed_s, "copy_s": copy_s, "verify_s": verify_s,
            "output": out, "concurrent": conc,
            "bounces": self.bounces, "bounces_landed": landed, "bounces_done": len(done),
            "copiers": {c.name: c.summary() for c in self.copiers},
        }
        return checks

    # ----------------------------------------------------------------- bounces
    def bounce_brokers(self, clean: bool) -> None:
        """Each broker in turn: stopped (SIGTERM) or killed, `down_s` later started again, then
        the ISR of every partition whole before the next (transactions_test.bounce_brokers)."""
        partitions = [(self.ns.name(x.name), p, x.replication_factor)
                      for x in self.case.topology.topics for p in range(x.partitions)]
        for node in self.target.node_ids():
            working = self.copying()
            entry = self.bounce_node(node, clean)
            entry.update({"isr_full_after_s": self.isr_full(partitions), "copying_at_bounce": working,
                          "copying_when_back": self.copying(), "landed": bool(working)})
            self.bounces.append(entry)

    def bounce_copiers(self, clean: bool) -> None:
        """Three rounds; in each, every copier restarted once it copied `progress_percent` of what
        it had left at its last start (transactions_test.bounce_copiers; a finished copier is
        not restarted: ducktape's restart() returns then)."""
        a = self.app
        for rnd in range(a.bounce_rounds):
            for c in self.copiers:
                end = time.monotonic() + PROGRESS_TIMEOUT_S
                while (c.progress_percent() < a.progress_percent and not c.finished.is_set()
                       and time.monotonic() < end):
                    time.sleep(0.05)
                at = self.elapsed()
                entry = {"copier": c.name, "round": rnd + 1, "mode": "clean" if clean else "hard", "at_s": at,
                         "progress_percent": round(c.progress_percent(), 1)}
                if c.finished.is_set():
                    self.bounces.append({**entry, "landed": False, "skipped": FINISHED})
                    continue
                if c.progress_percent() < a.progress_percent:
                    self.bounces.append({**entry, "landed": False,
                                         "skipped": f"no {a.progress_percent} % progress in {PROGRESS_TIMEOUT_S} s"})
                    continue
                c.restart(clean)
                self.fault_events.append({"fault": f"{'SIGTERM' if clean else 'SIGKILL'} {c.name}", "at_s": at})
                self.bounces.append({**entry, "landed": True, "exit": c.exits[-1]})

    # ----------------------------------------------------------------- the wire
    def wire(self, lines: list[dict] | None) -> dict:
        """Error codes per API that crossed the proxy, and what the tools' own logs named."""
        return wire_summary(lines, [self.art / f"{c.name}.stderr" for c in self.copiers] + [self.art / "seed.stderr"])

    def live_tools(self) -> list[Tool]:
        return self.tools + [c.tool for c in self.copiers if c.tool is not None]
