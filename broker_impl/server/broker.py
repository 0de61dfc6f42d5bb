"""The embedded broker: one KRaft-less Kafka node on trio.

:class:`Broker` owns the durable state (topics and their logs, the group
coordinator's offsets) and the listening socket; request handling lives in
``broker_impl.handlers``. Everything runs on one trio thread, so state is
never shared between threads and the logs need no locks.
"""

from __future__ import annotations

import logging
import signal
from functools import partial
from pathlib import Path

import trio

from ..cluster.topics import TopicRegistry
from ..config import BrokerConfig
from ..coordinators.group import GroupCoordinator
from ..coordinators.producer_ids import ProducerIdManager
from ..coordinators.transaction import TransactionCoordinator
from ..faults import FAULTS
from ..handlers import load_all as load_handlers
from ..log.partition_log import PartitionLog
from .connection import serve_connection

log = logging.getLogger("kconform.broker")


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
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.topics = TopicRegistry(self.data_dir, lambda d, c: _open_partition_log(d, c, config))
        self._appended = trio.Event()
        self._hooks_closed: list = []
        self.nursery: trio.Nursery | None = None
        self.producer_ids = ProducerIdManager(self.data_dir)
        load_handlers()
        self.group_coordinator = GroupCoordinator(config, self.topics)
        FAULTS.configure(config.values)
        self.txn_coordinator = TransactionCoordinator(self)

    @property
    def advertised_address(self) -> tuple[str, int]:
        """What Metadata and FindCoordinator tell clients to connect to."""
        adv = self.config.str("advertised.listeners").strip()
        if not adv:
            return self.host, self.port
        hostport = adv.split(",")[0].split("://", 1)[-1]
        host, _, port = hostport.rpartition(":")
        return host, int(port)

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
        self.topics.load()

    def close(self) -> None:
        self.group_coordinator.close()
        self.topics.close()

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        self.open()
        try:
            async with trio.open_nursery() as nursery:
                self.nursery = nursery
                listeners = await nursery.start(
                    partial(trio.serve_tcp, lambda s: serve_connection(self, s), self.port, host=self.host))
                self.port = listeners[0].socket.getsockname()[1]
                await self.group_coordinator.start(nursery)
                await self.txn_coordinator.start(nursery)
                task_status.started(self.port)
        finally:
            self.close()


async def run(config: BrokerConfig, data_dir: Path, host: str, port: int, announce) -> None:
    """Serve until SIGTERM/SIGINT; ``announce(host, port)`` once listening."""
    broker = Broker(config, data_dir, host, port)
    async with trio.open_nursery() as nursery:
        bound = await nursery.start(broker.serve)
        announce(host, bound)
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("signal %s: shutting down", signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break
