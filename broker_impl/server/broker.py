"""The embedded broker: a Kafka node on trio -- the whole cluster by itself, or one broker of a
cluster whose controller is another process.

:class:`Broker` owns the durable state (topics and their logs, the coordinators' internal
topics) and the listening socket; request handling lives in ``broker_impl.handlers``.
Everything runs on one trio thread, so state is never shared between threads and the logs need
no locks.

Alone (no ``controller.quorum.voters``): it is its own controller, as Kafka's combined node is
-- topics and their leader epochs in ``topics.json``, every partition led here, no replication;
it is fenced from opening its port until it elects itself, and resigns everything at a clean
stop (``serve``, ``shutdown``).
In a cluster: it registers with the controller (server/broker_lifecycle), learns topics and
leaders from the controller's metadata image, replicates (server/replica_manager,
server/replica_fetcher) and its coordinators follow the leadership of their internal
partitions. It announces itself only once the controller unfenced it.

``process.roles=controller`` makes the process the cluster's controller instead
(server/controller_server).
"""

from __future__ import annotations

import json
import logging
import signal
from functools import partial
from pathlib import Path

import trio

from ..cluster.durable_file import replace_durably
from ..cluster.topics import TopicRegistry
from ..config import BrokerConfig, ConfigError
from ..coordinators.group import GroupCoordinator
from ..coordinators.group_store import OFFSETS_TOPIC
from ..coordinators.producer_ids import ProducerIdManager, RPCProducerIdManager
from ..coordinators.transaction import TransactionCoordinator
from ..coordinators.transaction_log import TRANSACTION_STATE_TOPIC
from ..faults import FAULTS
from ..handlers import load_all as load_handlers
from ..log.partition_log import PartitionLog
from ..protocol.errors import Errors
from .add_partitions_manager import AddPartitionsToTxnManager
from .authenticator import SaslUsers
from ..cluster.authorizer import StandardAuthorizer
from ..cluster.scram import ScramCredentials
from .broker_lifecycle import CONTROLLED_SHUTDOWN_RECHECK_S, BrokerLifecycleManager, ControllerUnavailable
from .connection import LocalRequests, serve_connection
from .controller_server import ControllerServer
from .listeners import inter_broker_listener, parse_listeners
from .fetch_session import FetchSessionCache
from .replica_manager import ReplicaManager
from .topic_creation import TopicCreator

log = logging.getLogger("kconform.broker")

#: A one-node broker's cluster-wide dynamic broker configs (Kafka keeps them in its metadata log).
DYNAMIC_CONFIGS_FILE = "dynamic_broker_configs.json"
#: How long a broker of a cluster waits for the controller to unfence it before giving up.
STARTUP_TIMEOUT_S = 120.0


def _open_partition_log(directory: Path, topic_configs: dict, broker_config: BrokerConfig) -> PartitionLog:
    return PartitionLog(directory, broker_config.log_config(topic_configs))


class Broker:
    def __init__(self, config: BrokerConfig, data_dir: Path, host: str = "127.0.0.1", port: int = 9092):
        self.config = config
        self.node_id = config.int("node.id")
        self.cluster_id = config.str("cluster.id")
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port
        self.connections: dict[int, str] = {}
        self.local_requests = LocalRequests(self)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        #: one broker of a cluster with a controller elsewhere (else: the whole cluster)
        self.is_cluster = bool(config.str("controller.quorum.voters").strip())
        #: the configs it started with; ``config.values`` holds them under the cluster-wide dynamic
        #: ones (IncrementalAlterConfigs on the BROKER resource ""), which a one-node broker keeps in
        #: DYNAMIC_CONFIGS_FILE and a broker of a cluster takes from the metadata image
        self.static_configs = dict(config.values)
        self.dynamic_configs: dict[str, str] = {}
        self._dynamic_file = self.data_dir / DYNAMIC_CONFIGS_FILE
        if not self.is_cluster and self._dynamic_file.exists():
            self.dynamic_configs = json.loads(self._dynamic_file.read_text())
            config.values.update(self.dynamic_configs)
        self.listeners = parse_listeners(config, host, port)
        self.inter_broker_listener = inter_broker_listener(config, self.listeners)
        if self.is_cluster and self.inter_broker_listener.protocol != "PLAINTEXT":
            raise ConfigError(f"a broker of a cluster needs a PLAINTEXT inter-broker listener (inter.broker.listener.name; "
                              f"{self.inter_broker_listener.name} is {self.inter_broker_listener.protocol}): the brokers' "
                              "replication and marker connections do not speak TLS or SASL")
        self.sasl_users = SaslUsers(config) if any(x.sasl for x in self.listeners) else None
        #: SCRAM credentials (AlterUserScramCredentials changes them): a cluster's come with its
        #: metadata image, a one-node broker keeps its own
        self.scram_credentials = self.sasl_users.store.scram_credentials if self.sasl_users else ScramCredentials()
        if not self.is_cluster:
            self.scram_credentials.open_file(self.data_dir)
        self.authorizer = StandardAuthorizer.from_config(config, self.data_dir, self.is_cluster)
        self.replica_manager = ReplicaManager(self)
        #: KIP-227's sessions live in memory: a restarted broker knows none (FETCH_SESSION_ID_NOT_FOUND)
        self.fetch_sessions = FetchSessionCache(config.int("max.incremental.fetch.session.cache.slots"))
        self.topics = TopicRegistry(self.data_dir, lambda d, c: _open_partition_log(d, c, config),
                                    self.replica_manager.new_partition, creates_topics=not self.is_cluster,
                                    log_config=config.log_config)
        self._appended = trio.Event()
        #: set once the broker may answer requests: at once alone, after its first metadata
        #: catch-up in a cluster (server/broker_lifecycle)
        self.requests_enabled = trio.Event()
        if not self.is_cluster:
            self.requests_enabled.set()
        self._hooks_closed: list = []
        self.nursery: trio.Nursery | None = None
        self.lifecycle = BrokerLifecycleManager(self) if self.is_cluster else None
        self.topic_creator = TopicCreator(self)
        if self.is_cluster:
            self.producer_ids = RPCProducerIdManager(self._allocate_producer_ids, self._spawn)
        else:
            self.producer_ids = ProducerIdManager(self.data_dir)
        load_handlers()
        self.group_coordinator = GroupCoordinator(config, self.topics, self.replica_manager)
        FAULTS.configure(config.values)
        self.txn_coordinator = TransactionCoordinator(self)
        self.add_partitions_manager = AddPartitionsToTxnManager(self)

    @property
    def advertised_address(self) -> tuple[str, int]:
        """What Metadata and FindCoordinator tell clients to connect to."""
        adv = self.config.str("advertised.listeners").strip()
        if not adv:
            return self.host, self.port
        hostport = adv.split(",")[0].split("://", 1)[-1]
        host, _, port = hostport.rpartition(":")
        return host, int(port)

    @property
    def inter_broker_address(self) -> tuple[str, int]:
        """Where the other brokers dial this one: the advertised address when the inter-broker
        listener is the clients' (the first), else that listener's own bound address."""
        if self.inter_broker_listener is self.listeners[0]:
            return self.advertised_address
        return self.inter_broker_listener.host, self.inter_broker_listener.port

    def coordinator_for_topic(self, topic: str):
        """The coordinator whose state lives in ``topic`` (None for any other topic)."""
        if topic == TRANSACTION_STATE_TOPIC:
            return self.txn_coordinator
        if topic == OFFSETS_TOPIC:
            return self.group_coordinator
        return None

    def _spawn(self, async_fn, *args) -> None:
        self.nursery.start_soon(async_fn, *args)

    async def _allocate_producer_ids(self) -> tuple[int, int]:
        r = await self.lifecycle.request("allocate_producer_ids", broker_id=self.node_id,
                                         broker_epoch=self.lifecycle.broker_epoch)
        if r["error"] != Errors.NONE:
            raise ControllerUnavailable(f"AllocateProducerIds: {Errors(r['error']).name}")
        return r["first"], r["size"]

    def apply_dynamic_configs(self, configs: dict[str, str]) -> None:
        """New cluster-wide dynamic broker configs take effect at once: the topic defaults they
        supply reach every open log without a value of its own, and every partition's
        min.insync.replicas (Kafka's DynamicLogConfig reconfiguration)."""
        self.dynamic_configs = dict(configs)
        self.config.values.clear()
        self.config.values.update(self.static_configs, **self.dynamic_configs)
        rm = self.replica_manager
        rm.default_min_isr = self.config.int("min.insync.replicas")
        for topic in list(self.topics.topics.values()):
            self.topics.reconfigure(topic, topic.configs)
            for part in topic.partitions:
                part.min_insync_replicas = int(topic.configs.get("min.insync.replicas", rm.default_min_isr))

    def save_dynamic_configs(self, configs: dict[str, str]) -> None:
        """A one-node broker's change of its dynamic configs: kept for the next start, applied."""
        replace_durably(self._dynamic_file, json.dumps(configs))
        self.apply_dynamic_configs(configs)

    # -- notifications ---------------------------------------------------
    def notify_append(self) -> None:
        """Wake fetches waiting in long poll (max_wait_ms / min_bytes)."""
        self._appended.set()
        self._appended = trio.Event()

    async def wait_for_append(self) -> None:
        await self._appended.wait()

    def connection_closed(self, conn_id: int) -> None:
        for hook in self._hooks_closed:
            hook(conn_id)

    # -- lifecycle --------------------------------------------------------
    def open(self) -> None:
        """Open the logs and lead at once (a one-node broker that no client reaches yet)."""
        if not self.is_cluster:
            self.topics.load()
            self.topics.unfence_now()

    def close(self) -> None:
        self.group_coordinator.close()
        self.topics.close()

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Listen, then start as Kafka's node does, and report the port once started. Alone, the
        node is its own controller (Kafka's combined node): its logs are opened fenced, the
        listener opens, then it is unfenced -- the election recorded, the partitions led, the
        coordinators elected and loading -- so clients reaching it meanwhile are answered
        NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS, as Kafka's are
        after a restart. In a cluster it announces itself once the controller unfenced it."""
        if not self.is_cluster:
            self.topics.load()
        try:
            async with trio.open_nursery() as nursery:
                self.nursery = nursery
                for i, listener in enumerate(self.listeners):
                    bound = await nursery.start(partial(
                        trio.serve_tcp, partial(serve_connection, self, listener=listener), listener.port,
                        host=listener.host))
                    listener.port = bound[0].socket.getsockname()[1]
                    if i == 0:   # the first listener is the broker's address (server/listeners)
                        self.host, self.port = listener.host, listener.port
                await self.group_coordinator.start(nursery, owns_all=False)
                await self.txn_coordinator.start(nursery, owns_all=False)
                if self.is_cluster:
                    nursery.start_soon(self.lifecycle.run)
                    nursery.start_soon(self.replica_manager.run_isr_expiration)
                    with trio.fail_after(STARTUP_TIMEOUT_S):
                        await self.lifecycle.ready.wait()
                else:
                    await self.topics.unfence()
                    self.group_coordinator.elect_all()
                    self.txn_coordinator.elect_all()
                task_status.started(self.port)
        finally:
            self.close()

    async def shutdown(self) -> None:
        """Before a clean stop, Kafka's controlled shutdown: the leaderships move away first.
        Alone, the node's own controller leaves every partition leaderless and the coordinators
        resign; the broker goes on answering (LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER,
        NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE) until the controller lets it stop, which
        Kafka's BrokerLifecycleManager asks again CONTROLLED_SHUTDOWN_RECHECK_S after the first
        answer (measured on 4.3.1, one node: about 80 ms of these answers before the port
        closes)."""
        if self.lifecycle is not None:
            await self.lifecycle.controlled_shutdown()
            return
        self.topics.resign_for_shutdown()
        self.group_coordinator.resign_all()
        self.txn_coordinator.resign_all()
        await trio.sleep(CONTROLLED_SHUTDOWN_RECHECK_S)


async def run(config: BrokerConfig, data_dir: Path, host: str, port: int, announce) -> None:
    """Serve until SIGTERM/SIGINT; ``announce(host, port)`` once listening (a broker of a cluster:
    once unfenced). ``process.roles=controller`` serves the controller instead."""
    is_controller = config.str("process.roles").strip() == "controller"
    server = ControllerServer(config, data_dir, host, port) if is_controller else Broker(config, data_dir, host, port)
    async with trio.open_nursery() as nursery:
        bound = await nursery.start(server.serve)
        announce(host, bound)
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("signal %s: shutting down", signal.Signals(signum).name)
                if not is_controller:
                    with trio.move_on_after(10):
                        await server.shutdown()
                nursery.cancel_scope.cancel()
                break
