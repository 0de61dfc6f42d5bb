"""Helpers shared by the TransactionCoordinator tests: a real one-node Broker (its TopicRegistry,
PartitionLog, ProducerIdManager, the txn log on disk) serving on a loopback port -- its
coordinator's WriteTxnMarkers to itself answered in process (server/connection LocalRequests) -- the test
decorator that runs a coroutine in a nursery, and the steps most tests begin with."""

from __future__ import annotations

import trio

from broker_impl.config import BrokerConfig
from broker_impl.log import records as rec
from broker_impl.protocol.errors import Errors
from broker_impl.server.broker import Broker


class Node:
    """A Broker serving in a cancel scope of its own; ``crash`` drops it without a clean close."""

    def __init__(self, data_dir, port: int = 0, **configs):
        self.broker = Broker(BrokerConfig({"transaction.state.log.num.partitions": "3", **configs}), data_dir,
                             port=port)
        self._scope: trio.CancelScope | None = None

    @property
    def topics(self):
        return self.broker.topics

    @property
    def txn_coordinator(self):
        return self.broker.txn_coordinator

    @property
    def group_coordinator(self):
        return self.broker.group_coordinator

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        with trio.CancelScope() as self._scope:
            await self.broker.serve(task_status=task_status)

    def crash(self):
        """As kill -9: files closed as they are (no snapshot, no clean-shutdown marker), every task
        of the broker stopped at its next checkpoint."""
        for t in self.broker.topics.topics.values():
            for p in t.partitions:
                p.log.abandon()
        self._scope.cancel()


async def eventually(condition, step: float = 0.01, timeout: float = 5) -> None:
    """Poll ``condition()`` until it holds; fails the test after ``timeout`` seconds."""
    with trio.fail_after(timeout):
        while not condition():
            await trio.sleep(step)


async def started(tmp_path, nursery, topics: dict[str, int] | None = None, **configs) -> Node:
    """A node whose coordinator has loaded its log, with ``topics`` (name -> partitions) created."""
    node = Node(tmp_path, **configs)
    await nursery.start(node.run)
    await eventually(lambda: not node.txn_coordinator.txn_manager.loading)
    for name, partitions in (topics or {}).items():
        node.topics.create(name, partitions)
    return node


def produce(node, topic, partition, pid, epoch, seq, txn=True):
    plog = node.topics.partition(topic, partition).log
    batch = rec.build_batch([(b"k", b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                            is_transactional=txn)
    return plog.append(batch)


async def open_txn(node, tid, partitions, tv=None, timeout_ms=60000, records=True):
    """init_producer_id, AddPartitionsToTxn and (with ``records``) one record per partition: an
    Ongoing transaction; returns (coordinator, producer id, epoch)."""
    c = node.txn_coordinator
    r = await c.init_producer_id(tid, timeout_ms, None)
    _, pid, epoch = r.error, r.producer_id, r.producer_epoch
    extra = () if tv is None else (tv,)
    assert await c.add_partitions(tid, pid, epoch, set(partitions), *extra) == Errors.NONE
    if records:
        for topic, partition in sorted(partitions):
            produce(node, topic, partition, pid, epoch, 0)
    return c, pid, epoch


async def settle(coord):
    """Wait until every marker the coordinator sent is written."""
    await eventually(lambda: not coord.markers.in_flight)


def run(fn):
    """Turn ``async def test_x(tmp_path, nursery)`` into a pytest test taking ``tmp_path``: the
    coroutine runs under ``trio.run`` (real clock) in a nursery cancelled when it returns."""
    def wrapper(tmp_path):
        async def main():
            async with trio.open_nursery() as nursery:
                await fn(tmp_path, nursery)
                nursery.cancel_scope.cancel()
        trio.run(main)
    wrapper.__name__ = fn.__name__
    return wrapper
