"""Target `librdkafka-mock`: the mock Kafka cluster inside librdkafka (its `rd_kafka_mock_*` API).

Why: librdkafka's own test suite, and that of every client built on it, runs against this mock;
it listens on loopback and serves any client. Where it diverges from Kafka is what those tests
cannot see.

How it runs: conformance/targets/mockhost.py, a small Python process, creates the cluster with
ctypes on the librdkafka that the confluent-kafka wheel bundles (pinned in pyproject: the mock
API has no ABI promise) and obeys JSON commands on its stdin. Brokers have ids 1..N, all in that
one process.

What the harness can do here, and why it is exact or not:
  - topics: the mock has no CreateTopics; `create_topics` calls rd_kafka_mock_topic_create
    (partitions and replication factor only -- a topic with configs is not applicable).
  - kill: rd_kafka_mock_broker_set_down closes the node's connections and leaves its port
    bound but not listening, so new connections are refused and Metadata no longer lists it;
    its data stays in the mock. That is a crashed node, seen from the network. The mock moves
    no partition leadership and no coordinator away from it (there is no controller): that is
    the mock's behaviour, which the case then observes.
  - restart of a killed node: rd_kafka_mock_broker_set_up, on the same port, with its data --
    Kafka's restart with the same log dirs. A node that is up cannot be restarted: the mock has
    no clean shutdown to stop it with first.
  - stop_node: not applicable. Kafka's clean shutdown moves leadership away before the node
    leaves (controlled shutdown); the mock can only drop the node (set_down), which is a crash.
  - pause/resume: on one node, SIGSTOP/SIGCONT of the host process -- exact (sockets held,
    nothing answered, timers stopped). On several nodes not applicable: the brokers share the
    process, and the mock's per-broker RTT delays responses but still handles the requests at
    once, which a paused node does not.
  - `at:` protocol points: none (the mock's EndTxn writes its markers in one step).
The mock's own fault controls are methods here (set_partition_leader, set_coordinator,
push_request_errors, clear_request_errors, set_apiversion, set_rtt) for the runner to use where
a case's fault is exactly one of them.

Broker configs: `group.initial.rebalance.delay.ms` (0 unless given, as on the apache-kafka
target) and `advertised.listeners` (rd_kafka_mock_broker_set_host_port: the address Metadata
and FindCoordinator name; per node through node_configs) are applied; `auto.create.topics.enable`
true is the mock's own behaviour. Every other config is in `unapplied_configs`.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import sys
import threading
from pathlib import Path

from . import wire
from .base import NotApplicable, TargetStartError, TopicSpec, Topology, wait_until
from .local import LocalProcessTarget
from .process import NodeProcess, StdoutLines, python_env

#: librdkafka's RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS, as rd_kafka_err2name names it.
TOPIC_ALREADY_EXISTS = "TOPIC_ALREADY_EXISTS"
COMMAND_TIMEOUT = 30.0
#: Configs the target applies (module doc); the rest are unsupported.
APPLIED_CONFIGS = ("group.initial.rebalance.delay.ms", "advertised.listeners")


def librdkafka_path() -> Path | None:
    """The librdkafka shared object bundled in the confluent-kafka wheel, or None."""
    spec = importlib.util.find_spec("confluent_kafka")
    if spec is None or not spec.submodule_search_locations:
        return None
    package = Path(list(spec.submodule_search_locations)[0])
    found = sorted((package.parent / "confluent_kafka.libs").glob("librdkafka*.so*"))
    return found[0] if found else None


def librdkafka_version() -> str:
    import confluent_kafka

    wheel = importlib.metadata.version("confluent-kafka")
    return f"librdkafka {confluent_kafka.libversion()[0]} (confluent-kafka {wheel})"


def parse_listener(value: str) -> tuple[str, int]:
    """("127.0.0.1", 9092) from `PLAINTEXT://127.0.0.1:9092` (the first listener of the list)."""
    first = value.split(",")[0].strip()
    address = first.split("://", 1)[-1]
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"cannot read host:port from listener {value!r}")
    return host.strip("[]"), int(port)


class MockCommandError(RuntimeError):
    """The mock refused a command (its error name and text are in the message)."""


class LibrdkafkaMockTarget(LocalProcessTarget):
    name = "librdkafka-mock"
    static_capabilities = frozenset({"kill", "pause", "restart", "multi_node"})
    #: Measured with kafka-clients 4.4.0 (cases/wire/api_versions_unsupported_version_v0_answer).
    client_differences = {
        "java": "the mock answers an ApiVersions request newer than it knows (the Java client 4.4 sends v5) with "
                "UNSUPPORTED_VERSION in a body that is not the v0 layout Kafka uses (KIP-511): a one-byte array "
                "count, 13 bytes where Kafka sends 12. The Java client reads it as v5 -- no version ranges and a "
                "throttle time of 1179648 ms -- and sends nothing more on that connection for 20 minutes, so "
                "every operation of the case times out",
    }
    per_node_configs = True
    #: rd_kafka_mock_broker_set_host_port: each node can name the proxy's port for itself.
    advertises_listeners = True
    #: A peer under test starts afresh for every case run (as kfake, Tansu).
    reusable = False
    ready_timeout = 30.0
    stop_grace = 5.0

    def __init__(self, debug: str | None = None) -> None:
        """debug: librdkafka debug contexts for the mock's log (e.g. "mock": every request)."""
        super().__init__()
        self.debug = debug
        self._answers: StdoutLines | None = None
        self._lock = threading.Lock()

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        if importlib.util.find_spec("confluent_kafka") is None:
            return False, f"confluent-kafka is not installed in {sys.executable}"
        if librdkafka_path() is None:
            return False, ("the confluent-kafka install bundles no librdkafka (confluent_kafka.libs/); "
                           "install the manylinux wheel pinned in pyproject")
        return True, librdkafka_version()

    @property
    def version(self) -> str:
        return librdkafka_version()

    # ----------------------------------------------------------------- launch
    def _launch(self, topology: Topology, broker_configs: dict[str, str], workdir: Path) -> None:
        argv = [sys.executable, "-m", "conformance.targets.mockhost", "--brokers", str(topology.nodes)]
        if self.debug:
            argv += ["--debug", self.debug]
        proc = NodeProcess(argv, workdir / "mock.log", cwd=workdir, env=python_env("conformance"),
                           stdout_pipe=True, stdin_pipe=True)
        # Registered before the node ids are known, so that stop() ends it whatever fails next.
        self.procs[-1] = proc
        proc.start()
        self._answers = StdoutLines(proc)
        try:
            lines = self._answers.read_until(lambda line: line == "ready", self.ready_timeout)
        except (TimeoutError, EOFError) as exc:
            raise TargetStartError(f"the librdkafka mock host did not start: {exc}") from None
        bootstrap = next((line.split(" ", 1)[1] for line in lines if line.startswith("bootstrap ")), "")
        seeds = [parse_listener(a) for a in bootstrap.split(",") if a]
        if not seeds:
            raise TargetStartError(f"the mock host announced no bootstrap address: {lines}")
        md = wait_until("mock Metadata", lambda: wire.metadata(seeds[0], []), self.ready_timeout)
        # In place: the proxy follows this very dict (runner/proxying.ProxyFront.follow).
        self.addresses.update(sorted(md.brokers.items()))
        self.procs = {min(self.addresses): self.procs.pop(-1)}
        self._apply_configs(broker_configs)

    def _apply_configs(self, broker_configs: dict[str, str]) -> None:
        self.unapplied_configs = {k: v for k, v in broker_configs.items() if k not in APPLIED_CONFIGS}
        if broker_configs.get("auto.create.topics.enable", "true").strip().lower() == "true":
            self.unapplied_configs.pop("auto.create.topics.enable", None)  # the mock's own behaviour
        delay = int(broker_configs.get("group.initial.rebalance.delay.ms", "0"))
        self.command("group_initial_rebalance_delay_ms", delay_ms=delay)
        for node in self.addresses:
            configs = {**broker_configs, **self.node_configs.get(node, {})}
            for key, value in self.node_configs.get(node, {}).items():
                if key not in APPLIED_CONFIGS:
                    self.unapplied_configs[key] = value
            if "advertised.listeners" in configs:
                host, port = parse_listener(configs["advertised.listeners"])
                self.command("set_host_port", broker=node, host=host, port=port)

    # ----------------------------------------------------------------- commands
    def command(self, op: str, **args) -> None:
        """Send one command to the mock host and wait for its answer; MockCommandError if refused."""
        proc = next(iter(self.procs.values()), None)
        if proc is None or not proc.running() or self._answers is None:
            raise MockCommandError(f"{op}: the mock host is not running")
        with self._lock:
            try:
                proc.popen.stdin.write((json.dumps({"op": op, **args}) + "\n").encode())
                proc.popen.stdin.flush()
            except OSError as exc:
                raise MockCommandError(f"{op}: cannot reach the mock host: {exc}") from exc
            try:
                line = self._answers.read_until(lambda _: True, COMMAND_TIMEOUT)[-1]
            except (TimeoutError, EOFError) as exc:
                raise MockCommandError(f"{op}: the mock host did not answer: {exc}") from None
        answer = json.loads(line)
        if not answer.get("ok"):
            raise MockCommandError(answer.get("error") or f"{op} failed")

    def set_partition_leader(self, topic: str, partition: int, node_id: int) -> None:
        self.command("partition_leader", topic=topic, partition=partition, broker=node_id)

    def set_coordinator(self, key_type: str, key: str, node_id: int) -> None:
        """key_type "group" or "transaction": FindCoordinator(key) answers node_id from now on."""
        self.command("coordinator_set", key_type=key_type, key=key, broker=node_id)

    def push_request_errors(self, api_key: int, errors: list[int], node_id: int | None = None) -> None:
        """The next len(errors) requests of api_key (to node_id, or to any node) are answered with
        these error codes in turn (0: handled normally); an erroring request is not applied."""
        self.command("push_request_errors", api_key=api_key, errors=list(errors), broker=node_id)

    def clear_request_errors(self, api_key: int) -> None:
        self.command("clear_request_errors", api_key=api_key)

    def set_apiversion(self, api_key: int, min_version: int, max_version: int) -> None:
        """What ApiVersions advertises for api_key (-1, -1: the API is gone)."""
        self.command("set_apiversion", api_key=api_key, min=min_version, max=max_version)

    def set_rtt(self, node_id: int, rtt_ms: int) -> None:
        """Delay every response of node_id by rtt_ms (the request is still handled at once)."""
        self.command("set_rtt", broker=node_id, rtt_ms=rtt_ms)

    # ----------------------------------------------------------------- topics
    def create_topics(self, topics: list[TopicSpec], timeout: float | None = None) -> None:
        """rd_kafka_mock_topic_create for each topic (the mock has no CreateTopics), then wait for
        leaders. A topic that exists with the same partition count is accepted."""
        if not topics:
            return
        with_configs = {t.name: t.configs for t in topics if t.configs}
        if with_configs:
            raise NotApplicable(f"the librdkafka mock cannot give topics configs {with_configs}: "
                                "rd_kafka_mock_topic_create takes only partitions and replication factor")
        nodes = len(self.addresses)
        for t in topics:
            try:
                self.command("topic_create", topic=t.name, partitions=t.partitions,
                             replication_factor=t.replication_factor or min(nodes, 3))
            except MockCommandError as exc:
                if not str(exc).startswith(TOPIC_ALREADY_EXISTS):
                    raise RuntimeError(f"creating topic {t.name!r} on the mock failed: {exc}") from None
                have = self._ask_live_nodes("Metadata", lambda a: wire.metadata(a, [t.name])).topics[t.name]
                if len(have.partitions) != t.partitions:
                    raise RuntimeError(f"topic {t.name!r} already exists with {len(have.partitions)} "
                                       f"partitions, the case needs {t.partitions}") from None
        self.wait_topics_ready(topics, timeout)

    # ----------------------------------------------------------------- node control
    def _node(self, node_id: int) -> None:
        if node_id not in self.addresses:
            raise KeyError(f"target {self.name!r} has no node {node_id}; nodes: {self.node_ids()}")

    def kill(self, node_id: int) -> None:
        """rd_kafka_mock_broker_set_down (module doc: a crash seen from the network)."""
        self._node(node_id)
        self.command("broker_down", broker=node_id)
        self.down.add(node_id)

    def restart(self, node_id: int, timeout: float | None = None) -> None:
        self._node(node_id)
        if node_id not in self.down or any(p.paused for p in self.procs.values()):
            raise NotApplicable(f"the librdkafka mock cannot restart node {node_id} while it runs: it has no "
                                "clean shutdown to stop it with first (only set_down, a crash)")
        self.command("broker_up", broker=node_id)
        self.wait_node_ready(node_id, timeout)
        self.down.discard(node_id)

    def stop_node(self, node_id: int) -> None:
        raise NotApplicable("the librdkafka mock has no clean shutdown of a node (Kafka's controlled shutdown "
                            "moves leadership away first); its only way to take a node away, set_down, is a crash")

    def _check_exact(self, node_id: int, action: str) -> None:
        """Only pause/resume signal the host process (kill and restart are mock commands)."""
        self._node(node_id)
        if len(self.addresses) > 1:
            raise NotApplicable(
                f"the librdkafka mock cannot {action} one node of {len(self.addresses)}: its brokers share one "
                "process, and its per-broker RTT only delays responses -- the requests are still handled at "
                "once, which a paused node does not do")
