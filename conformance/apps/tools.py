"""Kafka's Java tools (org.apache.kafka:kafka-tools, conformance/targets/maven.resolve_kafka_tools)
and test programs (Kafka Streams' StreamsSmokeTest, maven.resolve_streams_tests) as processes: stdout lines kept (the tools print one JSON object or one record value a line),
stderr (WARN and up) to a file beside the row's artifacts."""
from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from broker_impl.codec import error_name

from ..history import profile as wire_profile
from ..proxy.transcript import decode_line

TOOLS = "org.apache.kafka.tools."
#: VerifiableProducer's --command-config when it seeds an application's input, as the system
#: tests' service configures it: idempotent, acks=all, retried (its own default is retries=0).
SEED_PRODUCER_PROPERTIES = "max.in.flight.requests.per.connection=5\nretries=1000000\nenable.idempotence=true\nacks=all\n"
LOG4J2 = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders><Console name="err" target="SYSTEM_ERR"><PatternLayout pattern="[%d] %p %m (%c)%n"/></Console></Appenders>
  <Loggers><Root level="WARN"><AppenderRef ref="err"/></Root></Loggers>
</Configuration>
"""


class Tool:
    """One tool process. `lines`: every stdout line (stripped), in order; `status`: the last one
    that parsed as a JSON object. A tool started again under the same name appends to the same
    files (a bounced copier's output stays one story). `main`: a class of kafka-tools by its
    short name (`VerifiableProducer`, `consumer.ConsoleConsumer`: at most one dot) or any class by
    its full name (`kconform.flink.ExactlyOnceCopy`)."""

    def __init__(self, classpath: str, main: str, args: list[str], workdir: Path, name: str,
                 keep_lines: bool = True, on_line=None, heap: str = "256m", jvm_args: tuple[str, ...] = ()):
        self.name = name
        log4j = workdir / "tools-log4j2.xml"
        if not log4j.exists():
            log4j.write_text(LOG4J2)
        self.stderr_path = workdir / f"{name}.stderr"
        self.stdout_path = workdir / f"{name}.stdout"
        self.keep_lines = keep_lines
        self.on_line = on_line
        self.lines: list[str] = []
        self.count = 0
        self.status: dict = {}
        main = main if main.count(".") >= 2 else TOOLS + main
        #: the JVM's java.io.tmpdir, its own and removed once it has ended: Flink's MiniCluster
        #: (a 21 MB RPC jar, blob, io and shuffle directories) and Kafka's test utilities left
        #: theirs in /tmp at every run, ~50 MB a Flink row, never cleaned
        self.tmpdir = Path(tempfile.mkdtemp(prefix=f"kconform-{name}-"))
        self.proc = subprocess.Popen(
            ["java", f"-Xmx{heap}", f"-Djava.io.tmpdir={self.tmpdir}", *jvm_args,
             f"-Dlog4j2.configurationFile={log4j}", "-cp", classpath, main, *args],
            stdout=subprocess.PIPE, stderr=open(self.stderr_path, "ab"), text=True, start_new_session=True)
        self._out = open(self.stdout_path, "a")
        self._reader = threading.Thread(target=self._read, name=f"tool-{name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            self._out.write(raw)
            line = raw.strip()
            self.count += 1
            if self.keep_lines:
                self.lines.append(line)
            if line.startswith("{"):
                try:
                    obj = json.loads(line)
                except ValueError:
                    obj = None
                if isinstance(obj, dict):
                    self.status = obj
                    if self.on_line is not None:
                        self.on_line(self, obj)
        self._out.flush()

    def wait_for(self, needle: str, timeout: float, since: int = 0) -> int | None:
        """The index of the first stdout line from `since` on that holds `needle`, waiting for it
        at most `timeout` seconds (None: not printed, or the process ended without it)."""
        end = time.monotonic() + timeout
        i = since
        while True:
            while i < len(self.lines):
                if needle in self.lines[i]:
                    return i
                i += 1
            if not self.running() and not self._reader.is_alive() or time.monotonic() >= end:
                return None
            time.sleep(0.1)

    def running(self) -> bool:
        return self.proc.poll() is None

    def wait(self, timeout: float) -> int | None:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self._reader.join(10)
        shutil.rmtree(self.tmpdir, ignore_errors=True)
        return rc

    def signal(self, clean: bool, timeout: float = 60.0) -> int | None:
        """SIGTERM (clean: the tool's shutdown hook runs) or SIGKILL; waits for the exit."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM if clean else signal.SIGKILL)
        rc = self.wait(timeout)
        if rc is None:
            self.proc.kill()
            rc = self.wait(10)
        return rc

    def stop(self) -> None:
        self.signal(clean=True, timeout=10)
        self._out.close()


_WORD = re.compile(r"\b[A-Z][A-Z_]+\b")


def count_client_log(paths: list[Path]) -> dict[str, int]:
    """Kafka error names in the tools' WARN/ERROR lines, once per line: what the clients' logs
    say (the wire's counts are the exact ones)."""
    names = {error_name(code) for code in range(-1, 130)} - {None, "NONE"}
    c: Counter = Counter()
    for p in paths:
        if p.exists():
            for line in p.read_text(errors="replace").splitlines():
                if " WARN " in line or " ERROR " in line:
                    c.update(set(_WORD.findall(line)) & names)
    return dict(sorted(c.items()))


def wire_summary(lines: list[dict] | None, stderr_paths: list[Path]) -> dict:
    """An application row's error codes: per API, those that crossed the proxy
    (history/profile.py), and the error names the programs' own logs gave (count_client_log).
    Answers whose frame the transcript did not keep (its memory budget, proxy/transcript.py)
    were not counted: said, so that a count is never silently partial."""
    errors = wire_profile.wire_errors(lines or [], decode_line)
    prof = wire_profile.profile(errors)
    dropped = sum(1 for x in lines or [] if x.get("dir") == "b2c" and x.get("data_dropped"))
    return {"wire_errors": prof.get("client", {}), "broker_wire_errors": prof.get("broker", {}),
            "responses_not_counted": dropped, "client_log": count_client_log(stderr_paths)}
