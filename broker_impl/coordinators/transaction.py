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

import trio

from ..cluster.topics import by_topic
from ..faults import AFTER_PREPARE_DURABLE, BEFORE_END_TXN_RESPONSE, BEFORE_PREPARE_APPEND, FAULTS
from ..features import SUPPORTED_FEATURES
from ..log import records as rec
from ..protocol.errors import Errors
from .transaction_markers import GROUP_METADATA_TOPIC, TransactionMarkerChannelManager
from .transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    SHORT_MAX,
    TV_0,
    TV_2,
    CoordinatorError,
    TransactionMetadata,
    TransactionState,
    is_epoch_exhausted,
    supports_epoch_bump,
)
from .transaction_state_manager import TransactionStateManager, now_ms

log = logging.getLogger("kconform.txn")
S = TransactionState

#: The transaction coordinator implements transaction.version 0..2; ApiVersions v3+ advertises
#: it and finalizes the broker config ``transaction.version`` (default 2, as Kafka 4).
SUPPORTED_FEATURES["transaction.version"] = (0, 2)

# AddPartitionsToTxnManager.TransactionSupportedOperation
DEFAULT_ERROR = 0          # Produce <= v10: TRANSACTION_ABORTABLE becomes INVALID_TXN_STATE
GENERIC_ERROR_SUPPORTED = 1  # Produce v11 / TxnOffsetCommit v4+
ADD_PARTITION = 2          # Produce v12+ (TV2): the coordinator adds the partition

#: Verification errors a producer of any version retries (ReplicaManager maps them so;
#: CONCURRENT_TRANSACTIONS too, below TV2).
_RETRY_AS_NOT_ENOUGH_REPLICAS = frozenset({
    Errors.NETWORK_EXCEPTION, Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_COORDINATOR})


def _fail(error: int) -> tuple[int, int, int]:
    """An InitProducerId/EndTxn answer without a producer id and epoch."""
    return error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH


class TransactionCoordinator:
    def __init__(self, broker):
        self.broker = broker
        cfg = broker.config
        self.txn_manager = TransactionStateManager(broker)
        self.markers = TransactionMarkerChannelManager(broker, self.txn_manager)
        self.abort_interval_ms = cfg.int("transaction.abort.timed.out.transaction.cleanup.interval.ms")
        self.expire_interval_ms = cfg.int("transaction.remove.expired.transaction.cleanup.interval.ms")
        self.producer_expiration_interval_ms = cfg.int("producer.id.expiration.check.interval.ms")
        self.verification_enabled = cfg.bool("transaction.partition.verification.enable")
        self.respond_after_complete = cfg.values.get("kconform.txn.end_txn.respond_after", "prepare") == "complete"
        self.is_active = False

    # ================================================================== lifecycle
    async def start(self, nursery: trio.Nursery, owns_all: bool = True) -> None:
        """Start the timers; a broker alone (``owns_all``) owns every partition of the log at a
        new coordinator epoch and loads them now (requests meanwhile:
        COORDINATOR_LOAD_IN_PROGRESS), a broker of a cluster those it is elected for."""
        self.is_active = True
        nursery.start_soon(self._every, self.abort_interval_ms, self.abort_timed_out_transactions)
        nursery.start_soon(self._every, self.expire_interval_ms, self._expire_transactional_ids)
        nursery.start_soon(self._every, self.producer_expiration_interval_ms, self._expire_producers)
        if owns_all:
            epoch = self.txn_manager.bump_local_epoch()
            for p in range(self.txn_manager.num_partitions):
                self.on_elected(p, epoch)

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
                               expected: tuple[int, int] | None) -> tuple[int, int, int]:
        if transactional_id == "":
            return _fail(Errors.INVALID_REQUEST)
        if not self.txn_manager.validate_transaction_timeout_ms(timeout_ms):
            return _fail(Errors.INVALID_TRANSACTION_TIMEOUT)
        tm = self.txn_manager
        try:
            md = tm.get(transactional_id)
            if md is None:
                md = tm.put_if_not_exists(TransactionMetadata(
                    transactional_id, self.broker.producer_ids.generate(), txn_timeout_ms=timeout_ms,
                    txn_last_update_timestamp=now_ms()))
            coordinator_epoch = tm.coordinator_epoch_of(transactional_id)
            transit = self._prepare_init_producer_id_transit(md, timeout_ms, expected)
        except CoordinatorError as exc:
            return _fail(exc.code)
        if transit.txn_state is S.PREPARE_EPOCH_FENCE:
            err, _, _ = await self._end_transaction(transactional_id, transit.producer_id, transit.producer_epoch,
                                                    commit=False, is_from_client=False,
                                                    client_tv=tm.transaction_version_level())
            return _fail(err if err != Errors.NONE else Errors.CONCURRENT_TRANSACTIONS)
        err = await tm.append_transaction_to_log(transactional_id, coordinator_epoch, transit)
        if err != Errors.NONE:
            return _fail(err)
        log.info("initialized %s: producer id %d epoch %d", transactional_id, transit.producer_id,
                 transit.producer_epoch)
        return Errors.NONE, transit.producer_id, transit.producer_epoch

    def _prepare_init_producer_id_transit(self, md: TransactionMetadata, timeout_ms: int, expected):
        def valid_pid(e) -> bool:
            return (md.producer_epoch == NO_PRODUCER_EPOCH or e[0] == md.producer_id
                    or (e[0] == md.prev_producer_id and is_epoch_exhausted(e[1])))

        if md.pending_transition_in_progress:
            raise CoordinatorError(Errors.CONCURRENT_TRANSACTIONS)
        if expected is not None and not valid_pid(expected):
            raise CoordinatorError(Errors.PRODUCER_FENCED)
        if md.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            raise CoordinatorError(Errors.CONCURRENT_TRANSACTIONS)
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
        except CoordinatorError as exc:
            return exc.code
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
        except CoordinatorError as exc:
            return {tp: exc.code for tp in partitions}
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
                                     commit: bool, client_tv: int) -> tuple[int, int, int]:
        return await self._end_transaction(transactional_id, producer_id, producer_epoch, commit,
                                           is_from_client=True, client_tv=client_tv)

    async def _end_transaction(self, transactional_id, producer_id, producer_epoch, commit,
                               is_from_client, client_tv) -> tuple[int, int, int]:
        if not transactional_id:
            return _fail(Errors.INVALID_REQUEST)
        tm = self.txn_manager
        try:
            md = tm.get(transactional_id)
        except CoordinatorError as exc:
            return _fail(exc.code)
        if md is None:
            return _fail(Errors.INVALID_PRODUCER_ID_MAPPING)
        coordinator_epoch = tm.coordinator_epoch_of(transactional_id)
        current = (md.producer_id, md.producer_epoch)
        try:
            if supports_epoch_bump(client_tv):
                decision = self._decide_end_txn_v2(md, producer_id, producer_epoch, commit, is_from_client)
            else:
                decision = self._decide_end_txn_v1(md, producer_id, producer_epoch, commit, is_from_client)
        except CoordinatorError as exc:
            if exc.code == Errors.NONE:
                return (Errors.NONE, *current) if supports_epoch_bump(client_tv) else _fail(Errors.NONE)
            return _fail(exc.code)
        is_epoch_fence, transit = decision
        if FAULTS.armed and is_from_client:
            await FAULTS.reach(BEFORE_PREPARE_APPEND, transactional_id)
        err = await tm.append_transaction_to_log(transactional_id, coordinator_epoch, transit)
        if err != Errors.NONE:
            if is_epoch_fence and tm.coordinator_epoch_of(transactional_id) == coordinator_epoch \
                    and tm.get(transactional_id) is md:
                md.has_failed_epoch_fence = True
            return _fail(err)
        if FAULTS.armed:
            await FAULTS.reach(AFTER_PREPARE_DURABLE, transactional_id)
        # sendTxnMarkersCallback: re-check, then prepare Complete* and hand over to the markers.
        if tm.coordinator_epoch_of(transactional_id) != coordinator_epoch or tm.get(transactional_id) is not md:
            return _fail(Errors.NOT_COORDINATOR)
        if md.producer_id != producer_id and not supports_epoch_bump(client_tv):
            return _fail(Errors.INVALID_PRODUCER_ID_MAPPING)
        if md.pending_transition_in_progress:
            return _fail(Errors.CONCURRENT_TRANSACTIONS)
        if md.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT) or (md.state is S.PREPARE_COMMIT) != commit:
            return _fail(Errors.INVALID_TXN_STATE)
        complete = md.prepare_complete(now_ms())
        result = (Errors.NONE, md.producer_id, md.producer_epoch)
        done = self.markers.add_txn_markers_to_send(coordinator_epoch, commit, md, complete)
        if self.respond_after_complete and is_from_client:
            await done.wait()
        if FAULTS.armed and is_from_client:
            await FAULTS.reach(BEFORE_END_TXN_RESPONSE, transactional_id)
        if supports_epoch_bump(client_tv):
            return result
        return _fail(Errors.NONE)

    def _decide_end_txn_v1(self, md, producer_id, producer_epoch, commit, is_from_client):
        """endTransactionWithTV1: strict epoch equality for clients; raises CoordinatorError
        (NONE for an idempotent retry) or returns (is_epoch_fence, transit)."""
        if md.producer_id != producer_id:
            raise CoordinatorError(Errors.INVALID_PRODUCER_ID_MAPPING)
        if (is_from_client and producer_epoch != md.producer_epoch) or producer_epoch < md.producer_epoch:
            raise CoordinatorError(Errors.PRODUCER_FENCED)
        if md.pending_transition_in_progress and md.pending_state is not S.PREPARE_EPOCH_FENCE:
            raise CoordinatorError(Errors.CONCURRENT_TRANSACTIONS)
        st = md.state
        if st is S.ONGOING:
            fence = False
            if not commit and md.pending_state is S.PREPARE_EPOCH_FENCE:
                fence = True
                md.pending_state = None
                md.producer_epoch = producer_epoch
                md.last_producer_epoch = NO_PRODUCER_EPOCH
            return fence, md.prepare_abort_or_commit(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, TV_0,
                                                     NO_PRODUCER_ID, now_ms(), False)
        if st is S.COMPLETE_COMMIT and commit or st is S.COMPLETE_ABORT and not commit:
            raise CoordinatorError(Errors.NONE)
        if st is S.PREPARE_COMMIT and commit or st is S.PREPARE_ABORT and not commit:
            raise CoordinatorError(Errors.CONCURRENT_TRANSACTIONS)
        if st in (S.DEAD, S.PREPARE_EPOCH_FENCE):
            raise RuntimeError(f"{md.transactional_id} found in state {st}")
        raise CoordinatorError(Errors.INVALID_TXN_STATE)

    def _decide_end_txn_v2(self, md, producer_id, producer_epoch, commit, is_from_client):
        """endTransaction for TV2 (every EndTxn bumps the epoch; retries are recognised by the
        epoch before the bump)."""
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
            raise CoordinatorError(Errors.CONCURRENT_TRANSACTIONS)
        if md.producer_id != producer_id and not retry_on_overflow:
            raise CoordinatorError(Errors.INVALID_PRODUCER_ID_MAPPING)
        if not valid:
            raise CoordinatorError(Errors.PRODUCER_FENCED)

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
            return fence, md.prepare_abort_or_commit(state, TV_2, next_pid, now_ms(), no_partition_added)

        if st is S.ONGOING:
            return complete_to(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, False)
        if st is S.COMPLETE_COMMIT:
            if commit:
                if is_retry:
                    raise CoordinatorError(Errors.NONE)
                raise CoordinatorError(Errors.INVALID_TXN_STATE)
            if is_retry:
                raise CoordinatorError(Errors.INVALID_TXN_STATE)
            return complete_to(S.PREPARE_ABORT, True)
        if st is S.COMPLETE_ABORT:
            if not commit:
                if is_retry:
                    raise CoordinatorError(Errors.NONE)
                return complete_to(S.PREPARE_ABORT, True)
            raise CoordinatorError(Errors.INVALID_TXN_STATE)
        if st is S.PREPARE_COMMIT:
            raise CoordinatorError(Errors.CONCURRENT_TRANSACTIONS if commit else Errors.INVALID_TXN_STATE)
        if st is S.PREPARE_ABORT:
            raise CoordinatorError(Errors.CONCURRENT_TRANSACTIONS if not commit else Errors.INVALID_TXN_STATE)
        if st is S.EMPTY:
            if not commit:
                return complete_to(S.PREPARE_ABORT, True)
            raise CoordinatorError(Errors.INVALID_TXN_STATE)
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
            err, _, _ = await self._end_transaction(tid, transit.producer_id, transit.producer_epoch, commit=False,
                                                    is_from_client=False, client_tv=tm.transaction_version_level())
            log.info("timed-out transaction %s aborted: %s", tid, Errors(err).name)

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
        except CoordinatorError as exc:
            out.error_code = exc.code
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

    # ================================================================== produce-side verification
    async def verify_produce(self, ctx, req, topic, pd) -> int | None:
        """KIP-890: before the first transactional batch of a producer lands on a partition,
        ask the coordinator whether the partition is in the transaction (part 1), or add it
        (part 2, Produce v12+). Returns the Produce error code, or None to go on."""
        # The cheap request-level checks first: most produce requests are not transactional,
        # and their batch header is then left for the log to read.
        tid = getattr(req, "transactional_id", None)
        if tid is None:
            return None
        op = ADD_PARTITION if ctx.version >= 12 else GENERIC_ERROR_SUPPORTED if ctx.version >= 11 else DEFAULT_ERROR
        if op != ADD_PARTITION and not self.verification_enabled:
            return None
        records = pd.records
        if records is None or len(records) < rec.RECORD_BATCH_OVERHEAD:
            return None
        try:
            h = rec.BatchHeader.unpack(records, 0)
        except Exception:  # noqa: BLE001 - malformed batches are refused by the log
            return None
        if not h.is_transactional or h.producer_id < 0:
            return None
        plog = topic.partitions[pd.index].log
        entry = plog.producer_state.last_entry(h.producer_id)
        if entry is not None and entry.current_txn_first_offset is not None \
                and entry.producer_epoch == h.producer_epoch:
            return None   # hasOngoingTransaction: already verified
        tp = (topic.name, pd.index)
        manager = self.broker.add_partitions_manager
        err = await manager.verify(tid, h.producer_id, h.producer_epoch, tp, add=op == ADD_PARTITION)
        if op == ADD_PARTITION:
            # ReplicaManager.handleProduceAppend (maybeRetryOnConcurrentTransactions): a TV2 add
            # that meets the previous transaction's markers (CONCURRENT_TRANSACTIONS) is retried
            # every add.partitions.to.txn.retry.backoff.ms until
            # min(add.partitions.to.txn.retry.backoff.max.ms, request.timeout.ms) have passed since
            # the first try -- "the produce backoff adds too much delay": a client sending its
            # next transaction right after EndTxn would otherwise see its first batch refused and
            # the batches in flight behind it refused as out of order.
            cfg = self.broker.config
            backoff_s = cfg.int("add.partitions.to.txn.retry.backoff.ms") / 1000.0
            limit_s = min(cfg.int("add.partitions.to.txn.retry.backoff.max.ms"),
                          cfg.int("request.timeout.ms")) / 1000.0
            start = trio.current_time()
            while err == Errors.CONCURRENT_TRANSACTIONS and trio.current_time() - start < limit_s:
                await trio.sleep(backoff_s)
                err = await manager.verify(tid, h.producer_id, h.producer_epoch, tp, add=True)
        return self.verification_error_for_produce(err, op)

    @staticmethod
    def _manager_error(err: int, op: int) -> int:
        """What AddPartitionsToTxnManager hands its caller for a partition the coordinator refused:
        PRODUCER_FENCED as INVALID_PRODUCER_EPOCH (what producers handle there), and for the
        oldest clients (DEFAULT_ERROR) TRANSACTION_ABORTABLE as INVALID_TXN_STATE."""
        if err == Errors.PRODUCER_FENCED:
            return Errors.INVALID_PRODUCER_EPOCH
        if err == Errors.TRANSACTION_ABORTABLE and op == DEFAULT_ERROR:
            return Errors.INVALID_TXN_STATE
        return err

    @classmethod
    def verification_error_for_produce(cls, err: int, op: int) -> int | None:
        """The Produce error for a failed verification (ReplicaManager.handleProduceAppend,
        postVerificationCallback): the retriable coordinator errors older clients may not retry
        read NOT_ENOUGH_REPLICAS (no metadata refresh) -- CONCURRENT_TRANSACTIONS too, except
        for a TV2 producer (Produce v12+), which is answered CONCURRENT_TRANSACTIONS itself."""
        if err == Errors.NONE:
            return None
        err = cls._manager_error(err, op)
        if err == Errors.CONCURRENT_TRANSACTIONS:
            return err if op == ADD_PARTITION else Errors.NOT_ENOUGH_REPLICAS
        if err in _RETRY_AS_NOT_ENOUGH_REPLICAS:
            return Errors.NOT_ENOUGH_REPLICAS
        return err

    @classmethod
    def verification_error_for_txn_offset_commit(cls, err: int, op: int) -> int | None:
        """The TxnOffsetCommit error for a failed verification of the offsets partition: the
        group coordinator's mapping, not the Produce path's (CoordinatorRuntime.
        scheduleTransactionalWriteOperation fails with the manager's error, which
        CoordinatorOperationExceptionHelper.handleOperationException maps): NETWORK_EXCEPTION
        reads COORDINATOR_LOAD_IN_PROGRESS (retried without a coordinator lookup),
        CONCURRENT_TRANSACTIONS and the coordinator errors stay what they are."""
        if err == Errors.NONE:
            return None
        err = cls._manager_error(err, op)
        if err == Errors.NETWORK_EXCEPTION:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS
        if err in (Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.NOT_ENOUGH_REPLICAS, Errors.REQUEST_TIMED_OUT):
            return Errors.COORDINATOR_NOT_AVAILABLE
        if err in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.KAFKA_STORAGE_ERROR):
            return Errors.NOT_COORDINATOR
        return err

    def offsets_partition(self, group_id: str) -> tuple[str, int]:
        """The ``__consumer_offsets`` partition the group coordinator writes ``group_id``'s
        offsets to (Kafka's ``groupCoordinator.partitionFor``): the markers must land where
        the transactional offsets are, so an existing topic's own partition count wins over
        ``offsets.topic.num.partitions``."""
        return GROUP_METADATA_TOPIC, self.broker.group_coordinator.store.partition_for(group_id)
