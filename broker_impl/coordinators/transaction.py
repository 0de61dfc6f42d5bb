"""Kafka's TransactionCoordinator (core/.../coordinator/transaction/TransactionCoordinator.scala,
Kafka 4.3 rules) in the embedded broker: the coordinator of the transactional.ids whose
``__transaction_state`` partitions this broker leads -- every partition when it runs alone, in
a cluster those it is elected for (``on_elected`` loads a partition, ``on_resigned`` gives it
up, and the ids it no longer owns get NOT_COORDINATOR).

Each public method decides exactly what Kafka's does, including which error code each state
and version gets; the wire-level version mapping (PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH for
old clients, ...) is in ``handlers/transactions.py`` and ``handlers/init_producer_id.py``.

Client transaction version (KIP-890): EndTxn v5+ and AddPartitionsToTxn v4+ (broker to broker,
i.e. Produce v12's implicit add) are TV2, everything older is TV1 — so librdkafka (EndTxn v1,
Produce v10) gets the classic rules on a broker whose finalized ``transaction.version`` is 2,
as on Kafka 4. Coordinator-initiated aborts (timeouts, fencing) use the finalized level.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial

import trio

from ..cluster.topics import by_topic
from ..faults import AFTER_PREPARE_DURABLE, BEFORE_END_TXN_RESPONSE, BEFORE_PREPARE_APPEND, FAULTS
from ..features import SUPPORTED_FEATURES
from ..protocol.errors import Errors, KafkaError
from .transaction_markers import GROUP_METADATA_TOPIC, TransactionMarkerChannelManager
from .transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    SHORT_MAX,
    TV_0,
    TV_2,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
    supports_epoch_bump,
)
from .transaction_state_manager import TransactionStateManager, now_ms

log = logging.getLogger("kconform.txn")
S = TransactionState

#: The transaction coordinator implements transaction.version 0..2; ApiVersions v3+ advertises
#: it and finalizes the broker config ``transaction.version`` (default 2, as Kafka 4).
SUPPORTED_FEATURES["transaction.version"] = (0, 2)

@dataclass(frozen=True)
class TxnResult:
    """What InitProducerId and EndTxn answer (Kafka's InitProducerIdResult, EndTxn's callback):
    the error, and the producer id and epoch the producer goes on with (-1 without)."""

    error: Errors
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class EndTxnDecision:
    """What an EndTxn leads to: the Prepare* transition to append (and whether it ends an epoch
    fence), or none -- the transaction already ended as asked, and the retry is answered NONE."""

    transit: TxnTransitMetadata | None
    is_epoch_fence: bool = False


ALREADY_ENDED = EndTxnDecision(None)


class TransactionCoordinator:
    def __init__(self, broker):
        self.broker = broker
        cfg = broker.config
        self.txn_manager = TransactionStateManager(broker)
        self.markers = TransactionMarkerChannelManager(broker, self.txn_manager)
        self.abort_interval_ms = cfg.int("transaction.abort.timed.out.transaction.cleanup.interval.ms")
        self.expire_interval_ms = cfg.int("transaction.remove.expired.transaction.cleanup.interval.ms")
        self.producer_expiration_interval_ms = cfg.int("producer.id.expiration.check.interval.ms")
        self.respond_after_complete = cfg.values.get("kconform.txn.end_txn.respond_after", "prepare") == "complete"
        self.is_active = False

    # ================================================================== lifecycle
    async def start(self, nursery: trio.Nursery, owns_all: bool = True) -> None:
        """Start the timers; with ``owns_all`` it owns every partition of the log now
        (:meth:`elect_all`), else it waits to be elected (a broker of a cluster, for each
        partition it leads; a one-node broker, for all of them, once unfenced)."""
        self.is_active = True
        nursery.start_soon(self._every, self.abort_interval_ms, self.abort_timed_out_transactions)
        nursery.start_soon(self._every, self.expire_interval_ms, self._expire_transactional_ids)
        nursery.start_soon(self._every, self.producer_expiration_interval_ms, self._expire_producers)
        if owns_all:
            self.elect_all()

    def elect_all(self) -> None:
        """A one-node broker, unfenced: it leads every partition of the log, at a new
        coordinator epoch, and loads them (requests meanwhile: COORDINATOR_LOAD_IN_PROGRESS)."""
        epoch = self.txn_manager.bump_local_epoch()
        for p in range(self.txn_manager.num_partitions):
            self.on_elected(p, epoch)

    def resign_all(self) -> None:
        """A one-node broker's controlled shutdown: every id answers NOT_COORDINATOR."""
        for p in range(self.txn_manager.num_partitions):
            self.on_resigned(p)

    def on_elected(self, partition: int, coordinator_epoch: int) -> None:
        """This broker leads ``__transaction_state`` partition ``partition`` (at a leader
        epoch, the coordinator epoch): load it, then finish its Prepare* transactions."""
        self.txn_manager.begin_load(partition, coordinator_epoch)
        self.broker.nursery.start_soon(self._load_and_complete, partition, coordinator_epoch)

    def on_resigned(self, partition: int) -> None:
        """Another broker leads it now: its ids get NOT_COORDINATOR here; markers in flight
        for them stop at their next epoch check."""
        self.txn_manager.resign(partition)

    async def _load_and_complete(self, partition: int, coordinator_epoch: int) -> None:
        pending = await self.txn_manager.load_partition(partition, coordinator_epoch)
        for md, complete, commit in pending or ():
            log.info("completing %s (%s) after load", md.transactional_id, md.state)
            self.markers.add_txn_markers_to_send(coordinator_epoch, commit, md, complete)

    async def _every(self, interval_ms: int, fn) -> None:
        if interval_ms <= 0 or interval_ms >= 1 << 62:
            return
        while True:
            await trio.sleep(interval_ms / 1000.0)
            try:
                res = fn()
                if hasattr(res, "__await__"):
                    await res
            except Exception:  # noqa: BLE001 - a timer must survive one bad round
                log.exception("transaction coordinator timer %s failed", getattr(fn, "__name__", fn))

    async def _expire_transactional_ids(self) -> None:
        removed = await self.txn_manager.remove_expired_transactional_ids(now_ms())
        if removed:
            log.info("expired transactional ids %s", removed)

    def _expire_producers(self) -> None:
        """producer.id.expiration.ms on every partition (Kafka runs it per log)."""
        now = now_ms()
        for t in list(self.broker.topics.topics.values()):
            for p in t.partitions:
                if p.log is not None:     # a cluster's broker holds the logs of its replicas only
                    p.log.remove_expired_producers(now)

    # ================================================================== InitProducerId
    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None) -> TxnResult:
        if transactional_id == "":
            return TxnResult(Errors.INVALID_REQUEST)
        if not self.txn_manager.validate_transaction_timeout_ms(timeout_ms):
            return TxnResult(Errors.INVALID_TRANSACTION_TIMEOUT)
        tm = self.txn_manager
        try:
            md = tm.get(transactional_id)
            if md is None:
                md = tm.put_if_not_exists(TransactionMetadata(
                    transactional_id, self.broker.producer_ids.generate(), txn_timeout_ms=timeout_ms,
                    txn_last_update_timestamp=now_ms()))
            coordinator_epoch = tm.coordinator_epoch_of(transactional_id)
            transit = self._prepare_init_producer_id_transit(md, timeout_ms, expected)
        except KafkaError as exc:
            return TxnResult(exc.error)
        if transit.txn_state is S.PREPARE_EPOCH_FENCE:
            fenced = await self._end_transaction(transactional_id, transit.producer_id, transit.producer_epoch,
                                                 commit=False, is_from_client=False,
                                                 client_tv=tm.transaction_version_level())
            return TxnResult(fenced.error if fenced.error != Errors.NONE else Errors.CONCURRENT_TRANSACTIONS)
        err = await tm.append_transaction_to_log(transactional_id, coordinator_epoch, transit)
        if err != Errors.NONE:
            return TxnResult(err)
        log.info("initialized %s: producer id %d epoch %d", transactional_id, transit.producer_id,
                 transit.producer_epoch)
        return TxnResult(Errors.NONE, transit.producer_id, transit.producer_epoch)

    def _prepare_init_producer_id_transit(self, md: TransactionMetadata, timeout_ms: int, expected):
        def valid_pid(e) -> bool:
            return (md.producer_epoch == NO_PRODUCER_EPOCH or e[0] == md.producer_id
                    or (e[0] == md.prev_producer_id and is_epoch_exhausted(e[1])))

        if md.pending_transition_in_progress:
            raise KafkaError(Errors.CONCURRENT_TRANSACTIONS)
        if expected is not None and not valid_pid(expected):
            raise KafkaError(Errors.PRODUCER_FENCED)
        if md.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            raise KafkaError(Errors.CONCURRENT_TRANSACTIONS)
        if md.state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT, S.EMPTY):
            now = now_ms()
            if md.is_producer_epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
                return md.prepare_producer_id_rotation(self.broker.producer_ids.generate(), timeout_ms, now,
                                                       expected is not None)
            return md.prepare_increment_producer_epoch(timeout_ms, None if expected is None else expected[1], now)
        if md.state is S.ONGOING:
            return md.prepare_fence_producer_epoch()
        raise RuntimeError(f"{md.transactional_id} found in state {md.state}")

    # ================================================================== AddPartitionsToTxn
    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: set, client_tv: int = TV_0) -> int:
        if not transactional_id:
            return Errors.INVALID_REQUEST
        tm = self.txn_manager
        try:
            md = tm.get(transactional_id)
        except KafkaError as exc:
            return exc.error
        if md is None:
            return Errors.INVALID_PRODUCER_ID_MAPPING
        # Kafka 4.3: the pending transition first, so that it completes before the id and epoch
        # are judged -- while a TV2 commit's markers are written the epoch is already bumped
        # (and across an epoch overflow the producer id too), and an old epoch is not yet fenced.
        if md.pending_transition_in_progress:
            return Errors.CONCURRENT_TRANSACTIONS
        if md.producer_id != producer_id:
            return Errors.INVALID_PRODUCER_ID_MAPPING
        if md.producer_epoch != producer_epoch:
            return Errors.PRODUCER_FENCED
        if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return Errors.CONCURRENT_TRANSACTIONS
        partitions = set(partitions)
        if md.state is S.ONGOING and partitions <= md.topic_partitions:
            return Errors.NONE
        transit = md.prepare_add_partitions(partitions, now_ms(), client_tv)
        return await tm.append_transaction_to_log(transactional_id, tm.coordinator_epoch_of(transactional_id), transit)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions) -> dict:
        """handleVerifyPartitionsInTransaction (AddPartitionsToTxn v4+ verifyOnly)."""
        if not transactional_id:
            return {tp: Errors.INVALID_REQUEST for tp in partitions}
        try:
            md = self.txn_manager.get(transactional_id)
        except KafkaError as exc:
            return {tp: exc.error for tp in partitions}
        if md is None or md.producer_id != producer_id:
            err = Errors.INVALID_PRODUCER_ID_MAPPING
        elif md.producer_epoch != producer_epoch:
            err = Errors.PRODUCER_FENCED
        elif md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            err = Errors.CONCURRENT_TRANSACTIONS
        else:
            return {tp: Errors.NONE if tp in md.topic_partitions else Errors.TRANSACTION_ABORTABLE
                    for tp in partitions}
        return {tp: err for tp in partitions}

    # ================================================================== EndTxn
    async def handle_end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                     commit: bool, client_tv: int, after_response=None) -> TxnResult:
        return await self._end_transaction(transactional_id, producer_id, producer_epoch, commit,
                                           is_from_client=True, client_tv=client_tv,
                                           after_response=after_response)

    async def _end_transaction(self, transactional_id, producer_id, producer_epoch, commit,
                               is_from_client, client_tv, after_response=None) -> TxnResult:
        """EndTxn, and the coordinator's own aborts (a timeout, an InitProducerId's fence). A TV2
        answer names the producer id and epoch to go on with; a TV1 answer neither.

        A client's EndTxn is answered first and its markers handed over after
        (``after_response``: RequestContext.after_response), Kafka's order in sendTxnMarkersCallback
        -- so a coordinator killed after the transaction completed has always answered it
        (coordinator/crash_after_complete)."""
        if not transactional_id:
            return TxnResult(Errors.INVALID_REQUEST)
        tm = self.txn_manager
        try:
            md = tm.get(transactional_id)
        except KafkaError as exc:
            return TxnResult(exc.error)
        if md is None:
            return TxnResult(Errors.INVALID_PRODUCER_ID_MAPPING)
        coordinator_epoch = tm.coordinator_epoch_of(transactional_id)
        tv2 = supports_epoch_bump(client_tv)
        try:
            if tv2:
                decision = self._decide_end_txn_v2(md, producer_id, producer_epoch, commit, is_from_client)
            else:
                decision = self._decide_end_txn_v1(md, producer_id, producer_epoch, commit, is_from_client)
        except KafkaError as exc:
            return TxnResult(exc.error)
        if decision.transit is None:
            return TxnResult(Errors.NONE, md.producer_id, md.producer_epoch) if tv2 else TxnResult(Errors.NONE)
        if FAULTS.armed and is_from_client:
            await FAULTS.reach(BEFORE_PREPARE_APPEND, transactional_id)
        err = await tm.append_transaction_to_log(transactional_id, coordinator_epoch, decision.transit)
        if err != Errors.NONE:
            if decision.is_epoch_fence and tm.coordinator_epoch_of(transactional_id) == coordinator_epoch \
                    and tm.get(transactional_id) is md:
                md.has_failed_epoch_fence = True
            return TxnResult(err)
        if FAULTS.armed:
            await FAULTS.reach(AFTER_PREPARE_DURABLE, transactional_id)
        # sendTxnMarkersCallback: re-check, then prepare Complete* and hand over to the markers.
        if tm.coordinator_epoch_of(transactional_id) != coordinator_epoch or tm.get(transactional_id) is not md:
            return TxnResult(Errors.NOT_COORDINATOR)
        if md.producer_id != producer_id and not tv2:
            return TxnResult(Errors.INVALID_PRODUCER_ID_MAPPING)
        if md.pending_transition_in_progress:
            return TxnResult(Errors.CONCURRENT_TRANSACTIONS)
        if md.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT) or (md.state is S.PREPARE_COMMIT) != commit:
            return TxnResult(Errors.INVALID_TXN_STATE)
        complete = md.prepare_complete(now_ms())
        result = TxnResult(Errors.NONE, md.producer_id, md.producer_epoch) if tv2 else TxnResult(Errors.NONE)
        hand_over = partial(self.markers.add_txn_markers_to_send, coordinator_epoch, commit, md, complete)
        if is_from_client and after_response is not None and not self.respond_after_complete:
            after_response(hand_over)
        else:
            done = hand_over()
            if self.respond_after_complete and is_from_client:
                await done.wait()
        if FAULTS.armed and is_from_client:
            await FAULTS.reach(BEFORE_END_TXN_RESPONSE, transactional_id)
        return result

    def _decide_end_txn_v1(self, md, producer_id, producer_epoch, commit, is_from_client) -> EndTxnDecision:
        """endTransactionWithTV1: strict epoch equality for clients; ALREADY_ENDED for the retry of
        an ended transaction, KafkaError raised for a refusal."""
        if md.producer_id != producer_id:
            raise KafkaError(Errors.INVALID_PRODUCER_ID_MAPPING)
        if (is_from_client and producer_epoch != md.producer_epoch) or producer_epoch < md.producer_epoch:
            raise KafkaError(Errors.PRODUCER_FENCED)
        if md.pending_transition_in_progress and md.pending_state is not S.PREPARE_EPOCH_FENCE:
            raise KafkaError(Errors.CONCURRENT_TRANSACTIONS)
        st = md.state
        if st is S.ONGOING:
            fence = False
            if not commit and md.pending_state is S.PREPARE_EPOCH_FENCE:
                fence = True
                md.pending_state = None
                md.producer_epoch = producer_epoch
                md.last_producer_epoch = NO_PRODUCER_EPOCH
            return EndTxnDecision(md.prepare_abort_or_commit(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, TV_0,
                                                             NO_PRODUCER_ID, now_ms(), False), fence)
        if st is S.COMPLETE_COMMIT and commit or st is S.COMPLETE_ABORT and not commit:
            return ALREADY_ENDED
        if st is S.PREPARE_COMMIT and commit or st is S.PREPARE_ABORT and not commit:
            raise KafkaError(Errors.CONCURRENT_TRANSACTIONS)
        if st in (S.DEAD, S.PREPARE_EPOCH_FENCE):
            raise RuntimeError(f"{md.transactional_id} found in state {st}")
        raise KafkaError(Errors.INVALID_TXN_STATE)

    def _decide_end_txn_v2(self, md, producer_id, producer_epoch, commit, is_from_client) -> EndTxnDecision:
        """endTransaction for TV2 (every EndTxn bumps the epoch; retries are recognised by the
        epoch before the bump): ALREADY_ENDED for such a retry, KafkaError raised for a refusal."""
        fence = md.pending_state is S.PREPARE_EPOCH_FENCE
        retry_on_overflow = (not fence and md.prev_producer_id == producer_id
                             and producer_epoch == SHORT_MAX - 1 and md.producer_epoch == 0)
        retry_on_bump = not fence and md.producer_epoch == producer_epoch + 1
        st = md.state
        if not fence:
            if st in (S.ONGOING, S.EMPTY, S.DEAD, S.PREPARE_EPOCH_FENCE):
                valid = producer_epoch == md.producer_epoch
            elif st in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                valid = retry_on_bump
            else:
                valid = retry_on_bump or retry_on_overflow or producer_epoch == md.producer_epoch
        else:
            valid = (not is_from_client or producer_epoch == md.producer_epoch) and producer_epoch >= md.producer_epoch
        is_retry = retry_on_bump or retry_on_overflow
        # Kafka 4.3 checks the pending transition FIRST: while a commit's markers are written
        # (PrepareCommit, CompleteCommit pending) the producer's next EndTxn at the epoch that
        # commit returned is not a retry of it, and judged by the epoch it would be fenced
        # (PRODUCER_FENCED to a live producer); CONCURRENT_TRANSACTIONS lets it retry once the
        # transaction is complete.
        if md.pending_transition_in_progress and md.pending_state is not S.PREPARE_EPOCH_FENCE:
            raise KafkaError(Errors.CONCURRENT_TRANSACTIONS)
        if md.producer_id != producer_id and not retry_on_overflow:
            raise KafkaError(Errors.INVALID_PRODUCER_ID_MAPPING)
        if not valid:
            raise KafkaError(Errors.PRODUCER_FENCED)

        def complete_to(state, no_partition_added):
            # Kafka 4.3 (generateTxnTransitMetadataForTxnCompletion): a TV2 completion bumps the
            # epoch itself, so an epoch fence only drops its pending PrepareEpochFence and lets
            # that bump fence the old producer (a timed-out txn ends at epoch+1, not epoch+2:
            # its producer's EndTxn v5 at the old epoch is then a "retry" and a COMMIT gets
            # INVALID_TXN_STATE). For the same reason an exhausted epoch rotates the producer id
            # on the fence path too.
            next_pid = NO_PRODUCER_ID
            if md.is_producer_epoch_exhausted:
                next_pid = self.broker.producer_ids.generate()
            if state is S.PREPARE_ABORT and fence:
                md.pending_state = None
            return EndTxnDecision(md.prepare_abort_or_commit(state, TV_2, next_pid, now_ms(), no_partition_added),
                                  fence)

        if st is S.ONGOING:
            return complete_to(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, False)
        if st is S.COMPLETE_COMMIT:
            if commit:
                if is_retry:
                    return ALREADY_ENDED
                raise KafkaError(Errors.INVALID_TXN_STATE)
            if is_retry:
                raise KafkaError(Errors.INVALID_TXN_STATE)
            return complete_to(S.PREPARE_ABORT, True)
        if st is S.COMPLETE_ABORT:
            if not commit:
                if is_retry:
                    return ALREADY_ENDED
                return complete_to(S.PREPARE_ABORT, True)
            # KAFKA-20785 (apache/kafka#23204, after 4.3.1): a commit at a retry epoch can only
            # be one the producer sent before the coordinator's own (timeout) abort bumped the
            # epoch -- a client retries its EndTxn with the same verb. 4.0-4.3.1 answer
            # INVALID_TXN_STATE, fatal to every client; the fix, followed here, fences it as
            # TV1's strict epoch check does, which clients (Streams) recover from.
            raise KafkaError(Errors.PRODUCER_FENCED if is_retry else Errors.INVALID_TXN_STATE)
        if st is S.PREPARE_COMMIT:
            raise KafkaError(Errors.CONCURRENT_TRANSACTIONS if commit else Errors.INVALID_TXN_STATE)
        if st is S.PREPARE_ABORT:
            raise KafkaError(Errors.CONCURRENT_TRANSACTIONS if not commit else Errors.INVALID_TXN_STATE)
        if st is S.EMPTY:
            if not commit:
                return complete_to(S.PREPARE_ABORT, True)
            raise KafkaError(Errors.INVALID_TXN_STATE)
        raise RuntimeError(f"{md.transactional_id} found in state {st}")

    # ================================================================== timers
    async def abort_timed_out_transactions(self) -> None:
        """Fence (epoch+1) and abort every Ongoing transaction past its transaction.timeout.ms."""
        tm = self.txn_manager
        for tid, pid, _epoch in tm.timed_out_transactions(now_ms()):
            md = tm.get(tid)
            if md is None or md.producer_id != pid or md.pending_transition_in_progress:
                continue
            transit = md.prepare_fence_producer_epoch()
            aborted = await self._end_transaction(tid, transit.producer_id, transit.producer_epoch, commit=False,
                                                  is_from_client=False, client_tv=tm.transaction_version_level())
            log.info("timed-out transaction %s aborted: %s", tid, aborted.error.name)

    # ================================================================== describe / list
    def describe(self, transactional_id: str, T):
        """One DescribeTransactions TransactionState (``T`` is its generated class). An error
        leaves every other field at the schema's default (0), as Kafka does (measured on 4.3.1)."""
        out = T(error_code=Errors.NONE, transactional_id=transactional_id)
        if not self.is_active:
            out.error_code = Errors.COORDINATOR_NOT_AVAILABLE
            return out
        if not transactional_id:
            out.error_code = Errors.INVALID_REQUEST
            return out
        try:
            md = self.txn_manager.get(transactional_id)
        except KafkaError as exc:
            out.error_code = exc.error
            return out
        if md is None or md.state is S.DEAD:
            out.error_code = Errors.TRANSACTIONAL_ID_NOT_FOUND
            return out
        out.topics = [T.TopicData(topic=t, partitions=ps) for t, ps in by_topic(sorted(md.topic_partitions)).items()]
        out.producer_id = md.producer_id
        out.producer_epoch = md.producer_epoch
        out.transaction_state = md.state.state_name
        out.transaction_timeout_ms = md.txn_timeout_ms
        out.transaction_start_time_ms = md.txn_start_timestamp
        return out

    def list_transactions(self, producer_ids, state_names, duration_ms: int = -1, pattern=None):
        """(error, unknown state filters, [(transactional id, producer id, state name)])."""
        if not self.is_active:
            return Errors.COORDINATOR_NOT_AVAILABLE, [], []
        if self.txn_manager.loading:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS, [], []
        states, unknown = set(), []
        for n in state_names or ():
            s = S.from_name(n)
            if s is None:
                unknown.append(n)
            else:
                states.add(s)
        now = now_ms()
        out = []
        for md in self.txn_manager.all_metadata():
            if md.state is S.DEAD:
                continue
            if producer_ids and md.producer_id not in producer_ids:
                continue
            if state_names and md.state not in states:
                continue
            if duration_ms >= 0 and now - md.txn_start_timestamp <= duration_ms:
                continue
            if pattern is not None and not pattern.fullmatch(md.transactional_id):
                continue
            out.append((md.transactional_id, md.producer_id, md.state.state_name))
        return Errors.NONE, unknown, out

    # ================================================================== the offsets partition
    def offsets_partition(self, group_id: str) -> tuple[str, int]:
        """The ``__consumer_offsets`` partition the group coordinator writes ``group_id``'s
        offsets to (Kafka's ``groupCoordinator.partitionFor``): the markers must land where
        the transactional offsets are, so an existing topic's own partition count wins over
        ``offsets.topic.num.partitions``."""
        return GROUP_METADATA_TOPIC, self.broker.group_coordinator.store.partition_for(group_id)
