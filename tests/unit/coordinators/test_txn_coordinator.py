"""TransactionCoordinator of a real one-node broker (its TopicRegistry, PartitionLog,
ProducerIdManager, the txn log on disk; markers over its own listener), called directly: state
machine, error codes per state, markers, LSO, fencing, timeout abort and recovery of Prepare*
after a "crash" (the broker is dropped without a clean close and started again on the same
directory)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import trio

from broker_impl.coordinators.transaction_metadata import TV_0, TV_2, TransactionState
from broker_impl.log import records as rec
from broker_impl.protocol.errors import Errors

from tests.unit.coordinators.txn_helpers import eventually, open_txn, produce, run, settle, started

S = TransactionState
CLEANUP_EVERY_20MS = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "20"}


@run
async def test_commit_writes_markers_and_advances_lso(tmp_path, nursery):
    node = await started(tmp_path, nursery, topics={"t": 2})
    c = node.txn_coordinator
    err, pid, epoch = await c.init_producer_id("tx", 60000, None)
    assert (err, epoch) == (Errors.NONE, 0)
    assert await c.add_partitions("tx", pid, epoch, {("t", 0), ("t", 1)}) == Errors.NONE
    produce(node, "t", 0, pid, epoch, 0)
    plog = node.topics.partition("t", 0).log
    assert plog.last_stable_offset == 0 < plog.log_end_offset
    assert await c.handle_end_transaction("tx", pid, epoch, True, TV_0) == (Errors.NONE, -1, -1)
    await settle(c)
    md = c.txn_manager.get("tx")
    assert md.state is S.COMPLETE_COMMIT and not md.topic_partitions
    assert plog.last_stable_offset == plog.log_end_offset == 2   # data + COMMIT marker
    # an idempotent retry of the commit is answered NONE, an abort now is INVALID_TXN_STATE
    assert (await c.handle_end_transaction("tx", pid, epoch, True, TV_0))[0] == Errors.NONE
    assert (await c.handle_end_transaction("tx", pid, epoch, False, TV_0))[0] == Errors.INVALID_TXN_STATE


@run
async def test_end_txn_errors_per_state(tmp_path, nursery):
    node = await started(tmp_path, nursery, topics={"t": 1})
    c = node.txn_coordinator
    assert (await c.init_producer_id("", 1000, None))[0] == Errors.INVALID_REQUEST
    assert (await c.init_producer_id("x", 10**9, None))[0] == Errors.INVALID_TRANSACTION_TIMEOUT
    err, pid, epoch = await c.init_producer_id("tx", 60000, None)
    assert (await c.handle_end_transaction("tx", pid, epoch, True, TV_0))[0] == Errors.INVALID_TXN_STATE
    assert (await c.handle_end_transaction("nope", pid, epoch, True, TV_0))[0] == Errors.INVALID_PRODUCER_ID_MAPPING
    assert await c.add_partitions("tx", pid + 1, epoch, {("t", 0)}) == Errors.INVALID_PRODUCER_ID_MAPPING
    assert await c.add_partitions("tx", pid, epoch + 1, {("t", 0)}) == Errors.PRODUCER_FENCED
    assert await c.add_partitions("tx", pid, epoch, {("t", 0)}) == Errors.NONE
    assert (await c.handle_end_transaction("tx", pid, epoch - 1 if epoch else 5, True, TV_0))[0] == Errors.PRODUCER_FENCED


@run
async def test_init_during_ongoing_fences_and_aborts(tmp_path, nursery):
    node = await started(tmp_path, nursery, topics={"t": 1})
    c, pid, e0 = await open_txn(node, "tx", {("t", 0)})
    err, _, _ = await c.init_producer_id("tx", 60000, None)
    assert err == Errors.CONCURRENT_TRANSACTIONS
    await settle(c)
    err, pid2, e2 = await c.init_producer_id("tx", 60000, None)
    assert err == Errors.NONE and pid2 == pid
    # server TV2 (Kafka 4.3.1, measured: the retry gets epoch 2, the ABORT marker carries 1): the
    # TV2 abort's own bump is the fence (the PrepareEpochFence epoch is dropped), the retry bumps again
    assert e2 == e0 + 2
    plog = node.topics.partition("t", 0).log
    assert plog.last_stable_offset == plog.log_end_offset
    assert [p for p, _ in plog.aborted_transactions(0, plog.log_end_offset)] == [pid]
    # the zombie's commit is fenced, its produce too
    assert (await c.handle_end_transaction("tx", pid, e0, True, TV_0))[0] == Errors.PRODUCER_FENCED
    with pytest.raises(Exception) as exc:
        produce(node, "t", 0, pid, e0, 1)
    assert exc.value.error_code == Errors.INVALID_PRODUCER_EPOCH


@run
async def test_init_during_ongoing_tv1_bumps_twice(tmp_path, nursery):
    node = await started(tmp_path, nursery, topics={"t": 1}, **{"transaction.version": "1"})
    c, pid, e0 = await open_txn(node, "tx", {("t", 0)}, records=False)
    assert (await c.init_producer_id("tx", 60000, None))[0] == Errors.CONCURRENT_TRANSACTIONS
    await settle(c)
    assert (await c.init_producer_id("tx", 60000, None)) == (Errors.NONE, pid, e0 + 2)


@run
async def test_tv2_end_txn_bumps_epoch_and_retry(tmp_path, nursery):
    node = await started(tmp_path, nursery, topics={"t": 1})
    c, pid, e0 = await open_txn(node, "tx", {("t", 0)}, TV_2)
    assert await c.handle_end_transaction("tx", pid, e0, True, TV_2) == (Errors.NONE, pid, e0 + 1)
    await settle(c)
    assert await c.handle_end_transaction("tx", pid, e0, True, TV_2) == (Errors.NONE, pid, e0 + 1)  # retry
    # an abort with nothing added still bumps (TV2 Empty/Complete* abort)
    assert await c.handle_end_transaction("tx", pid, e0 + 1, False, TV_2) == (Errors.NONE, pid, e0 + 2)


@run
async def test_tv2_next_end_txn_while_markers_in_flight_is_concurrent_not_fenced(tmp_path, nursery):
    """Kafka 4.3 checks the pending transition before the epoch: right after EndTxn(COMMIT)
    answered (PrepareCommit durable, CompleteCommit pending while the markers are written), the
    producer's next EndTxn at the epoch it was given -- and a zombie's AddPartitionsToTxn at the
    old one -- are CONCURRENT_TRANSACTIONS, not PRODUCER_FENCED (txn/tv2_end_txn_while_markers_in_flight)."""
    node = await started(tmp_path, nursery, topics={"t": 1})
    c, pid, e0 = await open_txn(node, "tx", {("t", 0)}, TV_2)
    assert await c.handle_end_transaction("tx", pid, e0, True, TV_2) == (Errors.NONE, pid, e0 + 1)
    md = c.txn_manager.get("tx")
    # no checkpoint since the answer: the marker task has not run yet
    assert md.state is S.PREPARE_COMMIT and md.pending_state is S.COMPLETE_COMMIT
    assert await c.handle_end_transaction("tx", pid, e0 + 1, False, TV_2) == (Errors.CONCURRENT_TRANSACTIONS, -1, -1)
    assert await c.add_partitions("tx", pid, e0, {("t", 0)}) == Errors.CONCURRENT_TRANSACTIONS
    await settle(c)
    assert md.state is S.COMPLETE_COMMIT
    assert await c.handle_end_transaction("tx", pid, e0 + 1, False, TV_2) == (Errors.NONE, pid, e0 + 2)
    await settle(c)
    assert await c.add_partitions("tx", pid, e0, {("t", 0)}) == Errors.PRODUCER_FENCED


@run
async def test_timeout_abort_fences_producer(tmp_path, nursery):
    node = await started(tmp_path, nursery, topics={"t": 1}, **CLEANUP_EVERY_20MS)
    c, pid, e0 = await open_txn(node, "tx", {("t", 0)}, timeout_ms=50)
    await eventually(lambda: c.txn_manager.get("tx").state is S.COMPLETE_ABORT, step=0.02)
    assert c.txn_manager.get("tx").producer_epoch > e0
    assert (await c.handle_end_transaction("tx", pid, e0, True, TV_0))[0] == Errors.PRODUCER_FENCED


@run
async def test_timeout_abort_tv2_bumps_once_and_old_epoch_reads_as_retry(tmp_path, nursery):
    """Kafka 4.3.1 measured (cases/txn/timeout_abort, Java client, EndTxn v5): the timed-out
    transaction is aborted at epoch+1 (the marker's epoch), so the producer's own EndTxn v5 at the
    old epoch is a TV2 "retry" of a completed abort: COMMIT gets INVALID_TXN_STATE, ABORT NONE."""
    node = await started(tmp_path, nursery, topics={"t": 1}, **CLEANUP_EVERY_20MS)
    c, pid, e0 = await open_txn(node, "tx", {("t", 0)}, TV_2, timeout_ms=50)
    await eventually(lambda: c.txn_manager.get("tx").state is S.COMPLETE_ABORT, step=0.02)
    await settle(c)
    md = c.txn_manager.get("tx")
    assert md.producer_epoch == e0 + 1
    plog = node.topics.partition("t", 0).log
    assert plog.last_stable_offset == plog.log_end_offset == 2   # data + ABORT marker
    assert (await c.handle_end_transaction("tx", pid, e0, True, TV_2))[0] == Errors.INVALID_TXN_STATE
    assert await c.handle_end_transaction("tx", pid, e0, False, TV_2) == (Errors.NONE, pid, e0 + 1)
    # a TV1 client at the old epoch is still fenced (strict equality)
    assert (await c.handle_end_transaction("tx", pid, e0, True, TV_0))[0] == Errors.PRODUCER_FENCED


@run
async def test_prepare_commit_is_completed_after_restart(tmp_path, nursery):
    node = await started(tmp_path, nursery, topics={"t": 2})
    c, pid, e0 = await open_txn(node, "tx", {("t", 0), ("t", 1)})
    # PrepareCommit made durable, then "crash" before any marker
    md = c.txn_manager.get("tx")
    transit = md.prepare_abort_or_commit(S.PREPARE_COMMIT, TV_0, -1, 1, False)
    old_epoch = c.txn_manager.coordinator_epoch_of("tx")
    assert await c.txn_manager.append_transaction_to_log("tx", old_epoch, transit) == Errors.NONE
    node.crash()
    node2 = await started(tmp_path, nursery)
    c2 = node2.txn_coordinator
    # the __transaction_state leader epoch of a single KRaft node after a restart (Kafka 4.3.1: +2)
    assert c2.txn_manager.coordinator_epoch_of("tx") == old_epoch + 2
    await settle(c2)
    assert c2.txn_manager.get("tx").state is S.COMPLETE_COMMIT
    for p in (0, 1):
        plog = node2.topics.partition("t", p).log
        assert plog.last_stable_offset == plog.log_end_offset == 2
        assert plog.aborted_transactions(0, 2) == []
    # a marker from the old coordinator epoch is now refused
    plog = node2.topics.partition("t", 0).log
    with pytest.raises(Exception) as exc:
        plog.append_control_marker(False, producer_id=pid, producer_epoch=e0, coordinator_epoch=old_epoch)
    assert exc.value.error_code == Errors.TRANSACTION_COORDINATOR_FENCED


@run
async def test_verification_of_unadded_partition(tmp_path, nursery):
    node = await started(tmp_path, nursery, topics={"t": 2})
    c, pid, e0 = await open_txn(node, "tx", {("t", 0)}, records=False)
    res = c.verify_partitions("tx", pid, e0, [("t", 0), ("t", 1)])
    assert res == {("t", 0): Errors.NONE, ("t", 1): Errors.TRANSACTION_ABORTABLE}
    # as a partition leader asks it, over the network (AddPartitionsToTxn v5 verify_only)
    verify = node.broker.add_partitions_manager.verify
    assert await verify("tx", pid, e0, ("t", 0), add=False) == Errors.NONE
    assert await verify("tx", pid, e0, ("t", 1), add=False) == Errors.TRANSACTION_ABORTABLE
    assert await verify("tx", pid, e0 + 1, ("t", 1), add=False) == Errors.PRODUCER_FENCED
    assert c.verification_error_for_produce(Errors.TRANSACTION_ABORTABLE, 0) == Errors.INVALID_TXN_STATE
    assert c.verification_error_for_produce(Errors.TRANSACTION_ABORTABLE, 1) == Errors.TRANSACTION_ABORTABLE
    assert c.verification_error_for_produce(Errors.PRODUCER_FENCED, 1) == Errors.INVALID_PRODUCER_EPOCH
    # ReplicaManager.handleProduceAppend: retriable coordinator errors read NOT_ENOUGH_REPLICAS,
    # CONCURRENT_TRANSACTIONS too -- except for a TV2 producer (Produce v12+, op 2)
    for err in (Errors.NETWORK_EXCEPTION, Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.COORDINATOR_NOT_AVAILABLE,
                Errors.NOT_COORDINATOR):
        assert c.verification_error_for_produce(err, 2) == Errors.NOT_ENOUGH_REPLICAS
    assert c.verification_error_for_produce(Errors.CONCURRENT_TRANSACTIONS, 0) == Errors.NOT_ENOUGH_REPLICAS
    assert c.verification_error_for_produce(Errors.CONCURRENT_TRANSACTIONS, 1) == Errors.NOT_ENOUGH_REPLICAS
    assert c.verification_error_for_produce(Errors.CONCURRENT_TRANSACTIONS, 2) == Errors.CONCURRENT_TRANSACTIONS
    # TxnOffsetCommit: the group coordinator's mapping (handleOperationException) instead
    tx = c.verification_error_for_txn_offset_commit
    assert tx(Errors.NONE, 2) is None
    assert tx(Errors.CONCURRENT_TRANSACTIONS, 2) == Errors.CONCURRENT_TRANSACTIONS
    assert tx(Errors.CONCURRENT_TRANSACTIONS, 0) == Errors.CONCURRENT_TRANSACTIONS
    assert tx(Errors.NETWORK_EXCEPTION, 2) == Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert tx(Errors.COORDINATOR_LOAD_IN_PROGRESS, 2) == Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert tx(Errors.COORDINATOR_NOT_AVAILABLE, 2) == Errors.COORDINATOR_NOT_AVAILABLE
    assert tx(Errors.NOT_COORDINATOR, 2) == Errors.NOT_COORDINATOR
    assert tx(Errors.PRODUCER_FENCED, 2) == Errors.INVALID_PRODUCER_EPOCH
    assert tx(Errors.TRANSACTION_ABORTABLE, 0) == Errors.INVALID_TXN_STATE
    assert tx(Errors.TRANSACTION_ABORTABLE, 1) == Errors.TRANSACTION_ABORTABLE
    assert c.verify_partitions("tx", pid, e0 + 1, [("t", 0)])[("t", 0)] == Errors.PRODUCER_FENCED


@run
async def test_expired_transactional_id_is_tombstoned(tmp_path, nursery):
    node = await started(tmp_path, nursery, **{"transactional.id.expiration.ms": "1"})
    c = node.txn_coordinator
    _, pid, e0 = await c.init_producer_id("tx", 60000, None)
    await trio.sleep(0.01)
    assert await c.txn_manager.remove_expired_transactional_ids(10**13) == ["tx"]
    assert c.txn_manager.get("tx") is None
    node.crash()
    node2 = await started(tmp_path, nursery)
    assert node2.txn_coordinator.txn_manager.get("tx") is None


def _next_txn_produce(node, pid: int, epoch: int):
    """What the Produce handler hands verify_produce for a Produce v12 (TV2) of a transactional
    batch at sequence 0 to t-0."""
    batch = rec.build_batch([(b"k", b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                            is_transactional=True)
    return (SimpleNamespace(version=12), SimpleNamespace(transactional_id="tx"), node.topics.get("t"),
            SimpleNamespace(index=0, records=batch))


async def _verify_next_txn_while_complete_held(tmp_path, nursery, hold_ms: int):
    """Commit a TV2 transaction whose CompleteCommit waits ``hold_ms`` after its markers (the
    fault point after_all_markers, held), then verify the next transaction's first batch at
    once, as its leader does: (Produce error or None, seconds it took, verifications sent)."""
    node = await started(tmp_path, nursery, topics={"t": 1}, **{
        "kconform.fault": "after_all_markers", "kconform.fault.action": "hold", "kconform.fault.hold.ms": str(hold_ms)})
    c, pid, e0 = await open_txn(node, "tx", {("t", 0)}, TV_2)
    assert await c.handle_end_transaction("tx", pid, e0, True, TV_2) == (Errors.NONE, pid, e0 + 1)
    manager = node.broker.add_partitions_manager
    calls = []
    verify = manager.verify

    async def counting(*args, **kw):
        calls.append(await verify(*args, **kw))
        return calls[-1]

    manager.verify = counting
    t0 = trio.current_time()
    err = await c.verify_produce(*_next_txn_produce(node, pid, e0 + 1))
    return err, trio.current_time() - t0, calls


@run
async def test_tv2_produce_verification_retries_concurrent_transactions(tmp_path, nursery):
    """Kafka's maybeRetryOnConcurrentTransactions: CompleteCommit 60 ms late -- the leader asks
    again every 20 ms and the batch is accepted, no error reaches the producer."""
    err, took, calls = await _verify_next_txn_while_complete_held(tmp_path, nursery, 60)
    assert err is None
    assert calls[0] == Errors.CONCURRENT_TRANSACTIONS and calls[-1] == Errors.NONE
    assert took < 0.1 + 0.05


@run
async def test_tv2_produce_verification_answers_concurrent_transactions_after_100ms(tmp_path, nursery):
    """CompleteCommit 1 s late: after add.partitions.to.txn.retry.backoff.max.ms (100 ms) of
    retries the Produce is answered CONCURRENT_TRANSACTIONS (not NOT_ENOUGH_REPLICAS)."""
    err, took, calls = await _verify_next_txn_while_complete_held(tmp_path, nursery, 1000)
    assert err == Errors.CONCURRENT_TRANSACTIONS
    assert 0.1 <= took < 0.5
    assert len(calls) >= 3 and set(calls) == {Errors.CONCURRENT_TRANSACTIONS}
