"""What every application run (apps/transactions.py, apps/streams_smoke.py) is to its row
(runner/row.play_application): made from the case, the target and the row's bootstrap,
namespace, artifacts directory and proxy; `run()` returns the checks, `records` and
`fault_events` are the row's steps and faults, `summary` its `application`, `wire()` the error
codes that crossed the proxy, `close()` ends whatever program still runs.

Broker bounces are here, not in one application, because each system test that bounces brokers
does it its own way (transactions_test.py: every broker in turn; streams_broker_bounce_test.py:
the leader of one partition, chased five times) but a bounce itself is the same everywhere: the
node stopped or killed, started again, the proxy told both, and the ISR awaited whole."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol

from conformance.targets import Target

from ..dsl.model import Case
from ..results import Check
from .tools import Tool
from .verify import compare, consumed_values

#: After a read reached the expected count: how long it goes on, so that duplicates after the
#: last expected value are read too.
SETTLE_S = 2.0
#: How long a bounced broker's partitions may take to be whole again (ducktape's
#: await_no_under_replicated_partitions), and to have a leader to chase.
ISR_TIMEOUT_S = 60.0
LEADER_TIMEOUT_S = 30.0
#: What one leader bounce may take in all, for a row waiting on a chase (a Kafka broker's start
#: on a loaded machine took 35-50 s here, then the ISR whole again).
BOUNCE_BUDGET_S = 120.0


class Namespace(Protocol):
    """What an application needs of the row's namespace (runner/namespace.Namespace, which
    this package does not import: the runner imports it): the row's unique name of a case name."""

    name: Callable[[str], str]


class ApplicationRun:
    #: Whether the run leaves names on the instance that a later row could meet (the program's
    #: own, not the row's namespace): the row then never hands the instance on.
    leaves_state = False
    #: The artifacts the program comes from and their releases: the row's client_version.
    program = ""

    def __init__(self, case: Case, target: Target, bootstrap: str, ns: Namespace, artifacts: Path,
                 proxy=None) -> None:
        self.case, self.target, self.bootstrap, self.ns, self.art, self.proxy = \
            case, target, bootstrap, ns, artifacts, proxy
        self.app = case.application
        self.classpath = ""
        self.t0 = time.monotonic()
        self.tools: list[Tool] = []
        self.fault_events: list[dict] = []
        self.records: list[dict] = []   # steps.json: the phases, with their times
        self.summary: dict[str, Any] = {}

    def elapsed(self) -> float:
        return round(time.monotonic() - self.t0, 2)

    def _phase(self, name: str, **data) -> None:
        self.records.append({"phase": name, "at_s": self.elapsed(), **data})

    def tool(self, classpath: str, main: str, args: list[str], name: str) -> Tool:
        """A program started for the run (ended by close() if still running)."""
        tool = Tool(classpath, main, args, self.art, name)
        self.tools.append(tool)
        return tool

    def reader(self, classpath: str, topic: str, group: str, timeout_s: float) -> Tool:
        """Kafka's ConsoleConsumer (kafka-tools at `classpath`) reading `topic` from the beginning,
        read_committed, in the group `group` (both in the row's namespace): one value a line."""
        return self.tool(classpath, "consumer.ConsoleConsumer",
                         ["--bootstrap-server", self.bootstrap, "--topic", self.ns.name(topic), "--from-beginning",
                          "--isolation-level", "read_committed", "--group", self.ns.name(group),
                          "--timeout-ms", str(int(timeout_s * 1000))], group)

    def drain(self, tool: Tool, expected: int, timeout_s: float) -> tuple[list[int], int]:
        """ducktape's drain_consumer: wait until the read reached `expected` (at most `timeout_s`),
        read on SETTLE_S more, stop; the integer values read and how many lines were not one."""
        end = time.monotonic() + timeout_s
        while tool.count < expected and tool.running() and time.monotonic() < end:
            time.sleep(0.2)
        if tool.running():
            time.sleep(SETTLE_S)
        tool.stop()
        return consumed_values(tool.lines)

    def read_checks(self, label: str, inputs: list[int], read: tuple[list[int], int]) -> list[Check]:
        """What an in-order exactly-once copy must show in one read_committed read (`label`
        "output": the read of the whole output afterwards; else the read that followed the copy,
        its checks prefixed): no duplicate, no loss and nothing else, the input's order. The
        counts go to the summary under `label`."""
        vals, other = read
        r = compare(inputs, vals, check_order=True)
        self.summary[label] = r
        prefix = "" if label == "output" else f"{label}_"
        return [Check(f"{prefix}no_duplicates", r["duplicates"] == 0,
                      f"{label}: {r['duplicates']} duplicates in {r['read']} read_committed records"),
                Check(f"{prefix}no_losses", r["losses"] == 0 and r["unexpected"] == 0 and other == 0,
                      f"{label}: {r['losses']} of {len(inputs)} input values never read, {r['unexpected']} values "
                      f"never input, {other} records not a value"),
                Check(f"{prefix}order", r["in_order"],
                      f"{label}: in input order: {r['in_order']} (first difference at {r['first_out_of_order']})")]

    # ----------------------------------------------------------------- broker bounces
    def bounce_node(self, node: int, clean: bool) -> dict:
        """One broker stopped (SIGTERM) or killed (SIGKILL; then left down `down_s`), started
        again, the proxy told both; what happened when (the row's fault events get both)."""
        t, proxy = self.target, self.proxy
        at = self.elapsed()
        (t.stop_node if clean else t.kill)(node)
        if proxy is not None:
            proxy.node_down(node)
        self.fault_events.append({"fault": f"{'stop' if clean else 'crash'} node {node}", "node": node, "at_s": at})
        if not clean:
            time.sleep(self.app.down_s)
        t.restart(node)
        if proxy is not None:
            proxy.node_up(node)
        back = self.elapsed()
        self.fault_events.append({"fault": f"restart node {node}", "node": node, "at_s": back})
        return {"node": node, "mode": "clean" if clean else "hard", "at_s": at, "back_after_s": round(back - at, 2)}

    def isr_full(self, partitions: Iterable[tuple[str, int, int]]) -> float | None:
        """Seconds until every (topic, partition, replication factor) had its whole ISR again
        (None: not within ISR_TIMEOUT_S); 0.0 at once on one node."""
        if self.case.topology.nodes <= 1:
            return 0.0
        wanted = list(partitions)
        t0 = time.monotonic()
        while time.monotonic() - t0 < ISR_TIMEOUT_S:
            try:
                if all(len(self.target.partition_replicas(topic, p)[2]) == rf for topic, p, rf in wanted):
                    return round(time.monotonic() - t0, 2)
            except Exception:  # noqa: BLE001 - no live node answered yet: ask again
                pass
            time.sleep(0.2)
        return None

    def leader_of(self, topic: str, partition: int) -> int | None:
        """The partition's leader as a live node says now (None: none within LEADER_TIMEOUT_S)."""
        end = time.monotonic() + LEADER_TIMEOUT_S
        while time.monotonic() < end:
            try:
                leader = self.target.partition_replicas(topic, partition)[0]
                if leader is not None and leader >= 0:
                    return leader
            except Exception:  # noqa: BLE001 - no live node answered yet: ask again
                pass
            time.sleep(0.2)
        return None

    def pause_node(self, node: int) -> dict:
        """One broker frozen (SIGSTOP) for `down_s` and resumed (SIGCONT): its connections stay
        open and unanswered, the controller fences it when its session times out, and it wakes up
        believing it still leads until its metadata says otherwise."""
        at = self.elapsed()
        self.target.pause(node)
        self.fault_events.append({"fault": f"pause node {node}", "node": node, "at_s": at})
        time.sleep(self.app.down_s)
        self.target.resume(node)
        back = self.elapsed()
        self.fault_events.append({"fault": f"resume node {node}", "node": node, "at_s": back})
        return {"node": node, "mode": "pause", "at_s": at, "back_after_s": round(back - at, 2)}

    def chase_leader(self, topic: str, partition: int, times: int, mode: str,
                     busy: Callable[[], bool]) -> list[dict]:
        """streams_broker_bounce_test's bounce: `times` times, the partition's leader found,
        stopped (mode clean_bounce) or killed (hard_bounce) and started again, or paused and
        resumed (pause), its ISR (replication min(nodes, 3)) awaited whole before the next; each
        bounce `landed` when `busy()` said the application was at work."""
        rf = min(self.case.topology.nodes, 3)
        out: list[dict] = []
        for n in range(times):
            leader = self.leader_of(topic, partition)
            if leader is None:
                out.append({"bounce": n + 1, "landed": False, "skipped": f"no leader of {topic}-{partition}"})
                continue
            working = busy()
            done = self.pause_node(leader) if mode == "pause" else self.bounce_node(leader, mode == "clean_bounce")
            entry = {"bounce": n + 1, **done}
            entry.update({"isr_full_after_s": self.isr_full([(topic, partition, rf)]), "landed": working})
            out.append(entry)
        return out

    def chase_landed(self, bounces: list[dict], topic: str, busy_text: str) -> tuple[Check, int]:
        """The `bounces_landed` check of a chase_leader result (every bounce came while the
        application was `busy_text`, none skipped for want of a leader), and how many landed."""
        a = self.app
        landed = sum(1 for b in bounces if b.get("landed"))
        return Check("bounces_landed", landed == a.bounces,
                     f"{landed} of {a.bounces} {a.failure_mode}s of the leader of {topic}-0 landed while {busy_text}"
                     + "".join(f"; bounce {b['bounce']}: {b['skipped']}" for b in bounces if "skipped" in b)), landed

    def live_tools(self) -> list[Tool]:
        """Every program the run started (close() kills those still running)."""
        return list(self.tools)

    def close(self) -> None:
        for tool in self.live_tools():
            if tool.running():
                tool.signal(clean=False, timeout=10)
            else:
                tool.wait(0)      # ended by itself: reaped, its java.io.tmpdir removed
