"""Kafka's TransactionMarkerChannelManager and TransactionMarkerRequestCompletionHandler.

After PrepareCommit/PrepareAbort is durable, a COMMIT/ABORT marker goes to every partition of the
transaction -- a WriteTxnMarkers request (the producer id, the producer epoch after the Prepare
transition, the coordinator epoch, the transaction version) to the partition's leader, over the
network, this broker included, on the leader's advertised listener with Kafka's client id
``broker-<id>-txn-marker-sender``: a proxy in front of the nodes sees every marker, as on
Kafka (with nothing in front, this broker's own markers are answered in-process:
cluster/network_client). The leader writes the marker (acks=all) and, on ``__consumer_offsets``, settles the
transactional offsets of that producer in its group coordinator (handlers/transactions.py).
Once every partition has its marker, CompleteCommit/CompleteAbort is appended to the
transaction log.

Markers go to the partitions' leaders at once, one request per leader with that leader's
partitions in partition order, as Kafka's TxnMarkerQueue drains them -- except while the fault
point ``after_some_markers`` is armed: then one partition a request, so that the point falls
between two markers on a single node too. Per-partition outcomes follow the completion handler:
- INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED: stop, this transaction "can now be
  ignored" (it stays in Prepare* until a coordinator loads it again, as in Kafka);
- the partition's topic is gone from the metadata: the partition is dropped from the transaction;
- anything else (no leader yet, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, a timeout, the leader
  unreachable): retried after a backoff, to the leader it has then, until it succeeds -- or until
  this broker is no longer the coordinator at that epoch (the partition moved: the new
  coordinator writes the markers).
"""

from __future__ import annotations

import logging

import trio

from ..cluster.network_client import InterBrokerClient, NetworkError
from ..cluster.topics import by_topic
from ..faults import AFTER_ALL_MARKERS, AFTER_COMPLETE, AFTER_SOME_MARKERS, FAULTS
from ..protocol.errors import Errors
from ..protocol.messages import API
from .group_store import OFFSETS_TOPIC as GROUP_METADATA_TOPIC
from .transaction_metadata import TransactionMetadata, TxnTransitMetadata

log = logging.getLogger("kconform.txn.markers")
RETRY_BACKOFF_S = 0.1
WRITE_TXN_MARKERS_VERSION = 2
_STOP = frozenset({Errors.INVALID_PRODUCER_EPOCH, Errors.TRANSACTION_COORDINATOR_FENCED})

__all__ = ["GROUP_METADATA_TOPIC", "TransactionMarkerChannelManager", "write_txn_markers_request"]


def write_txn_markers_request(commit: bool, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                              transaction_version: int, partitions: list[tuple[str, int]]):
    """One marker for ``partitions``, as a WriteTxnMarkers request body."""
    R = API["WriteTxnMarkers"].Request
    M = R.WritableTxnMarker
    return R(markers=[M(producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
                        topics=[M.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                                for t, ps in by_topic(partitions).items()],
                        coordinator_epoch=coordinator_epoch, transaction_version=transaction_version)])


class TransactionMarkerChannelManager:
    def __init__(self, broker, state_manager):
        self.broker = broker
        self.txn_manager = state_manager
        self.in_flight: dict[str, trio.Event] = {}
        self.request_timeout_s = broker.config.int("request.timeout.ms") / 1000.0
        self._client = None

    @property
    def client(self) -> InterBrokerClient:
        if self._client is None:
            self._client = InterBrokerClient(self.broker.replica_manager.inter_broker_endpoint,
                                             f"broker-{self.broker.node_id}-txn-marker-sender",
                                             discover_versions=True, local=self.broker.local_requests)
        return self._client

    def add_txn_markers_to_send(self, coordinator_epoch: int, commit: bool, md: TransactionMetadata,
                                complete: TxnTransitMetadata) -> trio.Event:
        """Start writing the markers of ``md`` in the background; the event fires when the
        transaction is complete (or sending was given up)."""
        done = trio.Event()
        self.in_flight[md.transactional_id] = done
        self.broker.nursery.start_soon(self._run, coordinator_epoch, commit, md, complete, done)
        return done

    async def _run(self, coordinator_epoch, commit, md, complete, done) -> None:
        try:
            if await self._write_markers(coordinator_epoch, commit, md):
                await self._write_completion(coordinator_epoch, md, complete)
        finally:
            if self.in_flight.get(md.transactional_id) is done:
                del self.in_flight[md.transactional_id]
            done.set()

    def _still_coordinator(self, md: TransactionMetadata, coordinator_epoch: int) -> bool:
        return self.txn_manager.coordinator_epoch_of(md.transactional_id) == coordinator_epoch

    async def _write_markers(self, coordinator_epoch: int, commit: bool, md: TransactionMetadata) -> bool:
        """Every partition's marker; False when the transaction's markers stopped (fenced, or
        no longer the coordinator)."""
        partitions = sorted(md.topic_partitions)
        by_leader: dict[int, list] = {}
        for tp in partitions:
            by_leader.setdefault(self._leader_of(*tp), []).append(tp)
        progress = {"written": 0, "stopped": False}
        if len(by_leader) == 1:     # one node, or all on one leader: no task of its own to wait for
            await self._write_to_one_leader(coordinator_epoch, commit, md, partitions, len(partitions), progress)
        else:
            async with trio.open_nursery() as nursery:
                for tps in by_leader.values():
                    nursery.start_soon(self._write_to_one_leader, coordinator_epoch, commit, md, tps,
                                       len(partitions), progress)
        if progress["stopped"]:
            return False
        if FAULTS.armed:
            await FAULTS.reach(AFTER_ALL_MARKERS, md.transactional_id)
        return True

    def _leader_of(self, topic: str, index: int) -> int:
        t = self.broker.topics.get(topic)
        return t.partitions[index].leader if t is not None and 0 <= index < len(t.partitions) else -1

    async def _write_to_one_leader(self, coordinator_epoch: int, commit: bool, md: TransactionMetadata, tps: list,
                                   total: int, progress: dict) -> None:
        """The markers of the partitions one leader had when sending began: in one request (one
        partition a request while after_some_markers is armed); a partition whose marker failed
        is retried, where its leader is then."""
        requests = [[tp] for tp in tps] if AFTER_SOME_MARKERS in FAULTS.names else [tps]
        for pending in requests:
            while pending:
                if progress["stopped"]:
                    return
                if not self._still_coordinator(md, coordinator_epoch):
                    log.info("no longer the coordinator of %s at epoch %d: its markers stop", md.transactional_id,
                             coordinator_epoch)
                    progress["stopped"] = True
                    return
                errors = await self._send_markers(pending, commit, md, coordinator_epoch)
                for tp in pending:
                    if errors[tp] in (Errors.NONE, None):
                        md.remove_partition(tp)
                        progress["written"] += 1
                stop = [tp for tp in pending if errors[tp] in _STOP]
                if stop:
                    log.info("markers of %s stopped on %s-%d: %s", md.transactional_id, *stop[0], errors[stop[0]].name)
                    progress["stopped"] = True
                    return
                pending = [tp for tp in pending if errors[tp] not in (Errors.NONE, None)]
                if pending:
                    log.info("markers for %s on %s failed (%s); retrying", md.transactional_id,
                             ", ".join(f"{t}-{p}" for t, p in pending), errors[pending[0]].name)
                    await trio.sleep(RETRY_BACKOFF_S)
            if FAULTS.armed and progress["written"] < total:
                await FAULTS.reach(AFTER_SOME_MARKERS, f"{md.transactional_id} {progress['written']}/{total}")

    async def _send_markers(self, tps: list, commit: bool, md: TransactionMetadata,
                            coordinator_epoch: int) -> dict[tuple[str, int], Errors | None]:
        """One WriteTxnMarkers to each leader the partitions have now: each partition's error;
        None where its topic is gone (the marker is not needed any more)."""
        out: dict[tuple[str, int], Errors | None] = {}
        by_leader: dict[int, list] = {}
        for tp in tps:
            t = self.broker.topics.get(tp[0])
            if t is None or not 0 <= tp[1] < len(t.partitions):
                out[tp] = None
                continue
            leader = t.partitions[tp[1]].leader
            if leader < 0 or not self.broker.replica_manager.broker_alive(leader):
                out[tp] = Errors.NOT_LEADER_OR_FOLLOWER
                continue
            by_leader.setdefault(leader, []).append(tp)
        for leader, partitions in by_leader.items():
            req = write_txn_markers_request(commit, md.producer_id, md.producer_epoch, coordinator_epoch,
                                            md.client_transaction_version, partitions)
            try:
                resp = await self.client.send(leader, "WriteTxnMarkers", WRITE_TXN_MARKERS_VERSION, req,
                                              self.request_timeout_s)
            except NetworkError as exc:
                log.info("WriteTxnMarkers to broker %d: %s", leader, exc)
                out.update((tp, Errors.NETWORK_EXCEPTION) for tp in partitions)
                continue
            answered = {(rt.name, rp.partition_index): Errors(rp.error_code)
                        for m in resp.markers for rt in m.topics for rp in rt.partitions}
            out.update((tp, answered.get(tp, Errors.UNKNOWN_SERVER_ERROR)) for tp in partitions)
        return out

    async def _write_completion(self, coordinator_epoch: int, md: TransactionMetadata,
                                complete: TxnTransitMetadata) -> None:
        tm = self.txn_manager
        while True:
            if not self._still_coordinator(md, coordinator_epoch) or tm.get(md.transactional_id) is not md:
                log.info("no longer the coordinator of %s at epoch %d: Complete not written",
                         md.transactional_id, coordinator_epoch)
                return
            error = await tm.append_transaction_to_log(md.transactional_id, coordinator_epoch, complete,
                                                       retry_on_error=lambda e: e == Errors.COORDINATOR_NOT_AVAILABLE)
            if error == Errors.NONE:
                break
            if error != Errors.COORDINATOR_NOT_AVAILABLE:
                log.error("Complete of %s not written: %s", md.transactional_id, Errors(error).name)
                return
            await trio.sleep(RETRY_BACKOFF_S)
        if FAULTS.armed:
            await FAULTS.reach(AFTER_COMPLETE, md.transactional_id)
