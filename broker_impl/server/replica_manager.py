"""Kafka's ReplicaManager for the embedded broker: which partitions this broker leads or
follows, the fetchers that copy from the leaders, and the acks=all wait.

- ``apply_image``: each metadata image the controller publishes becomes what this broker does:
  topics appear and go (their logs with them), partitions this broker replicates get a log,
  become leader (Partition.make_leader) or follower (Partition.make_follower, then a fetcher for
  their leader: server/replica_fetcher), and the coordinators hear of every
  ``__transaction_state`` / ``__consumer_offsets`` partition they gain or lose (they load it, or
  drop its cache: coordinator failover).
- a follower's Fetch to this leader (``record_follower_fetch``) and a periodic ISR check (every
  ``replica.lag.time.max.ms`` / 2, Kafka's isr-expiration task) propose ISR changes; the
  proposals go to the controller as AlterPartition, the answers back to the partition.
- ``append`` / ``wait_for_acks``: the leader's side of Produce and of every coordinator's write.

A one-node broker (no ``controller.quorum.voters``) has no image: it leads every partition at
epoch 0, nobody fetches from it, and acks=all returns at once (Partition.replicated is False).
"""

from __future__ import annotations

import logging

import trio

from ..cluster.metadata_image import NO_LEADER, MetadataImage, PartitionRegistration
from ..cluster.partition import Partition, now_ms
from ..protocol.errors import Errors
from .broker_lifecycle import ControllerUnavailable
from .replica_fetcher import ReplicaFetcher

log = logging.getLogger("kconform.broker.replicas")


class ReplicaManager:
    def __init__(self, broker):
        self.broker = broker
        self.local_id = broker.node_id
        self.replicated = broker.is_cluster
        cfg = broker.config
        self.replica_lag_time_max_ms = cfg.int("replica.lag.time.max.ms")
        self.default_min_isr = cfg.int("min.insync.replicas")
        self.image = MetadataImage()
        self.fetchers: dict[int, ReplicaFetcher] = {}
        #: internal-topic partitions this broker leads, at which leader epoch (coordinators)
        self._coordinator_epochs: dict[tuple[str, int], int] = {}

    # ================================================================== partitions
    def new_partition(self, topic: str, index: int, log_=None) -> Partition:
        return Partition(topic, index, log_, self.local_id, replicated=self.replicated,
                         min_insync_replicas=self.default_min_isr,
                         replica_lag_time_max_ms=self.replica_lag_time_max_ms, broker_alive=self.broker_alive,
                         on_append=self.broker.notify_append)

    def broker_alive(self, broker_id: int) -> bool:
        if not self.replicated:
            return broker_id == self.local_id
        reg = self.image.brokers.get(broker_id)
        return reg is not None and reg.alive

    def live_brokers(self) -> list[tuple[int, str, int]]:
        """(id, host, port) of every unfenced broker, as Metadata and DescribeCluster list them."""
        if not self.replicated:
            host, port = self.broker.advertised_address
            return [(self.local_id, host, port)]
        return [(b.broker_id, b.host, b.port) for _, b in sorted(self.image.brokers.items()) if not b.fenced]

    def controller_id(self) -> int:
        """What Metadata names as controller: in KRaft an alive broker (clients send admin
        requests there, and it forwards them), here the lowest one."""
        live = self.live_brokers()
        return live[0][0] if live else -1

    def endpoint(self, node_id: int) -> tuple[str, int] | None:
        """Where ``node_id`` listens (its advertised listener, which a proxy may stand on)."""
        if not self.replicated and node_id == self.local_id:
            return self.broker.advertised_address
        reg = self.image.brokers.get(node_id)
        return None if reg is None else (reg.host, reg.port)

    def _min_isr(self, configs: dict[str, str]) -> int:
        return int(configs.get("min.insync.replicas", self.default_min_isr))

    # ================================================================== the image
    def apply_image(self, image: MetadataImage) -> None:
        self.image = image
        topics = self.broker.topics
        for name in [n for n in topics.topics if n not in image.topics]:
            log.info("topic %s deleted", name)
            self._stop_fetching_topic(name)
            topics.drop(name)
            self._coordinators_lost(name)
            self.broker.group_coordinator.on_topics_deleted({name})
        for ti in image.topics.values():
            topic = topics.put(ti.name, ti.topic_id, ti.configs, len(ti.partitions))
            for i, reg in enumerate(ti.partitions):
                part = topic.partitions[i]
                part.min_insync_replicas = self._min_isr(ti.configs)
                if self.local_id not in reg.replicas:
                    part.update_registration(reg)
                    continue
                if part.log is None:
                    part.log = topics.open_log(topic, i)
                if reg.leader == self.local_id:
                    self._stop_fetching(part)
                    if part.make_leader(reg):
                        log.info("%s-%d: leader at epoch %d (ISR %s)", ti.name, i, reg.leader_epoch, reg.isr)
                else:
                    if part.make_follower(reg):
                        self._stop_fetching(part)
                        if reg.leader != NO_LEADER:
                            self._fetcher_for(reg.leader).add(part, reg.leader_epoch)
                            log.info("%s-%d: following %d at epoch %d", ti.name, i, reg.leader, reg.leader_epoch)
                self._coordinator_role(ti.name, i, reg)
        for leader_id in [lid for lid, f in self.fetchers.items() if not f.partitions]:
            self.fetchers.pop(leader_id).stop()
        self.broker.notify_append()   # long polls re-check leadership and high watermarks

    def _fetcher_for(self, leader_id: int) -> ReplicaFetcher:
        fetcher = self.fetchers.get(leader_id)
        if fetcher is None:
            fetcher = self.fetchers[leader_id] = ReplicaFetcher(self.broker, leader_id)
            self.broker.nursery.start_soon(fetcher.run)
        return fetcher

    def _stop_fetching(self, part: Partition) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(part.topic, part.index)

    def _stop_fetching_topic(self, name: str) -> None:
        topic = self.broker.topics.get(name)
        if topic is not None:
            for part in topic.partitions:
                self._stop_fetching(part)

    # ================================================================== coordinators
    def _coordinator_role(self, topic: str, index: int, reg: PartitionRegistration) -> None:
        """The coordinators follow the leadership of their internal partitions: elected (load,
        at the partition's leader epoch) or resigned (drop the cache)."""
        coordinator = self.broker.coordinator_for_topic(topic)
        if coordinator is None:
            return
        key = (topic, index)
        if reg.leader == self.local_id:
            if self._coordinator_epochs.get(key) != reg.leader_epoch:
                self._coordinator_epochs[key] = reg.leader_epoch
                coordinator.on_elected(index, reg.leader_epoch)
        elif key in self._coordinator_epochs:
            del self._coordinator_epochs[key]
            coordinator.on_resigned(index)

    def _coordinators_lost(self, topic: str) -> None:
        coordinator = self.broker.coordinator_for_topic(topic)
        for key in [k for k in self._coordinator_epochs if k[0] == topic]:
            del self._coordinator_epochs[key]
            if coordinator is not None:
                coordinator.on_resigned(key[1])

    # ================================================================== the leader's side
    def leader_hint(self, part: Partition) -> tuple[int, int, str, int] | None:
        """(leader id, leader epoch, host, port) of the partition's alive leader, for the
        NOT_LEADER_OR_FOLLOWER answers that name it (KIP-951); None when there is none."""
        if part.leader < 0 or not self.broker_alive(part.leader):
            return None
        host, port = self.endpoint(part.leader)
        return part.leader, part.leader_epoch, host, port

    def record_follower_fetch(self, part: Partition, replica_id: int, fetch_offset: int) -> None:
        """A follower's Fetch reached the leader: its log end offset, maybe an ISR proposal,
        maybe a higher HW (consumers in long poll are woken)."""
        hw = part.log.high_watermark
        proposal = part.update_follower_fetch_state(replica_id, fetch_offset)
        if proposal is not None:
            self.broker.nursery.start_soon(self._alter_partition, part, proposal)
        if part.log.high_watermark != hw:
            self.broker.notify_append()

    async def run_isr_expiration(self) -> None:
        """Kafka's isr-expiration task: every replica.lag.time.max.ms / 2."""
        interval = max(self.replica_lag_time_max_ms / 2000.0, 0.05)
        while True:
            await trio.sleep(interval)
            now = now_ms()
            for topic in list(self.broker.topics.topics.values()):
                for part in topic.partitions:
                    proposal = part.maybe_shrink_isr(now)
                    if proposal is not None:
                        log.info("%s-%d: shrinking ISR from %s to %s", part.topic, part.index, part.isr, proposal)
                        self.broker.nursery.start_soon(self._alter_partition, part, proposal)

    async def _alter_partition(self, part: Partition, isr: list[int]) -> None:
        lifecycle = self.broker.lifecycle
        try:
            r = await lifecycle.request("alter_partition", broker_id=self.local_id, broker_epoch=lifecycle.broker_epoch,
                                        topic=part.topic, partition=part.index, leader_epoch=part.leader_epoch,
                                        partition_epoch=part.partition_epoch, isr=isr)
        except ControllerUnavailable as exc:
            log.warning("%s-%d: AlterPartition %s not sent: %s", part.topic, part.index, isr, exc)
            part.on_alter_partition_response(Errors.REQUEST_TIMED_OUT, None)
            return
        err = Errors(r["error"])
        reg = PartitionRegistration(**r["partition"]) if r.get("partition") else None
        if err != Errors.NONE:
            log.info("%s-%d: AlterPartition %s refused: %s", part.topic, part.index, isr, err.name)
        part.on_alter_partition_response(err, reg)
        self.broker.notify_append()

    # ================================================================== appends
    async def wait_for_acks(self, waits: list[tuple[Partition, int]], timeout_ms: int) -> list[Errors]:
        """acks=all for several partitions at once (DelayedProduce): for each (partition, offset
        after its append) the error it ends with, all within one timeout."""
        results: list[Errors] = [Errors.NONE] * len(waits)
        pending = []
        for i, (part, required) in enumerate(waits):
            done, err = part.check_enough_replicas_reach_offset(required)
            if done or err != Errors.NONE:
                results[i] = err
            else:
                pending.append(i)
        if not pending:
            return results      # a one-node broker always, a cluster when the ISR is the leader

        async def one(i: int) -> None:
            part, required = waits[i]
            results[i] = await part.wait_for_replication(required, timeout_ms)

        async with trio.open_nursery() as nursery:
            for i in pending:
                nursery.start_soon(one, i)
        return results
