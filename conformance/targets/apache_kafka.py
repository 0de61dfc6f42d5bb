"""Target `apache-kafka`: the real Apache Kafka broker (KRaft) from Maven Central.

Why: real Kafka is the reference -- where REFERENCE.md and Kafka disagree, Kafka wins. This
target runs the released broker jars with `java -cp lib/* kafka.Kafka server.properties`, one
JVM per node, all bound to 127.0.0.1 on ephemeral ports.

Topology choice. Every node is a *combined* node (process.roles=broker,controller) and the
controller quorum is static (controller.quorum.voters lists every node):
  - nodes=1: one JVM that is broker and (sole) controller;
  - nodes=3: three combined JVMs, a 3-voter quorum. Killing any one node leaves 2 of 3 voters,
    so the quorum (and a new active controller, when the killed node was the active one)
    survives, and the two other brokers take over its partitions and coordinators.
Three JVMs start faster and use less memory on a 2-core machine than the alternatives (3 brokers
plus 1 dedicated controller would be 4 JVMs; 3 dedicated controllers would be 6 JVMs). Kafka
advises against combined nodes in production for isolation reasons, which do not matter here.

Topology(controller="dedicated") is the other shape: N brokers (process.roles=broker, node ids
1..N, the nodes a case names) and one controller-only JVM (node id CONTROLLER_NODE_ID, the sole
voter, no client listener, never the object of a fault). Killing 2 of 3 brokers then leaves the
quorum whole, so the controller still shrinks ISRs and elects leaders -- which is what "the
transaction log under min ISR" (S23) and unclean leader election (S30) are about; with combined
nodes the same kill would take the quorum down and freeze the metadata instead.

Per-node configs (Target.start's node_configs) go into that node's server.properties only; the
proxy uses it to make every node advertise its own proxy port, so replica fetches and
WriteTxnMarkers between brokers cross the proxy too.

Defaults fit the node count (RF of the internal topics = min(nodes, 3), min ISR of the
transaction log 2 on 3 nodes) and make tests fast: no initial rebalance delay, a broker session
of 3 s with a 500 ms heartbeat so that a killed broker is fenced (and its coordinators and
partitions move) within seconds, few internal-topic partitions. The case's broker_configs
override any of them. Feature levels (transaction.version, group.version, ...) are not broker
configs in KRaft: they are set when the storage is formatted, so keys naming a feature go to
`kafka-storage format --feature`, and metadata.version goes to `--release-version`.

Releases before 3.0 (and `VERSION-zk`, conformance/targets/kafka_releases.py) run in ZooKeeper
mode: the target first starts a standalone ZooKeeper server on loopback (the
org.apache.zookeeper jar of the release's own classpath, ZooKeeperServerMain), then N brokers
(broker.id 1..N, zookeeper.connect naming it), no storage format. ZooKeeper is the metadata
quorum there and no fault touches it, so both topology shapes mean the same in this mode: the
controller is whichever broker ZooKeeper elected, and killing brokers never takes the quorum
down (what `controller: dedicated` asks for). Feature levels and metadata.version do not exist
in ZooKeeper mode: a case that sets one is not applicable there.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import time
import uuid
from pathlib import Path

from .. import buildcache, security
from ..properties import read_properties, write_properties
from .base import NotApplicable, TargetStartError, Topology, wait_until
from .topology import cluster_broker_defaults
from .local import LocalProcessTarget
from .kafka_releases import metadata_mode, release_of, version_tuple
from .maven import DEFAULT_KAFKA_VERSION, INSTALL_HINT, broker_artifact, cached_lib, resolve_kafka
from .process import NodeProcess, free_ports, port_accepts

#: Keys of broker_configs that are KRaft feature levels, set at format time.
FEATURE_KEYS = frozenset(
    {
        "transaction.version",
        "group.version",
        "share.version",
        "streams.version",
        "eligible.leader.replicas.version",
        "kraft.version",
    }
)
#: Node id of the controller-only JVM of a dedicated-controller topology (outside 1..N, so the
#: case's `node: N` and every broker id stay what they are in the combined shape).
CONTROLLER_NODE_ID = 1000
#: What kafka-storage format says when the release lacks a feature or a level of it (e.g. 3.9.1
#: has no group.version, and only unstable transaction.version levels): the case cannot run there.
UNSUPPORTED_FEATURE = re.compile(r"Unsupported feature: [^\n]*|No feature:\S+ with feature level \d+"
                                 # a storage tool older than the option itself (3.0-3.x: no --feature)
                                 r"|unrecognized arguments: '--(?:feature|release-version)'")
STORAGE_TOOL = "kafka.tools.StorageTool"
#: Broker configs that make a node's formatted directory more than meta.properties and the
#: feature levels (another metadata directory; a dynamic quorum's voter set): such a node is
#: formatted in place rather than as a copy (ApacheKafkaTarget._format).
FORMAT_IN_PLACE_KEYS = frozenset({"metadata.log.dir", "controller.quorum.bootstrap.servers"})
#: In a format template: this kind of node cannot be a copy, format each node in place.
IN_PLACE_MARK = "FORMAT_IN_PLACE"
MAIN_CLASS = "kafka.Kafka"
ZOOKEEPER_MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
#: ZooKeeper 3.4.11-3.4.14 (Kafka 1.1-2.3) register log4j 1.x's MBeans at start, and the
#: reload4j on the classpath has no org.apache.log4j.jmx: measured, they exit with
#: NoClassDefFoundError HierarchyDynamicMBean. Their own switch turns that off.
ZOOKEEPER_NO_LOG4J_MBEANS = "-Dzookeeper.jmx.log4j.disable=true"
HOST = "127.0.0.1"
#: Broker configs only KRaft knows; ZooKeeper mode replaces them (ZOOKEEPER_BROKER_DEFAULTS).
KRAFT_ONLY_DEFAULTS = ("broker.session.timeout.ms", "broker.heartbeat.interval.ms")
#: ZooKeeper mode's counterpart of the 3 s broker session: a killed broker's registration in
#: ZooKeeper expires, and the controller moves its leaderships, within seconds (the ZooKeeper
#: server's tickTime of 500 ms allows sessions from 1 s to 10 s).
ZOOKEEPER_BROKER_DEFAULTS = {"zookeeper.session.timeout.ms": "3000", "zookeeper.connection.timeout.ms": "30000"}
#: Broker configs that change transactional behaviour, by the release that introduced them.
#: Measured: idempotence/producer_expiry_* fail on 3.3.2 (producer state never expires) and pass
#: on 3.4.1 (KIP-854 separated producer.id.expiration.ms from transactional.id.expiration.ms).
CONFIG_SINCE = {"producer.id.expiration.ms": (3, 4), "producer.id.expiration.check.interval.ms": (3, 4)}
#: The first release whose KRaft controller acts on unclean.leader.election.enable (KAFKA-12670; in
#: ZooKeeper mode the controller always did): before it an out-of-sync replica is never made leader
#: automatically, whether the config is the broker's or the topic's.
FIRST_KRAFT_UNCLEAN_RELEASE = (3, 9)
UNCLEAN = "unclean.leader.election.enable"
#: The first KRaft release with an authorizer (StandardAuthorizer, KIP-801), and the first release
#: whose ZooKeeper-mode authorizer is AclAuthorizer (SimpleAclAuthorizer before).
FIRST_KRAFT_AUTHORIZER_RELEASE = (3, 2)
FIRST_ACL_AUTHORIZER_RELEASE = (2, 4)
#: Kafka's standard authorizer as a case names it (KRaft), and what stands for it in ZooKeeper mode.
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ZK_ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
ZK_SIMPLE_ACL_AUTHORIZER = "kafka.security.auth.SimpleAclAuthorizer"
ZOOKEEPER_TICK_MS = 500
#: The first release whose partition leaders verify transactional produces (KIP-890 part 1).
FIRST_VERIFYING_RELEASE = (3, 6)


def java_version() -> tuple[int, str] | None:
    """(major, full version string) of the `java` on PATH, or None when there is none."""
    java = shutil.which("java")
    if java is None:
        return None
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30
        ).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?[^"]*"', out)
    if not m:
        return None
    major = int(m.group(1))
    if major == 1 and m.group(2):  # "1.8.0_..."
        major = int(m.group(2))
    full = re.search(r'version "([^"]+)"', out).group(1)
    return major, full


def kafka_uuid() -> str:
    """A random Kafka Uuid in its string form (URL-safe base64 of 16 bytes, no padding).

    Kafka never hands out ids that start with '-' (they look like command-line flags).
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def sasl_broker_configs(sec: security.Security) -> dict[str, str]:
    """A KRaft broker's SASL settings for the run's client listener (named as its protocol): the
    enabled mechanism, and the JAAS config the broker logs in with to the other brokers over the
    same listener (its inter-broker listener; `listener.name.<l>.<mechanism>.sasl.jaas.config`).
    The users themselves are metadata, created at format time (``_run_format``). Over SASL_SSL
    the run's PEM keystore and truststore too: the brokers verify each other's certificate."""
    if not sec.sasl:
        return {}
    listener = sec.protocol.lower()
    return {"sasl.enabled.mechanisms": sec.mechanism,
            "sasl.mechanism.inter.broker.protocol": sec.mechanism,
            f"listener.name.{listener}.{sec.mechanism.lower()}.sasl.jaas.config":
                sec.client_properties()["sasl.jaas.config"],
            **sec.broker_tls_configs()}


#: The principal the nodes of a KRaft cluster with an authorizer speak to the controllers as.
CONTROLLER_PRINCIPAL = "kconform-controller"


def controller_sasl_configs(configs: dict[str, str], password: str) -> dict[str, str]:
    """A KRaft cluster of several nodes with the StandardAuthorizer: the controllers answer
    nothing but a super user's requests until they have loaded the ACLs (AuthorizerNotReady
    -- their first Vote requests failed and the nodes exited), and on a PLAINTEXT controller
    listener every node is User:ANONYMOUS, which as a super user would make every PLAINTEXT
    client one too. So the controller listener speaks SASL_PLAINTEXT with PLAIN and a user of
    its own (JAAS, no metadata needed) that ``super.users`` lists -- Kafka's documented set-up."""
    supers = [s for s in configs.get("super.users", "").split(";") if s.strip()]
    jaas = (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{CONTROLLER_PRINCIPAL}" '
            f'password="{password}" user_{CONTROLLER_PRINCIPAL}="{password}";')
    return {"sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config": jaas,
            "super.users": ";".join(supers + [f"User:{CONTROLLER_PRINCIPAL}"])}


def _listener_named(advertised: str, name: str) -> str:
    """``PLAINTEXT://h:p`` (the proxy's advertised listener) under the client listener's name."""
    return ",".join(f"{name}://{item.partition('://')[2]}" for item in advertised.split(","))


def default_broker_configs(nodes: int) -> dict[str, str]:
    return {
        **cluster_broker_defaults(nodes),
        # The log cleaner allocates its dedupe buffer on the heap at start-up (128 MiB default).
        "log.cleaner.dedupe.buffer.size": "16777216",
        "num.network.threads": "2",
        "num.io.threads": "4",
        "num.recovery.threads.per.data.dir": "1",
    }


class ApacheKafkaTarget(LocalProcessTarget):
    name = "apache-kafka"
    # wire_markers: Kafka's coordinator sends WriteTxnMarkers through the network client, even to
    # itself on one node, so proxy rules on WriteTxnMarkers act there.
    static_capabilities = frozenset(
        {"kill", "pause", "restart", "stop_node", "multi_node", "dedicated_controller", "wire_markers"}
    )
    per_node_configs = True
    advertises_listeners = True
    secures_listeners = True
    authenticates_own_requests = True
    #: Apache Kafka is what every other target is measured against.
    reference = True
    versioned = True
    #: One JVM serves many clients at once; parallel case runs without faults share it.
    shareable = True
    heavy_nodes = True
    ready_timeout = 120.0
    prewarm_coordinators = True
    stop_grace = 10.0
    #: When all nodes stop together, each controller's graceful Raft shutdown waits 5 s for
    #: voters that are themselves leaving; the data is not used again, so cut it short.
    cluster_stop_grace = 2.0

    def __init__(
        self,
        version: str = DEFAULT_KAFKA_VERSION,
        *,
        heap: str = "384m",
        jvm_options: list[str] | None = None,
        fast_startup: bool = True,
        prewarm_coordinators: bool | None = None,
    ) -> None:
        """version: a release on Maven Central; heap: -Xmx/-Xms of each node;
        jvm_options: replace the default GC/diagnostic flags; fast_startup: C1-only JIT (a
        faster start and less memory per node, docs/measurements.md; turn it off for
        throughput benchmarks, where C2 matters)."""
        super().__init__()
        self._version = version
        self.heap = heap
        self.jvm_options = list(jvm_options) if jvm_options is not None else [
            # GC threads sized for a 2-core machine running up to 3 JVMs.
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-XX:ParallelGCThreads=1",
            "-XX:ConcGCThreads=1",
            "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true",
        ]
        if fast_startup:
            self.jvm_options.append("-XX:TieredStopAtLevel=1")
        if prewarm_coordinators is not None:
            self.prewarm_coordinators = prewarm_coordinators
        self.cluster_id: str | None = None
        self.controller_ports: dict[int, int] = {}
        #: ZooKeeper mode: the ZooKeeper server the target started, and its client port.
        self.zookeeper: NodeProcess | None = None
        self.zookeeper_port: int | None = None
        self._zookeeper_stopped = False
        self.lib: Path | None = None

    @property
    def version(self) -> str:
        return self._version

    @property
    def metadata_mode(self) -> str:
        """"kraft" or "zookeeper" (kafka_releases.metadata_mode)."""
        return metadata_mode(self._version)

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        ok, detail = cls._availability_of(DEFAULT_KAFKA_VERSION)
        return ok, f"{detail}; apache-kafka@VERSION runs another release" if ok else detail

    def _available(self) -> tuple[bool, str]:
        return self._availability_of(self._version)

    @staticmethod
    def _availability_of(version: str) -> tuple[bool, str]:
        jv = java_version()
        if jv is None:
            return False, f"no `java` on PATH; install it with: {INSTALL_HINT}"
        if jv[0] < 17:
            return False, f"java {jv[1]} is too old (Kafka 4 brokers need 17+); install: {INSTALL_HINT}"
        if cached_lib(version) is not None:
            return True, f"Kafka {version} (cached), java {jv[1]}"
        if shutil.which("mvn") is None:
            return False, f"no `mvn` on PATH to fetch Kafka {version} from Maven Central; install: {INSTALL_HINT}"
        return True, f"Kafka {version} (resolved with mvn on first start), java {jv[1]}"

    # ----------------------------------------------------------------- launch
    def _java(self) -> str:
        return shutil.which("java") or "java"

    def _classpath(self) -> str:
        return str(self.lib / "*")

    def _node_dir(self, node_id: int) -> Path:
        return self.workdir / f"node-{node_id}"

    def _launch(self, topology: Topology, broker_configs: dict[str, str], workdir: Path) -> None:
        # A broker config younger than the release is accepted and silently ignored (nothing is
        # logged): name it, so a case that needs it is not applicable rather than failing.
        ver = version_tuple(self._version)
        self.unapplied_configs = {k: v for k, v in broker_configs.items()
                                  if k in CONFIG_SINCE and ver < CONFIG_SINCE[k]}
        if self.metadata_mode != "zookeeper" and ver < FIRST_KRAFT_UNCLEAN_RELEASE and UNCLEAN in broker_configs:
            self.unapplied_configs[UNCLEAN] = broker_configs[UNCLEAN]
        t0 = time.monotonic()
        self.lib = resolve_kafka(self._version)
        self.timings["resolve"] = round(time.monotonic() - t0, 3)
        if self.metadata_mode == "zookeeper":
            if security.current().sasl:
                raise NotApplicable(f"Kafka {self._version} runs in ZooKeeper mode here, where the target does not "
                                    f"set up {security.current().protocol} (SCRAM users live in ZooKeeper)")
            self._launch_zookeeper_mode(topology, broker_configs)
            return
        n = topology.nodes
        broker_ids = list(range(1, n + 1))
        dedicated = topology.controller == "dedicated"
        voter_ids = [CONTROLLER_NODE_ID] if dedicated else broker_ids
        ports = free_ports(n + len(voter_ids))
        client_ports = dict(zip(broker_ids, ports[:n]))
        self.controller_ports = dict(zip(voter_ids, ports[n:]))
        self.cluster_id = kafka_uuid()

        if broker_configs.get("authorizer.class.name") == STANDARD_AUTHORIZER and ver < FIRST_KRAFT_AUTHORIZER_RELEASE:
            raise NotApplicable(f"Kafka {self._version} in KRaft mode has no authorizer: the StandardAuthorizer "
                                f"(KIP-801) came in 3.2.0 (apache-kafka@{self._version}-zk runs its ZooKeeper one)")
        features = {k: v for k, v in broker_configs.items() if k in FEATURE_KEYS}
        release = broker_configs.get("metadata.version")
        configs = default_broker_configs(n)
        configs.update(
            {k: v for k, v in broker_configs.items() if k not in FEATURE_KEYS and k != "metadata.version"}
        )
        voters = ",".join(f"{i}@{HOST}:{self.controller_ports[i]}" for i in voter_ids)
        sec = security.current()
        client = sec.protocol     # the client listener's name and protocol: PLAINTEXT or SASL_PLAINTEXT
        secured_quorum = configs.get("authorizer.class.name") == STANDARD_AUTHORIZER and (n > 1 or dedicated)
        common = {
            "controller.quorum.voters": voters,
            "listener.security.protocol.map":
                f"{client}:{client},CONTROLLER:{'SASL_PLAINTEXT' if secured_quorum else 'PLAINTEXT'}",
            "controller.listener.names": "CONTROLLER",
        }
        if secured_quorum:
            configs.update(controller_sasl_configs(configs, secrets.token_urlsafe(18)))
        node_props: dict[int, dict[str, str]] = {}
        for i in broker_ids:
            listeners = [f"{client}://{HOST}:{client_ports[i]}"]
            if not dedicated:
                listeners.append(f"CONTROLLER://{HOST}:{self.controller_ports[i]}")
            node_props[i] = {
                "process.roles": "broker" if dedicated else "broker,controller",
                "node.id": str(i),
                **common,
                "listeners": ",".join(listeners),
                "advertised.listeners": f"{client}://{HOST}:{client_ports[i]}",
                "inter.broker.listener.name": client,
                **sasl_broker_configs(sec),
                **configs,
                **{k: _listener_named(v, client) if k == "advertised.listeners" else v
                   for k, v in self.node_configs.get(i, {}).items()},
            }
            self.addresses[i] = (HOST, client_ports[i])
        if dedicated:
            node_props[CONTROLLER_NODE_ID] = {
                "process.roles": "controller",
                "node.id": str(CONTROLLER_NODE_ID),
                **common,
                "listeners": f"CONTROLLER://{HOST}:{self.controller_ports[CONTROLLER_NODE_ID]}",
                # Broker-side settings the controller acts on (it decides unclean elections,
                # ISR shrinks and which brokers are fenced); it ignores the rest.
                **{k: v for k, v in configs.items() if k != "advertised.listeners"},
            }
        for i, props in node_props.items():
            d = self._node_dir(i)
            (d / "data").mkdir(parents=True, exist_ok=True)
            props["log.dirs"] = str(d / "data")
            write_properties(d / "server.properties", props)
            (d / "log4j2.properties").write_text(self._log4j2(d / "server.log"))
            (d / "log4j.properties").write_text(self._log4j1(d / "server.log"))

        t0 = time.monotonic()
        self._format(node_props, features, release)
        self.timings["format"] = round(time.monotonic() - t0, 3)

        # The controller first: brokers register with it as soon as they start.
        for i in sorted(node_props, reverse=dedicated):
            d = self._node_dir(i)
            proc = NodeProcess(self._broker_argv(d), d / "stdout.log", cwd=d, env=self._env())
            self.procs[i] = proc
            proc.start()
        for i in node_props:
            self._wait_listening(i)

    def topic_configs_reason(self, topics) -> str | None:
        """KRaft controllers before 3.9 ignore a topic's unclean.leader.election.enable, as they do
        the broker's (unapplied_configs)."""
        if self.metadata_mode == "zookeeper" or version_tuple(self._version) >= FIRST_KRAFT_UNCLEAN_RELEASE:
            return None
        if any(str(t.configs.get(UNCLEAN)).lower() == "true" for t in topics):
            return (f"Kafka {self._version}'s KRaft controller never elects an unclean leader by itself "
                    f"(KAFKA-12670, from 3.9.0; measured: 3.8.1 waits, 3.9.1 elects); "
                    f"the case's topics set {UNCLEAN}")
        return None

    def _discover_capabilities(self) -> None:
        super()._discover_capabilities()
        # KIP-890 part 1 came with 3.6.0, on unless the broker config turns it off.
        verifies = (version_tuple(self._version)[:2] >= FIRST_VERIFYING_RELEASE
                    and str(self.broker_configs.get("transaction.partition.verification.enable", "true")).lower() != "false")
        if verifies:
            self._discovered = self._discovered | {"txn_verification"}

    def _launch_zookeeper_mode(self, topology: Topology, broker_configs: dict[str, str]) -> None:
        """A ZooKeeper server, then N brokers registered in it (module doc)."""
        set_features = sorted(k for k in broker_configs if k in FEATURE_KEYS or k == "metadata.version")
        if set_features:
            raise NotApplicable(f"Kafka {self._version} runs in ZooKeeper mode, which has no feature levels or "
                                f"metadata.version; the case sets {', '.join(set_features)}")
        n = topology.nodes
        broker_ids = list(range(1, n + 1))
        ports = free_ports(n + 1)
        client_ports = dict(zip(broker_ids, ports[:n]))
        self.zookeeper_port = ports[n]
        self.controller_ports = {}
        zk_dir = self.workdir / "zookeeper"
        (zk_dir / "data").mkdir(parents=True, exist_ok=True)
        write_properties(zk_dir / "zookeeper.properties", {
            "dataDir": str(zk_dir / "data"),
            "clientPort": str(self.zookeeper_port),
            "clientPortAddress": HOST,
            "tickTime": str(ZOOKEEPER_TICK_MS),
            "maxClientCnxns": "0",
            # The AdminServer (3.5+) would open an HTTP port on every interface.
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "ruok,srvr",
        })
        (zk_dir / "log4j.properties").write_text(self._log4j1(zk_dir / "zookeeper.log"))
        (zk_dir / "log4j2.properties").write_text(self._log4j2(zk_dir / "zookeeper.log"))
        self.zookeeper = NodeProcess(
            [self._java(), "-Xmx128m", "-Xms128m", *self.jvm_options, *self._log_options(zk_dir),
             ZOOKEEPER_NO_LOG4J_MBEANS,
             "-cp", self._classpath(), ZOOKEEPER_MAIN_CLASS, str(zk_dir / "zookeeper.properties")],
            zk_dir / "stdout.log", cwd=zk_dir, env=self._env())
        self.zookeeper.start()

        def zk_up():
            if not self.zookeeper.running():
                raise TargetStartError(f"ZooKeeper exited with code {self.zookeeper.returncode()}:\n"
                                       f"{self.zookeeper.log_tail()}")
            return True if port_accepts(HOST, self.zookeeper_port) else None

        try:
            wait_until(f"ZooKeeper to listen on {self.zookeeper_port}", zk_up, self.ready_timeout)
        except TimeoutError as exc:
            raise TargetStartError(f"{exc}\n{self.zookeeper.log_tail()}") from None

        configs = {k: v for k, v in default_broker_configs(n).items() if k not in KRAFT_ONLY_DEFAULTS}
        configs.update(ZOOKEEPER_BROKER_DEFAULTS)
        configs.update(broker_configs)
        if configs.get("authorizer.class.name") == STANDARD_AUTHORIZER:
            # Kafka's standard authorizer in ZooKeeper mode: ACLs kept in ZooKeeper (KIP-504's
            # AclAuthorizer from 2.4, SimpleAclAuthorizer before), same semantics for a case's ACLs.
            ver = version_tuple(self._version)
            configs["authorizer.class.name"] = (ZK_ACL_AUTHORIZER if ver >= FIRST_ACL_AUTHORIZER_RELEASE
                                                else ZK_SIMPLE_ACL_AUTHORIZER)
        for i in broker_ids:
            d = self._node_dir(i)
            (d / "data").mkdir(parents=True, exist_ok=True)
            props = {
                "broker.id": str(i),
                "zookeeper.connect": f"{HOST}:{self.zookeeper_port}",
                "listeners": f"PLAINTEXT://{HOST}:{client_ports[i]}",
                "advertised.listeners": f"PLAINTEXT://{HOST}:{client_ports[i]}",
                **configs,
                **self.node_configs.get(i, {}),
                "log.dirs": str(d / "data"),
            }
            write_properties(d / "server.properties", props)
            (d / "log4j2.properties").write_text(self._log4j2(d / "server.log"))
            (d / "log4j.properties").write_text(self._log4j1(d / "server.log"))
            self.addresses[i] = (HOST, client_ports[i])
            self.procs[i] = NodeProcess(self._broker_argv(d), d / "stdout.log", cwd=d, env=self._env())
            self.procs[i].start()
        for i in broker_ids:
            self._wait_listening(i)

    def _broker_argv(self, d: Path) -> list[str]:
        return [
            self._java(),
            f"-Xmx{self.heap}",
            f"-Xms{self.heap}",
            *self.jvm_options,
            *self._log_options(d),
            f"-Dkafka.logs.dir={d}",
            "-cp",
            self._classpath(),
            MAIN_CLASS,
            str(d / "server.properties"),
        ]

    def _stop(self) -> None:
        super()._stop()
        if self.zookeeper is not None:
            # After the brokers: a broker that loses ZooKeeper first waits out its session.
            self._zookeeper_stopped = True
            self.zookeeper.terminate(self.stop_grace)

    def exited(self) -> str | None:
        if self.zookeeper is not None and not self._zookeeper_stopped and not self.zookeeper.running():
            return f"the ZooKeeper server's process {self.zookeeper.pid} exited with code {self.zookeeper.returncode()}"
        return super().exited()

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        # KAFKA_* variables of the caller's shell must not leak into the JVMs we configure.
        for key in ("KAFKA_OPTS", "KAFKA_HEAP_OPTS", "KAFKA_JVM_PERFORMANCE_OPTS", "JAVA_TOOL_OPTIONS", "CLASSPATH"):
            env.pop(key, None)
        return env

    def _format(self, node_props: dict[int, dict[str, str]], features: dict[str, str], release: str | None) -> None:
        """Format every node's log directory with Kafka's own storage tool -- once per kind of node.

        What kafka-storage format writes for a node is meta.properties (cluster.id, node.id, a
        random directory.id) and bootstrap.checkpoint (the feature levels: the release's and the
        case's). So the tool formats one node of each kind (process roles, release, features) into
        the cache, and every node of every later start gets a copy with its own meta.properties.
        Why: three format JVMs at every cluster start cost seconds of CPU and of the start, at
        every cluster start of a run (docs/measurements.md). A configuration the
        copy cannot stand for (its own metadata.log.dir, a dynamic quorum) is formatted in place.
        """
        # On a run over SASL every node is formatted in place with the run's SCRAM user
        # (--add-scram): a credential never goes into the shared cache of format templates.
        sec = security.current()
        in_place = [i for i, props in node_props.items() if sec.sasl or FORMAT_IN_PLACE_KEYS & set(props)]
        if in_place:
            self._run_format({i: self._node_dir(i) for i in in_place}, self.cluster_id, features, release,
                             scram=sec if sec.sasl else None)
        for i, props in node_props.items():
            if i in in_place:
                continue
            template = self._format_template(props, features, release)
            if (template / IN_PLACE_MARK).exists():
                # This release's format writes more than files (4.4's __cluster_metadata-0).
                self._run_format({i: self._node_dir(i)}, self.cluster_id, features, release)
                continue
            data = Path(props["log.dirs"])
            for f in template.iterdir():
                if f.is_file() and f.name not in ("meta.properties", buildcache.STAMP, "format.log"):
                    shutil.copy2(f, data / f.name)
            meta = read_properties(template / "meta.properties")
            meta.update({"node.id": str(i), "directory.id": kafka_uuid(), "cluster.id": self.cluster_id})
            write_properties(data / "meta.properties", meta)
            (self._node_dir(i) / "format.log").write_text(
                f"formatted as a copy of {template} (kafka-storage format's output for this kind of node):\n"
                + (template / "format.log").read_text(errors="replace"))

    def _format_template(self, props: dict[str, str], features: dict[str, str], release: str | None) -> Path:
        """The storage tool's output for a node like ``props``, made once into the cache."""
        kind = {"process.roles": props.get("process.roles", ""), "release": release or "",
                "features": sorted(features.items())}
        digest = hashlib.sha256(json.dumps(kind, sort_keys=True).encode()).hexdigest()[:16]

        def make(directory: Path) -> None:
            node = directory / "node"
            (node / "data").mkdir(parents=True)
            write_properties(node / "server.properties", {**props, "log.dirs": str(node / "data")})
            for name in ("log4j2.properties", "log4j.properties"):
                shutil.copy2(self.workdir / f"node-{props['node.id']}" / name, node / name)
            self._run_format({0: node}, kafka_uuid(), features, release)
            extra = [f for f in (node / "data").iterdir() if not f.is_file()]
            if extra:
                # Nothing but files is known to be node-independent (Kafka 4.4 writes the
                # bootstrap metadata into __cluster_metadata-0): nodes of this kind are
                # formatted in place, each with its own format run.
                (directory / IN_PLACE_MARK).write_text(f"kafka-storage format wrote directories {extra}\n")
                shutil.rmtree(node)
                return
            for f in (node / "data").iterdir():
                shutil.move(str(f), directory / f.name)
            shutil.move(str(node / "format.log"), directory / "format.log")
            shutil.rmtree(node)

        return buildcache.once(self.lib.parent / "formats" / digest, make)

    def _run_format(self, node_dirs: dict[int, Path], cluster_id: str, features: dict[str, str],
                    release: str | None, scram: security.Security | None = None) -> None:
        """kafka-storage format for each directory's server.properties, in parallel (short JVMs);
        ``scram``: the user to create (Kafka keeps SCRAM credentials in the metadata log, so a
        KRaft cluster gets its first ones at format time: --add-scram)."""
        running = []
        for i, d in node_dirs.items():
            argv = [
                self._java(), "-Xmx128m", "-XX:TieredStopAtLevel=1",
                *self._log_options(d),
                "-cp", self._classpath(), STORAGE_TOOL, "format",
                "--cluster-id", cluster_id,
                "--config", str(d / "server.properties"),
            ]
            if release:
                argv += ["--release-version", release]
            for k, v in sorted(features.items()):
                argv += ["--feature", f"{k}={v}"]
            if scram is not None:
                argv += ["--add-scram", f"{scram.mechanism}=[name={scram.username},password={scram.password}]"]
            out = open(d / "format.log", "wb")
            running.append((i, d, out, subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=self._env())))
        failures = []
        for i, d, out, p in running:
            try:
                rc = p.wait(timeout=120)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                rc = "timeout"
            out.close()
            if rc != 0:
                text = (d / "format.log").read_text(errors="replace")
                failures.append(f"node {i} (exit {rc}): {text.strip()[-2000:]}")
        if failures:
            unsupported = UNSUPPORTED_FEATURE.search("\n".join(failures))
            if unsupported and (features or release):
                levels = dict(features)
                if release:
                    levels["metadata.version"] = release
                raise NotApplicable(f"Kafka {self._version} cannot set the feature level(s) {levels}: "
                                    f"kafka-storage format says {unsupported.group(0)!r}")
            raise TargetStartError("kafka-storage format failed:\n" + "\n".join(failures))

    def _wait_listening(self, node_id: int) -> None:
        proc = self.procs[node_id]
        # A controller-only node has no client listener: its quorum port is what it opens.
        host, port = self.addresses.get(node_id) or (HOST, self.controller_ports[node_id])

        def probe():
            if not proc.running():
                raise TargetStartError(
                    f"Kafka node {node_id} exited with code {proc.returncode()}:\n"
                    f"{proc.log_tail()}\n--- server.log:\n{self._server_log_tail(node_id)}"
                )
            return True if port_accepts(host, port) else None

        try:
            wait_until(f"Kafka node {node_id} to listen on {port}", probe, self.ready_timeout)
        except TimeoutError as exc:
            raise TargetStartError(f"{exc}\n{self._server_log_tail(node_id)}") from None

    def _server_log_tail(self, node_id: int, lines: int = 30) -> str:
        try:
            text = (self._node_dir(node_id) / "server.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    @staticmethod
    def _log_options(node_dir: Path) -> list[str]:
        """Both logging configurations: Kafka 4 logs through log4j2, Kafka 3.x through log4j 1.x
        (reload4j); each reads its own property and ignores the other's."""
        return [f"-Dlog4j2.configurationFile={node_dir / 'log4j2.properties'}",
                f"-Dlog4j.configuration=file:{node_dir / 'log4j.properties'}"]

    @staticmethod
    def _log4j1(path: Path) -> str:
        """The same as _log4j2, for log4j 1.x (Kafka 3.x)."""
        return (
            "log4j.rootLogger=INFO, file\n"
            "log4j.appender.file=org.apache.log4j.FileAppender\n"
            f"log4j.appender.file.File={path}\n"
            "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
            "log4j.logger.kafka.request.logger=WARN\n"
        )

    @staticmethod
    def _log4j2(path: Path) -> str:
        """log4j2 configuration: everything at INFO to one file per node (no console output)."""
        return (
            "status = warn\n"
            "appender.file.type = File\n"
            "appender.file.name = FILE\n"
            f"appender.file.fileName = {path}\n"
            "appender.file.layout.type = PatternLayout\n"
            "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = INFO\n"
            "rootLogger.appenderRef.file.ref = FILE\n"
            # The request log is noise at INFO; state changes are what a failed case needs.
            "logger.request.name = kafka.request.logger\n"
            "logger.request.level = WARN\n"
        )

    def _relaunch(self, node_id: int) -> None:
        self.procs[node_id].start()
        self._wait_listening(node_id)

    def log_files(self) -> list[Path]:
        files = super().log_files()
        if self.workdir is not None:
            for i in sorted(self.procs):
                for name in ("server.log", "format.log"):
                    f = self._node_dir(i) / name
                    if f.exists():
                        files.append(f)
            for name in ("zookeeper.log", "stdout.log"):
                f = self.workdir / "zookeeper" / name
                if f.exists():
                    files.append(f)
        return files
