"""Kafka's ReplicaManager for the embedded broker: which partitions this broker leads or
follows, the fetchers that copy from the leaders, and every append as a leader.

- ``apply_image``: each metadata image the controller publishes becomes what this broker does:
  topics appear and go (their logs with them), partitions this broker replicates get a log,
  become leader (Partition.make_leader) or follower (Partition.make_follower, then a fetcher for
  their leader: server/replica_fetcher), and the coordinators hear of every
  ``__transaction_state`` / ``__consumer_offsets`` partition they gain or lose (they load it, or
  drop its cache: coordinator failover).
- a follower's Fetch to this leader (``record_follower_fetch``) and a periodic ISR check (every
  ``replica.lag.time.max.ms`` / 2, Kafka's isr-expiration task) propose ISR changes; the
  proposals go to the controller as AlterPartition, the answers back to the partition.
- ``append_records``: the one append path as a leader -- Produce, WriteTxnMarkers, the
  transaction log, and (its two halves, ``append_records_to_leader`` and ``wait_for_acks``) the
  group coordinator's writes. In order: the KIP-890 verification of transactional batches with
  their coordinator (server/add_partitions_manager), the leader's append (cluster/partition:
  leadership, min ISR; log/partition_log: validation, producer state, the write), the one
  mapping of any refusal to a partition error (``append_error``), and for acks=all the wait
  until the ISR has the records.

A one-node broker (no ``controller.quorum.voters``) has no image: it leads every partition at
epoch 0, nobody fetches from it, and acks=all returns at once (Partition.replicated is False).
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from ..cluster.append import PartitionResponse, TransactionSupportedOperation, TxnVerification
from ..cluster.metadata_image import NO_LEADER, MetadataImage, PartitionRegistration
from ..cluster.partition import Partition, now_ms
from ..log import records as rec
from ..log.errors import (
    CorruptRecordError,
    InvalidRequestRecordsError,
    InvalidTimestampError,
    KafkaStorageError,
    LogError,
    MessageTooLargeError,
    RecordListTooLargeError,
)
from ..log.producer_state import AppendOrigin
from ..protocol.errors import Errors, KafkaError
from .broker_lifecycle import ControllerUnavailable
from .replica_fetcher import ReplicaFetcher

log = logging.getLogger("kconform.broker.replicas")

#: Log errors for records that never reached the partition's log, answered without its log start
#: offset (appendToLocalLog's first catch; ProduceRequest.validateRecords' INVALID_RECORD too).
_BEFORE_THE_LOG = (MessageTooLargeError, RecordListTooLargeError, CorruptRecordError, KafkaStorageError,
                   InvalidRequestRecordsError)
#: Kafka's message for a transactional batch to a partition the transaction does not have.
NOT_IN_TRANSACTION = "Partition was not added to the transaction"
#: Verification errors a producer of any version retries (postVerificationCallback maps them to
#: NOT_ENOUGH_REPLICAS; CONCURRENT_TRANSACTIONS too, below TV2).
_RETRY_AS_NOT_ENOUGH_REPLICAS = frozenset({
    Errors.NETWORK_EXCEPTION, Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_COORDINATOR})


#: Refusals of a partition this broker does not lead or know (Kafka's first catch in
#: appendToLocalLog: UNKNOWN_LOG_APPEND_INFO, no log start offset).
_NOT_LED_HERE = frozenset({Errors.NOT_LEADER_OR_FOLLOWER, Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.UNKNOWN_TOPIC_ID})
#: postVerificationCallback's message for a verification error it answers NOT_ENOUGH_REPLICAS.
UNVERIFIED = "Unable to verify the partition has been added to the transaction. Underlying error: {}"


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
        #: ISR proposals not yet sent, and whether an AlterPartition is in flight (_propose_isr)
        self._isr_proposals: dict[tuple[str, int], tuple[Partition, list[int]]] = {}
        self._alter_in_flight = False

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

    def inter_broker_endpoint(self, node_id: int) -> tuple[str, int] | None:
        """Where this broker dials ``node_id`` for its own requests (replica fetches, markers,
        verification): the node's inter-broker listener (inter.broker.listener.name)."""
        if not self.replicated and node_id == self.local_id:
            return self.broker.inter_broker_address
        reg = self.image.brokers.get(node_id)
        return None if reg is None else reg.inter_broker_endpoint

    def _min_isr(self, configs: dict[str, str]) -> int:
        return int(configs.get("min.insync.replicas", self.default_min_isr))

    # ================================================================== the image
    def apply_image(self, image: MetadataImage) -> None:
        self.image = image
        topics = self.broker.topics
        if image.broker_defaults != self.broker.dynamic_configs:
            self.broker.apply_dynamic_configs(image.broker_defaults)
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

    def record_follower_fetch(self, part: Partition, replica_id: int, fetch_offset: int,
                              log_start_offset: int = -1) -> None:
        """A follower's Fetch reached the leader: its log end offset, maybe an ISR proposal,
        maybe a higher HW (consumers in long poll are woken)."""
        hw = part.log.high_watermark
        proposal = part.update_follower_fetch_state(replica_id, fetch_offset, log_start_offset=log_start_offset)
        if proposal is not None:
            self._propose_isr(part, proposal)
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
                        self._propose_isr(part, proposal)

    def _propose_isr(self, part: Partition, isr: list[int]) -> None:
        """Queue an ISR proposal for the controller. As Kafka's AlterPartitionManager: one
        AlterPartition in flight per broker, carrying every proposal queued meanwhile -- a
        restarted follower catches up on every partition at once, and the controller commits
        the whole batch as one metadata change."""
        self._isr_proposals[(part.topic, part.index)] = (part, isr)
        if not self._alter_in_flight:
            self._alter_in_flight = True
            self.broker.nursery.start_soon(self._send_isr_proposals)

    async def _send_isr_proposals(self) -> None:
        lifecycle = self.broker.lifecycle
        try:
            while self._isr_proposals:
                batch = list(self._isr_proposals.values())
                self._isr_proposals = {}
                items = [{"topic": p.topic, "partition": p.index, "leader_epoch": p.leader_epoch,
                          "partition_epoch": p.partition_epoch, "isr": isr} for p, isr in batch]
                try:
                    r = await lifecycle.request("alter_partitions", broker_id=self.local_id,
                                                broker_epoch=lifecycle.broker_epoch, items=items)
                except ControllerUnavailable as exc:
                    for part, isr in batch:
                        log.warning("%s-%d: AlterPartition %s not sent: %s", part.topic, part.index, isr, exc)
                        part.on_alter_partition_response(Errors.REQUEST_TIMED_OUT, None)
                    continue
                # a refusal of the whole request (a malformed one) answers every item with its error
                results = r.get("results") or [{"error": r.get("error", int(Errors.UNKNOWN_SERVER_ERROR))}] * len(batch)
                for (part, isr), res in zip(batch, results):
                    err = Errors(res["error"])
                    reg = PartitionRegistration(**res["partition"]) if res.get("partition") else None
                    if err != Errors.NONE:
                        log.info("%s-%d: AlterPartition %s refused: %s", part.topic, part.index, isr, err.name)
                    part.on_alter_partition_response(err, reg)
                self.broker.notify_append()
        finally:
            self._alter_in_flight = False

    # ================================================================== appends
    async def append_records(self, entries: dict[Partition, Any], *, acks: int, timeout_ms: int,
                             origin: AppendOrigin, verification: TxnVerification | None = None,
                             api_version: int = 9, transaction_version: int = 0,
                             now: int | None = None) -> dict[Partition, PartitionResponse]:
        """Append each partition's records as its leader and answer each (Kafka's appendRecords,
        with handleProduceAppend's transaction verification first): the partitions the
        verification refused, then :meth:`append_records_to_leader`, then for acks=all the wait
        until the ISR has them (DelayedProduce). Every caller that appends -- Produce,
        WriteTxnMarkers, the transaction log -- comes through here; the group coordinator, which
        answers its writes later, through the two halves."""
        refused = await self._verify_transactions(entries, verification) if verification is not None else {}
        results = self.append_records_to_leader({p: r for p, r in entries.items() if p not in refused},
                                                origin=origin, required_acks=acks, api_version=api_version,
                                                transaction_version=transaction_version, now=now)
        if acks == -1:
            waits = {p: r.last_offset + 1 for p, r in results.items() if r.error == Errors.NONE}
            if waits:
                for p, err in (await self.wait_for_acks(waits, timeout_ms)).items():
                    results[p].error = err
        results.update(refused)
        return results

    def append_records_to_leader(self, entries: dict[Partition, Any], *, origin: AppendOrigin, required_acks: int,
                                 api_version: int = 9, transaction_version: int = 0,
                                 now: int | None = None) -> dict[Partition, PartitionResponse]:
        """Each partition's records appended to its log as the leader, at once, nothing awaited
        (Kafka's appendRecordsToLeader / appendToLocalLog): NOT_LEADER_OR_FOLLOWER where this
        broker does not lead, NOT_ENOUGH_REPLICAS for acks=all below min ISR, any refusal of the
        log answered by :func:`append_error`."""
        out = {}
        for part, records in entries.items():
            try:
                info = part.append_records_to_leader(records, origin=origin, required_acks=required_acks,
                                                     api_version=api_version, transaction_version=transaction_version,
                                                     now=now)
            except KafkaError as exc:
                out[part] = append_error(part, exc)
            except OSError as exc:      # a write (or a flush the log's settings asked for) failed
                log.error("%s-%d: append failed: %s", part.topic, part.index, exc)
                out[part] = append_error(part, KafkaStorageError(str(exc)))
            else:
                out[part] = PartitionResponse(Errors.NONE, info.first_offset, info.last_offset, info.log_append_time,
                                              info.log_start_offset)
        return out

    async def wait_for_acks(self, required: dict[Partition, int], timeout_ms: int) -> dict[Partition, Errors]:
        """acks=all for several partitions at once (DelayedProduce): for each partition and the
        offset its high watermark must reach, the error it ends with, all within one timeout."""
        results: dict[Partition, Errors] = {}
        pending = []
        for part, offset in required.items():
            done, err = part.check_enough_replicas_reach_offset(offset)
            if done or err != Errors.NONE:
                results[part] = err
            else:
                pending.append(part)
        if not pending:
            return results      # a one-node broker always, a cluster when the ISR is the leader

        async def one(part: Partition) -> None:
            results[part] = await part.wait_for_replication(required[part], timeout_ms)

        async with trio.open_nursery() as nursery:
            for part in pending:
                nursery.start_soon(one, part)
        return results

    # ================================================================== KIP-890 verification
    async def _verify_transactions(self, entries: dict[Partition, Any],
                                   verification: TxnVerification) -> dict[Partition, PartitionResponse]:
        """handleProduceAppend's verification: the partitions whose transactional batch is its
        producer's first in the transaction (no ongoing transaction of that epoch in the log) start
        their verification entry (the lowest sequence the append will accept) and are verified
        with the coordinator first, in one AddPartitionsToTxn per producer id and epoch
        (AddPartitionsToTxnManager.verifyTransaction); the partitions refused, answered as
        postVerificationCallback answers them. A partition not led here is left to the append,
        which refuses it."""
        manager = self.broker.add_partitions_manager
        operation = verification.operation
        if not manager.verifies(operation):
            return {}
        to_verify: dict[tuple[int, int], dict[tuple[str, int], Partition]] = {}
        for part, records in entries.items():
            h = rec.transactional_batch_header(records)
            if h is None or not part.is_leader or part.log.has_ongoing_transaction(h.producer_id, h.producer_epoch):
                continue
            part.log.start_transaction_verification(h.producer_id, h.base_sequence, h.producer_epoch,
                                                    operation.supports_epoch_bump)
            to_verify.setdefault((h.producer_id, h.producer_epoch), {})[(part.topic, part.index)] = part
        refused = {}
        for (producer_id, producer_epoch), parts in to_verify.items():
            errors = await self._verify_partitions(manager, verification, producer_id, producer_epoch, list(parts))
            for tp, underlying in errors.items():
                err = verification_error_for_produce(underlying, operation)
                if err is None:
                    continue
                message = None
                if err == Errors.INVALID_TXN_STATE:
                    message = NOT_IN_TRANSACTION
                elif err == Errors.NOT_ENOUGH_REPLICAS and underlying != err:
                    message = UNVERIFIED.format(underlying.name)
                refused[parts[tp]] = PartitionResponse(err, error_message=message)
        return refused

    async def _verify_partitions(self, manager, verification: TxnVerification, producer_id: int,
                                 producer_epoch: int, tps: list[tuple[str, int]]) -> dict[tuple[str, int], Errors]:
        args = (verification.transactional_id, producer_id, producer_epoch)
        errors = await manager.verify(*args, tps, verification.operation)
        if verification.operation is TransactionSupportedOperation.ADD_PARTITION:
            # maybeRetryOnConcurrentTransactions: a TV2 add that meets the previous transaction's
            # markers (CONCURRENT_TRANSACTIONS) is retried every add.partitions.to.txn.retry.backoff.ms
            # until min(add.partitions.to.txn.retry.backoff.max.ms, request.timeout.ms) have passed
            # since the first try -- "the produce backoff adds too much delay": a client sending its
            # next transaction right after EndTxn would otherwise see its first batch refused and
            # the batches in flight behind it refused as out of order.
            cfg = self.broker.config
            backoff_s = cfg.int("add.partitions.to.txn.retry.backoff.ms") / 1000.0
            limit_s = min(cfg.int("add.partitions.to.txn.retry.backoff.max.ms"),
                          cfg.int("request.timeout.ms")) / 1000.0
            start = trio.current_time()
            while trio.current_time() - start < limit_s:
                again = [tp for tp, err in errors.items() if err == Errors.CONCURRENT_TRANSACTIONS]
                if not again:
                    break
                await trio.sleep(backoff_s)
                errors.update(await manager.verify(*args, again, verification.operation))
        return errors


def verification_error_for_produce(err: Errors, operation: TransactionSupportedOperation) -> Errors | None:
    """The Produce error for a failed verification (postVerificationCallback; None: verified): the
    retriable coordinator errors older clients may not retry read NOT_ENOUGH_REPLICAS (no
    metadata refresh) -- CONCURRENT_TRANSACTIONS too, except for a TV2 producer (Produce v12+),
    which is answered CONCURRENT_TRANSACTIONS itself."""
    if err == Errors.NONE:
        return None
    if err == Errors.CONCURRENT_TRANSACTIONS:
        return err if operation.supports_epoch_bump else Errors.NOT_ENOUGH_REPLICAS
    if err in _RETRY_AS_NOT_ENOUGH_REPLICAS:
        return Errors.NOT_ENOUGH_REPLICAS
    return err


def append_error(part: Partition, exc: KafkaError) -> PartitionResponse:
    """How a refused append is answered (appendToLocalLog's catch; the one place): the
    partition's log start offset, except for refusals before the records reached a log this
    broker leads (NOT_LEADER_OR_FOLLOWER, the records' size or form, storage); a message only for
    a record validation error (a timestamp out of bounds: Kafka's RecordValidationException,
    `hasCustomErrorMessage`). NOT_ENOUGH_REPLICAS below min ISR carries none: Kafka 4.3.1
    answered 565 of them so on three nodes (log start offset set, error_message null)."""
    if isinstance(exc, LogError):
        log_start = -1 if isinstance(exc, _BEFORE_THE_LOG) else part.log.log_start_offset
        message = exc.message if isinstance(exc, InvalidTimestampError) else None
    elif exc.error in _NOT_LED_HERE or part.log is None:
        log_start, message = -1, None
    else:
        log_start, message = part.log.log_start_offset, None
    return PartitionResponse(exc.error, log_start_offset=log_start, error_message=message)
