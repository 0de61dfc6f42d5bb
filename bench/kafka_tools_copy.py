"""Kafka's own system-test tools on a target, every response's error codes counted on the wire.

Kafka's tests/kafkatest/tests/core/transactions_test.py seeds an input topic with
VerifiableProducer (idempotent, acks=all), copies it with one TransactionalMessageCopier per
input partition (transactions of 750 records, random aborts, sendOffsetsToTransaction), and
may hard-bounce the brokers meanwhile. Both tools come from org.apache.kafka:kafka-tools (Maven
Central: conformance/targets/maven.resolve_kafka_tools). This script runs the same against one target
behind the project's proxy and counts, per API and per error code, the error codes of every
response that crossed it -- client requests and broker-to-broker ones apart -- which is exact
where the clients' logs are not. Client WARN lines are counted beside them.

    PYTHONPATH=. python bench/kafka_tools_copy.py --target embedded --nodes 1 --records 20000
    PYTHONPATH=. python bench/kafka_tools_copy.py --target apache-kafka --nodes 3 --records 30000 \
        --bounces 6 --down-s 12 --out /tmp/k3

The transcript (``transcript.jsonl``), the tools' output and the counts (``counts.json``) are
written to ``--out``. The run ends when every copier copied its whole partition (or at
``--timeout``); the output is then read back read_committed and compared with the input.
"""
from __future__ import annotations

import argparse
import base64
import json
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker_impl.codec import API_BY_KEY, RESPONSE_HEADER, error_name  # noqa: E402
from conformance.proxy.rules import source_of  # noqa: E402
from conformance.proxy.transcript import Transcript  # noqa: E402
from conformance.runner.proxying import ProxyFront  # noqa: E402
from conformance.targets import Topology, make_target  # noqa: E402
from conformance.targets.maven import resolve_kafka_tools  # noqa: E402
from conformance.targets.topology import TopicSpec  # noqa: E402

INPUT, OUTPUT = "input-topic", "output-topic"
TOOLS = "org.apache.kafka.tools."


# ---------------------------------------------------------------------------- the tools
LOG4J2 = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders><Console name="err" target="SYSTEM_ERR"><PatternLayout pattern="[%d] %p %m (%c)%n"/></Console></Appenders>
  <Loggers><Root level="WARN"><AppenderRef ref="err"/></Root></Loggers>
</Configuration>
"""


class Tool:
    """One Java tool process; stdout lines (JSON) kept, stderr to a file."""

    def __init__(self, classpath: str, main: str, args: list[str], workdir: Path, name: str):
        self.name = name
        log4j = workdir / "log4j2.xml"
        if not log4j.exists():
            log4j.write_text(LOG4J2)
        self.stderr_path = workdir / f"{name}.stderr"
        self.stdout_path = workdir / f"{name}.stdout"
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", f"-Dlog4j2.configurationFile={log4j}", "-cp", classpath, TOOLS + main, *args],
            stdout=subprocess.PIPE, stderr=open(self.stderr_path, "ab"), text=True)
        self.last: dict = {}
        self.lines = 0
        self._out = open(self.stdout_path, "a")
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._out.write(line)
            self.lines += 1
            try:
                self.last = json.loads(line)
            except ValueError:
                pass
        self._out.flush()

    def wait(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)


# ---------------------------------------------------------------------------- counting
def _error_codes(tree, out: list) -> None:
    """Every non-zero ``*error_code`` of a decoded response, nested ones included."""
    if isinstance(tree, dict):
        for k, v in tree.items():
            if k.endswith("error_code") and isinstance(v, int):
                if v:
                    out.append(v)
            else:
                _error_codes(v, out)
    elif isinstance(tree, list):
        for v in tree:
            _error_codes(v, out)


def count_errors(transcript: Path) -> dict:
    """{"client"|"broker": {api: {"responses": n, "errors": {name: n}}}} over every response of
    the transcript (broker: Kafka's inter-broker clients, by client id), plus how many responses
    could not be read (cut at the proxy's 64 KiB per frame: large Fetch responses)."""
    counts: dict = {who: defaultdict(lambda: {"responses": 0, "errors": Counter()}) for who in ("client", "broker")}
    undecoded = 0
    with open(transcript) as f:
        for raw in f:
            line = json.loads(raw)
            api = API_BY_KEY.get(line.get("api_key")) if line.get("dir") == "b2c" else None
            if api is None:
                continue
            slot = counts["broker" if source_of(line.get("client_id")) == "broker" else "client"][api.name]
            slot["responses"] += 1
            if line.get("truncated") or not line.get("data"):
                undecoded += 1
                continue
            data = base64.b64decode(line["data"])
            version = line["api_version"]
            try:
                _, pos = RESPONSE_HEADER.decode(api.response_header_version(version), data, 4)
                body, _ = api.response.decode(version, data, pos)
            except Exception:  # noqa: BLE001 - counted as undecoded
                undecoded += 1
                continue
            codes: list = []
            _error_codes(body.to_dict(), codes)
            slot["errors"].update(error_name(c) for c in codes)
    out = {who: {api: {"responses": s["responses"], "errors": dict(s["errors"])} for api, s in sorted(d.items())}
           for who, d in counts.items()}
    out["undecoded_responses"] = undecoded
    return out


_WORD = re.compile(r"\b[A-Z][A-Z_]+\b")


def count_client_log(paths: list[Path]) -> dict:
    """Kafka error names in the tools' WARN/ERROR lines, once per line (what client logs say;
    the wire counts are the exact ones)."""
    names = {error_name(code) for code in range(-1, 130)} - {None, "NONE"}
    c: Counter = Counter()
    for p in paths:
        if p.exists():
            for line in p.read_text(errors="replace").splitlines():
                if " WARN " in line or " ERROR " in line:
                    c.update(set(_WORD.findall(line)) & names)
    return dict(c)


# ---------------------------------------------------------------------------- the run
def isr_full_after(target, topics: list[TopicSpec], limit_s: float) -> float | None:
    """Seconds until every partition of ``topics`` has its whole replica set in the ISR again
    (a restarted broker rejoined), as a live node's Metadata says; None past ``limit_s``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        try:
            if all(len(target.partition_replicas(t.name, p)[2]) == t.replication_factor
                   for t in topics for p in range(t.partitions)):
                return round(time.monotonic() - t0, 2)
        except Exception:  # noqa: BLE001 - no live node answered yet: ask again
            pass
        time.sleep(0.1)
    return None


def read_values(classpath: str, bootstrap: str, topic: str, expected: int, workdir: Path, name: str,
                timeout_ms: int = 60000) -> int:
    """How many records Kafka's ConsoleConsumer reads read_committed from ``topic`` (it stops at
    ``expected`` or after ``timeout_ms`` without a record)."""
    args = ["--bootstrap-server", bootstrap, "--topic", topic, "--from-beginning", "--isolation-level",
            "read_committed", "--timeout-ms", str(timeout_ms), "--max-messages", str(expected)]
    tool = Tool(classpath, "consumer.ConsoleConsumer", args, workdir, name)
    tool.wait(timeout_ms / 1000 + 60)
    tool.stop()
    return tool.lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="embedded")
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--input-partitions", type=int, default=2)
    ap.add_argument("--output-partitions", type=int, default=3)
    ap.add_argument("--transaction-size", type=int, default=750)
    ap.add_argument("--transaction-timeout", type=int, default=40000)
    ap.add_argument("--no-random-aborts", action="store_true")
    ap.add_argument("--bounces", type=int, default=0, help="kill -9 + restart this many brokers, one at a time")
    ap.add_argument("--down-s", type=float, default=3.0, help="how long a killed broker stays down")
    ap.add_argument("--every-s", type=float, default=3.0, help="pause before each bounce")
    ap.add_argument("--isr-wait-s", type=float, default=30.0,
                    help="after a restart, wait (at most this long) until every ISR is whole again before the "
                         "next bounce, as transactions_test.py's await_no_under_replicated_partitions; 0: do not")
    ap.add_argument("--min-isr", type=int, default=None, help="default: 2 on 3+ nodes, else 1")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--out", type=Path, default=Path("/tmp/kafka-tools-copy"))
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a broker config")
    args = ap.parse_args()

    classpath = resolve_kafka_tools()
    out = args.out
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    rf = min(args.nodes, 3)
    min_isr = args.min_isr if args.min_isr is not None else (2 if args.nodes >= 3 else 1)
    topic_cfg = {"min.insync.replicas": str(min_isr)}
    topics = [TopicSpec(INPUT, args.input_partitions, rf, topic_cfg),
              TopicSpec(OUTPUT, args.output_partitions, rf, topic_cfg)]
    configs = dict(kv.split("=", 1) for kv in args.set)
    target = make_target(args.target)
    front = ProxyFront(args.nodes)
    front.server.transcript = Transcript(out / "transcript.jsonl", max_memory_bytes=0)
    figures: dict = {"target": args.target, "nodes": args.nodes, "records": args.records, "bounces": []}
    tools: list[Tool] = []
    t0 = time.monotonic()
    try:
        front.follow(target)
        target.start(Topology(nodes=args.nodes, topics=topics), configs, out / "target",
                     node_configs=front.node_configs())
        bootstrap = front.attach(target)
        figures["version"] = target.version
        (out / "producer.properties").write_text(
            "max.in.flight.requests.per.connection=5\nretries=1000000\nenable.idempotence=true\nacks=all\n")
        seed = Tool(classpath, "VerifiableProducer",
                    ["--bootstrap-server", bootstrap, "--topic", INPUT, "--max-messages", str(args.records),
                     "--producer.config", str(out / "producer.properties")], out, "seed")
        tools.append(seed)
        if seed.wait(args.timeout) != 0:
            raise RuntimeError(f"VerifiableProducer failed: {seed.proc.returncode}, see {seed.stderr_path}")
        figures["seed_s"] = round(time.monotonic() - t0, 1)
        copiers = []
        for i in range(args.input_partitions):
            a = ["--broker-list", bootstrap, "--transactional-id", f"copier-{i}", "--consumer-group",
                 "transactions-test-consumer-group", "--input-topic", INPUT, "--output-topic", OUTPUT,
                 "--input-partition", str(i), "--transaction-size", str(args.transaction_size),
                 "--transaction-timeout", str(args.transaction_timeout), "--use-group-metadata"]
            if not args.no_random_aborts:
                a.append("--enable-random-aborts")
            copiers.append(Tool(classpath, "TransactionalMessageCopier", a, out, f"copier-{i}"))
        tools += copiers
        copy_t0 = time.monotonic()
        deadline = copy_t0 + args.timeout
        nodes = target.node_ids()
        for b in range(args.bounces):
            time.sleep(args.every_s)
            node = nodes[b % len(nodes)]
            kill_t = time.monotonic()
            target.kill(node)
            front.node_down(node)
            time.sleep(args.down_s)
            target.restart(node)
            front.node_up(node)
            back = time.monotonic()
            isr = isr_full_after(target, topics, args.isr_wait_s) if args.nodes > 1 else None
            figures["bounces"].append({"node": node, "at_s": round(kill_t - copy_t0, 1),
                                       "back_after_s": round(back - kill_t, 1), "isr_full_after_s": isr})
            print(f"bounced node {node}: back after {back - kill_t:.1f} s, whole ISR {isr} s later", flush=True)
        for c in copiers:
            c.wait(max(1.0, deadline - time.monotonic()))
        figures["copy_s"] = round(time.monotonic() - copy_t0, 1)
        figures["copiers"] = {c.name: {"exit": c.proc.returncode, "last": c.last} for c in copiers}
        figures["output_committed"] = read_values(classpath, bootstrap, OUTPUT, args.records, out, "verify")
    finally:
        for t in tools:
            t.stop()
        target.stop()
        front.stop()
        front.server.transcript.close()
    figures["wire"] = count_errors(out / "transcript.jsonl")
    figures["client_log"] = count_client_log([out / f"copier-{i}.stderr" for i in range(args.input_partitions)]
                                             + [out / "seed.stderr"])
    (out / "counts.json").write_text(json.dumps(figures, indent=1))
    print(json.dumps({k: v for k, v in figures.items() if k != "wire"}, indent=1))
    for who in ("client", "broker"):
        for api, s in figures["wire"][who].items():
            if s["errors"]:
                print(f"  {who:6} {api:22} {s['responses']:7d} responses  {s['errors']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
