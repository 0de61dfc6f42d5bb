"""TransactionCoordinator of a real one-node broker (its TopicRegistry, PartitionLog,
ProducerIdManager, the txn log on disk; markers to itself in process), called directly: state
machine, error codes per state, markers, LSO, fencing, timeout abort and recovery of Prepare*
after a "crash" (the broker is dropped without a clean close and started again on the same
directory)."""

from __future__ import annotations

import pytest
import trio

from broker_impl.coordinators.transaction import TxnResult
from broker_impl.coordinators.transaction_metadata import TV_0, TV_2, TransactionState
from broker_impl.protocol.errors import Errors
from broker_impl.cluster.append import TransactionSupportedOperation as Op

from tests.unit.coordinators.txn_helpers import eventually, open_txn, produce, run, settle, started
from tests.unit.log.log_helpers import append_marker

S = TransactionState
CLEANUP_EVERY_20MS = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "20"}


@run
async def test_commit_writes_markers_and_advances_lso(tmp_path, nursery):
    node = await started(tmp_path, nursery, topics={"t": 2})
    c = node.txn_coordinator
    r = await c.init_producer_id("tx", 60000, None)
    err, pid, epoch = r.error, r.producer_id, r.producer_epoch
    assert (err, epoch) == (Errors.NONE, 0)
    assert await c.add_partitions("tx", pid, epoch, {("t", 0), ("t", 1)}) == Errors.NONE
    produce(node, "t", 0, pid, epoch, 0)
    plog = node.topics.partition("t", 0).log
    assert plog.last_stable_offset == 0 < plog.log_end_offset
    assert await c.handle_end_transaction("tx", pid, epoch, True, TV_0) == TxnResult(Errors.NONE, -1, -1)
    await settle(c)
    md = c.txn_manager.get("tx")
    assert md.state is S.COMPLETE_COMMIT and not md.topic_partitions
    assert plog.last_stable_offset == plog.log_end_offset == 2   # data + COMMIT marker
    # an idempotent retry of the commit is answered NONE, an abort now is INVALID_TXN_STATE
    assert (await c.handle_end_transaction("tx", pid, epoch, True, TV_0)).error == Errors.NONE
    assert (await c.handle_end_transaction("tx", pid, epoch, False, TV_0)).error == Errors.INVALID_TXN_STATE


@run
async def test_end_txn_is_answered_before_its_markers_are_handed_over(tmp_path, nursery):
    """Kafka's order (sendTxnMarkersCallback: responseCallback, then addTxnMarkersToSend): no
    marker leaves before the client's answer is written, so a coordinator killed once the
    transaction completed has answered. Before, the markers' task started inside the handler and
    could reach after_complete while a TLS stream was still writing the answer."""
    node = await started(tmp_path, nursery, topics={"t": 1})
    c = node.txn_coordinator
    _, pid, epoch = await open_txn(node, "tx", [("t", 0)])
    answered: list = []
    r = await c.handle_end_transaction("tx", pid, epoch, True, TV_0, after_response=answered.append)
    assert r.error == Errors.NONE and len(answered) == 1
    await trio.sleep(0.05)
    md = c.txn_manager.get("tx")
    assert md.state is S.PREPARE_COMMIT and "tx" not in c.markers.in_flight   # nothing sent yet
    assert node.topics.partition("t", 0).log.last_stable_offset == 0
    # meanwhile the transaction is between states: the producer's next EndTxn must retry
    assert (await c.handle_end_transaction("tx", pid, epoch, True, TV_0)).error == Errors.CONCURRENT_TRANSACTIONS
    answered.pop()()                                    # the answer is written: markers go
    await settle(c)
    assert c.txn_manager.get("tx").state is S.COMPLETE_COMMIT
    assert node.topics.partition("t", 0).log.last_stable_offset == 2


@run
async def test_end_txn_errors_per_state(tmp_path, nursery):
    node = await started(tmp_path, nursery, topics={"t": 1})
    c = node.txn_coordinator
    assert (await c.init_producer_id("", 1000, None)).error == Errors.INVALID_REQUEST
    assert (await c.init_producer_id("x", 10**9, None)).error == Errors.INVALID_TRANSACTION_TIMEOUT
    r = await c.init_producer_id("tx", 60000, None)
    pid, epoch = r.producer_id, r.producer_epoch
    assert (await c.handle_end_transaction("tx", pid, epoch, True, TV_0)).error == Errors.INVALID_TXN_STATE
    assert (await c.handle_end_transaction("nope", pid, epoch, True, TV_0)).error == Errors.INVALID_PRODUCER_ID_MAPPING
    assert await c.add_partitions("tx", pid + 1, epoch, {("t", 0)}) == Errors.INVALID_PRODUCER_ID_MAPPING
    assert await c.add_partitions("tx", pid, epoch + 1, {("t", 0)}) == Errors.PRODUCER_FENCED
    assert await c.add_partitions("tx", pid, epoch, {("t", 0)}) == Errors.NONE
    assert (await c.handle_end_transaction("tx", pid, epoch - 1 if epoch else 5, True, TV_0)).error == Errors.PRODUCER_FENCED


@run
async def test_init_during_ongoing_fences_and_aborts(tmp_path, nursery):
    node = await started(tmp_path, nursery, topics={"t": 1})
    c, pid, e0 = await open_txn(node, "tx", {("t", 0)})
    r = await c.init_producer_id("tx", 60000, None)
    err, _, _ = r.error, r.producer_id, r.producer_epoch
    assert err == Errors.CONCURRENT_TRANSACTIONS
    await settle(c)
    r = await c.init_producer_id("tx", 60000, None)
    err, pid2, e2 = r.error, r.producer_id, r.producer_epoch
    assert err == Errors.NONE and pid2 == pid
    # server TV2 (Kafka 4.3.1, measured: the retry gets epoch 2, the ABORT marker carries 1): the
    # TV2 abort's own bump is the fence (the PrepareEpochFence epoch is dropped), the retry bumps again
    assert e2 == e0 + 2
    plog = node.topics.partition("t", 0).log
    assert plog.last_stable_offset == plog.log_end_offset
    assert [p for p, _ in plog.aborted_transactions(0, plog.log_end_offset)] == [pid]
    # the zombie's commit is fenced, its produce too
    assert (await c.handle_end_transaction("tx", pid, e0, True, TV_0)).error == Errors.PRODUCER_FENCED
    with pytest.raises(Exception) as exc:
        produce(node, "t", 0, pid, e0, 1)
    assert exc.value.error == Errors.INVALID_PRODUCER_EPOCH


@run
async def test_init_during_ongoing_tv1_bumps_twice(tmp_path, nursery):
    node = await started(tmp_path, nursery, topics={"t": 1}, **{"transaction.version": "1"})
    c, pid, e0 = await open_txn(node, "tx", {("t", 0)}, records=False)
    assert (await c.init_producer_id("tx", 60000, None)).error == Errors.CONCURRENT_TRANSACTIONS
    await settle(c)
    assert (await c.init_producer_id("tx", 60000, None)) == TxnResult(Errors.NONE, pid, e0 + 2)


@run
async def test_tv2_end_txn_bumps_epoch_and_retry(tmp_path, nursery):
    node = await started(tmp_path, nursery, topics={"t": 1})
    c, pid, e0 = await open_txn(node, "tx", {("t", 0)}, TV_2)
    assert await c.handle_end_transaction("tx", pid, e0, True, TV_2) == TxnResult(Errors.NONE, pid, e0 + 1)
    await settle(c)
    assert await c.handle_end_transaction("tx", pid, e0, True, TV_2) == TxnResult(Errors.NONE, pid, e0 + 1)  # retry
    # an abort with nothing added still bumps (TV2 Empty/Complete* abort)
    assert await c.handle_end_transaction("tx", pid, e0 + 1, False, TV_2) == TxnResult(Errors.NONE, pid, e0 + 2)


@run
async def test_tv2_next_end_txn_while_markers_in_flight_is_concurrent_not_fenced(tmp_path, nursery):
    """Kafka 4.3 checks the pending transition before the epoch: right after EndTxn(COMMIT)
    answered (PrepareCommit durable, CompleteCommit pending while the markers are written), the
    producer's next EndTxn at the epoch it was given -- and a zombie's AddPartitionsToTxn at the
    old one -- are CONCURRENT_TRANSACTIONS, not PRODUCER_FENCED (txn/tv2_end_txn_while_markers_in_flight)."""
    node = await started(tmp_path, nursery, topics={"t": 1})
    c, pid, e0 = await open_txn(node, "tx", {("t", 0)}, TV_2)
    assert await c.handle_end_transaction("tx", pid, e0, True, TV_2) == TxnResult(Errors.NONE, pid, e0 + 1)
    md = c.txn_manager.get("tx")
    # no checkpoint since the answer: the marker task has not run yet
    assert md.state is S.PREPARE_COMMIT and md.pending_state is S.COMPLETE_COMMIT
    assert await c.handle_end_transaction("tx", pid, e0 + 1, False, TV_2) == TxnResult(Errors.CONCURRENT_TRANSACTIONS, -1, -1)
    assert await c.add_partitions("tx", pid, e0, {("t", 0)}) == Errors.CONCURRENT_TRANSACTIONS
    await settle(c)
    assert md.state is S.COMPLETE_COMMIT
    assert await c.handle_end_transaction("tx", pid, e0 + 1, False, TV_2) == TxnResult(Errors.NONE, pid, e0 + 2)
    await settle(c)
    assert await c.add_partitions("tx", pid, e0, {("t", 0)}) == Errors.PRODUCER_FENCED


@run
async def test_timeout_abort_fences_producer(tmp_path, nursery):
    node = await started(tmp_path, nursery, topics={"t": 1}, **CLEANUP_EVERY_20MS)
    c, pid, e0 = await open_txn(node, "tx", {("t", 0)}, timeout_ms=50)
    await eventually(lambda: c.txn_manager.get("tx").state is S.COMPLETE_ABORT, step=0.02)
    assert c.txn_manager.get("tx").producer_epoch > e0
    assert (await c.handle_end_transaction("tx", pid, e0, True, TV_0)).error == Errors.PRODUCER_FENCED


@run
async def test_timeout_abort_tv2_bumps_once_and_old_epoch_reads_as_retry(tmp_path, nursery):
    """Kafka 4.3.1 measured (cases/txn/timeout_abort, Java client, EndTxn v5): the timed-out
    transaction is aborted at epoch+1 (the marker's epoch), so the producer's own EndTxn v5 at the
    old epoch is a TV2 "retry" of a completed abort: ABORT gets NONE. A COMMIT there is
    KAFKA-20785: 4.0.0-4.3.1 answer INVALID_TXN_STATE (fatal to every client), the fix
    (apache/kafka#23204), followed here, PRODUCER_FENCED; a COMMIT at the current epoch is no
    retry and stays INVALID_TXN_STATE."""
    node = await started(tmp_path, nursery, topics={"t": 1}, **CLEANUP_EVERY_20MS)
    c, pid, e0 = await open_txn(node, "tx", {("t", 0)}, TV_2, timeout_ms=50)
    await eventually(lambda: c.txn_manager.get("tx").state is S.COMPLETE_ABORT, step=0.02)
    await settle(c)
    md = c.txn_manager.get("tx")
    assert md.producer_epoch == e0 + 1
    plog = node.topics.partition("t", 0).log
    assert plog.last_stable_offset == plog.log_end_offset == 2   # data + ABORT marker
    assert (await c.handle_end_transaction("tx", pid, e0, True, TV_2)).error == Errors.PRODUCER_FENCED
    assert await c.handle_end_transaction("tx", pid, e0, False, TV_2) == TxnResult(Errors.NONE, pid, e0 + 1)
    assert (await c.handle_end_transaction("tx", pid, e0 + 1, True, TV_2)).error == Errors.INVALID_TXN_STATE
    # a TV1 client at the old epoch is still fenced (strict equality)
    assert (await c.handle_end_transaction("tx", pid, e0, True, TV_0)).error == Errors.PRODUCER_FENCED


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
        append_marker(plog, False, producer_id=pid, producer_epoch=e0, coordinator_epoch=old_epoch)
    assert exc.value.error == Errors.TRANSACTION_COORDINATOR_FENCED


@run
async def test_verification_of_unadded_partition(tmp_path, nursery):
    node = await started(tmp_path, nursery, topics={"t": 2})
    c, pid, e0 = await open_txn(node, "tx", {("t", 0)}, records=False)
    res = c.verify_partitions("tx", pid, e0, [("t", 0), ("t", 1)])
    assert res == {("t", 0): Errors.NONE, ("t", 1): Errors.TRANSACTION_ABORTABLE}
    assert c.verify_partitions("tx", pid, e0 + 1, [("t", 0)])[("t", 0)] == Errors.PRODUCER_FENCED
    # as a partition leader asks it, over the network (AddPartitionsToTxn v5 verify_only), and as
    # the manager hands the answer on: PRODUCER_FENCED as INVALID_PRODUCER_EPOCH, and to the
    # oldest clients TRANSACTION_ABORTABLE as INVALID_TXN_STATE; a request's partitions in one ask
    verify = node.broker.add_partitions_manager.verify
    both = [("t", 0), ("t", 1)]
    assert await verify("tx", pid, e0, both, Op.DEFAULT_ERROR) \
        == {("t", 0): Errors.NONE, ("t", 1): Errors.INVALID_TXN_STATE}
    assert await verify("tx", pid, e0, [("t", 1)], Op.GENERIC_ERROR_SUPPORTED) == {("t", 1): Errors.TRANSACTION_ABORTABLE}
    assert await verify("tx", pid, e0 + 1, both, Op.GENERIC_ERROR_SUPPORTED) \
        == dict.fromkeys(both, Errors.INVALID_PRODUCER_EPOCH)


@run
async def test_expired_transactional_id_is_tombstoned(tmp_path, nursery):
    node = await started(tmp_path, nursery, **{"transactional.id.expiration.ms": "1"})
    c = node.txn_coordinator
    assert (await c.init_producer_id("tx", 60000, None)).error == Errors.NONE
    await trio.sleep(0.01)
    assert await c.txn_manager.remove_expired_transactional_ids(10**13) == ["tx"]
    assert c.txn_manager.get("tx") is None
    node.crash()
    node2 = await started(tmp_path, nursery)
    assert node2.txn_coordinator.txn_manager.get("tx") is None
