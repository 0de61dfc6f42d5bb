"""Target `kfake`: franz-go's fake Kafka cluster (github.com/twmb/franz-go/pkg/kfake), in Go.

Why: kfake is the broker franz-go's own CI runs its client suite against, and other projects use
it as a test double for Kafka; where it diverges from Kafka is what its users need to know.

Build: a small Go `main` kept in the repository (kfake-go/: main.go, go.mod and go.sum pinning
the kfake pseudo-version and the franz-go and kmsg releases that build it) is built with
conformance/buildcache into ~/.cache/kconform/kfake/<digest>/ on first use; the Go module proxy
supplies the modules. kfake has no tags, so go.mod's pseudo-version is the version reported.

What runs: ONE process holds every kfake broker (kfake.NumBrokers), on 127.0.0.1 ports it picks
and prints; node ids are 0..N-1 (kfake numbers brokers by position). State persists to the
workdir (kfake.DataDir, no fsync per write -- Kafka's default too), so a restart repeats the
command line with the same ports and finds the same topics, records, producer ids, transactions
(kfake aborts those in flight at the crash) and group offsets.

Node control, and why it is what it is:
  - one node: kill (SIGKILL), pause/resume (SIGSTOP/SIGCONT), stop_node (SIGTERM: kfake closes
    its listeners and persists its state) and restart act on the one process -- exact.
  - several nodes: none of them. The brokers share one process, so a signal reaches all of them.
    kfake's own hooks do not stand in for a node failure: RemoveNode closes only the node's
    listener (its open connections keep being served) and gives every partition of the cluster
    a new random leader, which no Kafka node failure does; AddNode after it shuffles the leaders
    again. So node faults on a multi-node kfake are not applicable, with that reason.
kfake's request-control hooks (ControlKey, KeepControl, DropControl, SleepControl) answer, drop or
delay a request, which is what the proxy's rules do in front of any target; protocol points
inside EndTxn do not exist in kfake (it writes the end of a transaction and its markers in one
step), so `at:` faults are not applicable here either.

Broker configs go to kfake.BrokerConfigs. kfake keeps any key but acts only on the ones it lists
in DescribeConfigs; the others are in `unapplied_configs` (the main asks kfake at start).
`auto.create.topics.enable` (Kafka's default: true) becomes kfake.AllowAutoTopicCreation, and
`num.partitions` (default 1, as the apache-kafka target sets it) the partitions of such a topic.
"""
from __future__ import annotations

import re
import time
from pathlib import Path

from .. import buildcache
from . import wire
from .base import NotApplicable, TargetStartError, Topology, wait_until
from .local import LocalProcessTarget
from .process import NodeProcess, StdoutLines

SOURCE = Path(__file__).resolve().parent / "kfake-go"
BUILD = buildcache.go("kfake", SOURCE, output="kfake")
INSTALL_HINT = "install Go 1.26 or newer (https://go.dev/dl/); the modules come from the Go module proxy"
LISTENING = re.compile(r"^listening (\S+):(\d+)$")
#: Kafka broker configs the target turns into kfake options instead of BrokerConfigs entries.
OPTION_CONFIGS = ("auto.create.topics.enable", "num.partitions")


def pinned_versions() -> dict[str, str]:
    """Module -> version as go.mod pins them (kfake, franz-go, kmsg)."""
    text = (SOURCE / "go.mod").read_text()
    return dict(re.findall(r"^\s*(?:require\s+)?(github\.com/twmb/franz-go\S*)\s+(v\S+)", text, re.M))


def kfake_version() -> str:
    pins = pinned_versions()
    kfake = pins.get("github.com/twmb/franz-go/pkg/kfake", "unknown")
    franz = pins.get("github.com/twmb/franz-go", "unknown")
    return f"{kfake} (franz-go {franz})"


class KfakeTarget(LocalProcessTarget):
    name = "kfake"
    # Process control is exact only on one node; the node methods say why not on several.
    static_capabilities = frozenset({"kill", "pause", "restart", "stop_node", "multi_node"})
    #: A peer under test starts afresh for every case run: a bug one case triggers (kfake's
    #: panic on an unknown API key) must not decide the next case's verdict.
    reusable = False
    ready_timeout = 30.0
    stop_grace = 10.0

    def __init__(self, log_level: str = "warn") -> None:
        super().__init__()
        self.log_level = log_level

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        if BUILD.is_built():
            return True, f"kfake {kfake_version()} (built)"
        if BUILD.tools_missing():
            return False, f"no `go` on PATH to build kfake; {INSTALL_HINT}"
        return True, f"kfake {kfake_version()} (built on first use with go)"

    @property
    def version(self) -> str:
        return kfake_version()

    # ----------------------------------------------------------------- launch
    def _argv(self, binary: Path, nodes: int, broker_configs: dict[str, str], workdir: Path) -> list[str]:
        auto_create = broker_configs.get("auto.create.topics.enable", "true").strip().lower() == "true"
        argv = [
            str(binary),
            "-brokers", str(nodes),
            "-data-dir", str(workdir / "data"),
            "-default-partitions", broker_configs.get("num.partitions", "1"),
            "-log-level", self.log_level,
        ]
        if auto_create:
            argv.append("-auto-create-topics")
        for key, value in broker_configs.items():
            if key not in OPTION_CONFIGS:
                argv += ["-c", f"{key}={value}"]
        return argv

    def _launch(self, topology: Topology, broker_configs: dict[str, str], workdir: Path) -> None:
        if topology.nodes > 1 and self.node_configs:
            raise NotApplicable("kfake runs every broker in one process with one set of broker configs; "
                                "the run gives nodes configs of their own")
        t0 = time.monotonic()
        try:
            binary = BUILD.ensure() / "kfake"
        except buildcache.BuildError as exc:
            raise TargetStartError(f"building kfake failed: {exc}") from None
        self.timings["build"] = round(time.monotonic() - t0, 3)
        proc = NodeProcess(self._argv(binary, topology.nodes, broker_configs, workdir),
                           workdir / "kfake.log", cwd=workdir, stdout_pipe=True)
        # Registered before the node ids are known, so that stop() ends it whatever fails next.
        self.procs[-1] = proc
        proc.start()
        ports = self._await_ready(proc)
        # A restart must come back on the same ports: clients and the case know nodes by address.
        proc.argv += ["-ports", ",".join(str(p) for _, p in ports)]
        host, port = ports[0]
        md = wait_until("kfake Metadata", lambda: wire.metadata((host, port), []), self.ready_timeout)
        if sorted(md.brokers.values()) != sorted(ports):
            raise TargetStartError(f"kfake's Metadata lists {md.brokers}, but it listens on {ports}")
        # In place: the proxy follows this very dict (runner/proxying.ProxyFront.follow).
        self.addresses.update(sorted(md.brokers.items()))
        self.procs = {min(self.addresses): self.procs.pop(-1)}

    def _await_ready(self, proc: NodeProcess) -> list[tuple[str, int]]:
        """The `listening` lines up to `ready`; records the `unsupported` ones."""
        try:
            lines = StdoutLines(proc).read_until(lambda line: line == "ready", self.ready_timeout)
        except (TimeoutError, EOFError) as exc:
            raise TargetStartError(f"kfake did not start: {exc}") from None
        ports = []
        for line in lines:
            m = LISTENING.match(line)
            if m:
                ports.append((m.group(1), int(m.group(2))))
            elif line.startswith("unsupported "):
                key = line.split(" ", 1)[1]
                self.unapplied_configs[key] = self.broker_configs.get(key, "")
        return ports

    def _relaunch(self, node_id: int) -> None:
        proc = self._proc(node_id)
        proc.start()
        ports = self._await_ready(proc)
        if sorted(ports) != sorted(self.addresses.values()):
            raise TargetStartError(f"restarted kfake listens on {ports}, expected {sorted(self.addresses.values())}")

    # ----------------------------------------------------------------- node control
    def _check_exact(self, node_id: int, action: str) -> None:
        if len(self.addresses) > 1:
            raise NotApplicable(
                f"kfake cannot {action} one node of {len(self.addresses)}: every kfake broker lives in one "
                "process, so a signal reaches them all, and kfake's RemoveNode is no node failure (it closes "
                "only the node's listener, its open connections keep being served, and it gives every "
                "partition of the cluster a new random leader)")
