"""Watching a fuzzed target: is it alive, does it answer, what did its logs say.

Three findings, each with its own evidence:
- a *crash*: a node's process is gone (Target.health names it) -- the target died;
- a *hang*: every process is alive, but a node does not answer ApiVersions on a new connection
  within Target.health_timeout -- the target stopped serving;
- an *internal error*: the target answered (or closed the connection) but its log says a request
  reached code that failed -- a traceback, a panic, an unexpected exception. Where the log names
  the peer (the embedded broker does), the fuzzer knows which connection, hence which frame.

`INTERNAL_ERRORS` are the log patterns per target; a target without an entry (external: no log)
reports no internal errors, and says so.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

#: Log lines that mean "a request hit a failure inside the broker", per target.
INTERNAL_ERRORS: dict[str, re.Pattern] = {
    "embedded": re.compile(r" ERROR kconform\."),  # log.exception/log.error: once per failure
    "apache-kafka": re.compile(r"Exception when handling request|Unexpected error|ERROR \[KafkaApi"),
    "kfake": re.compile(r"^panic:|^fatal error:"),
    "tansu": re.compile(r"panicked at"),
    "librdkafka-mock": re.compile(r"assert|Assertion"),
}
ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: The embedded broker names the connection's peer in the line: which of our sockets it was.
PEER = re.compile(r"from 127\.0\.0\.1:(\d+) after an internal error")


@dataclass
class LogScan:
    """What the target's logs said since the last scan."""

    internal_errors: int = 0
    lines: list[str] = field(default_factory=list)   # the first lines of each, for the report
    peer_ports: list[int] = field(default_factory=list)


class LogWatch:
    """Reads each node log from where it stood at the start, a scan at a time."""

    def __init__(self, target) -> None:
        self.target = target
        self.pattern = INTERNAL_ERRORS.get(target.name.partition("@")[0])
        self.offsets: dict[Path, int] = {p: _size(p) for p in target.log_files()}
        self.start: dict[Path, int] = dict(self.offsets)

    @property
    def readable(self) -> bool:
        return self.pattern is not None and bool(self.target.log_files())

    def scan(self) -> LogScan:
        out = LogScan()
        if self.pattern is None:
            return out
        for path in self.target.log_files():
            pos = self.offsets.get(path, 0)
            try:
                with open(path, "rb") as fh:
                    fh.seek(pos)
                    data = fh.read()
            except OSError:
                continue
            end = data.rfind(b"\n") + 1  # a line still being written is read next time
            self.offsets[path] = pos + end
            for line in data[:end].decode(errors="replace").splitlines():
                if self.pattern.search(line):
                    out.internal_errors += 1
                    if len(out.lines) < 20:
                        out.lines.append(ANSI.sub("", line)[:300])
                    m = PEER.search(line)
                    if m:
                        out.peer_ports.append(int(m.group(1)))
        return out

    def log_bytes(self) -> int:
        """How much the node logs grew since the fuzzing started."""
        return sum(max(0, _size(p) - self.start.get(p, 0)) for p in self.target.log_files())


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
