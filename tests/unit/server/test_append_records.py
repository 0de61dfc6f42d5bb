"""ReplicaManager.append_records on a real one-node broker (its logs on disk, its coordinator behind
its own listener): the KIP-890 verification of transactional batches -- the Produce mapping of the
coordinator's answer, the TV2 retry of CONCURRENT_TRANSACTIONS -- and how every refusal of an
append is answered (one place: ``append_error``)."""

from __future__ import annotations

import trio

from broker_impl.coordinators.group_store import operation_error_to_response
from broker_impl.coordinators.transaction import TxnResult
from broker_impl.coordinators.transaction_metadata import TV_2
from broker_impl.log import records as rec
from broker_impl.log.producer_state import AppendOrigin
from broker_impl.protocol.errors import Errors
from broker_impl.cluster.append import TransactionSupportedOperation as Op
from broker_impl.cluster.append import TxnVerification
from broker_impl.server.replica_manager import NOT_IN_TRANSACTION, verification_error_for_produce

from tests.unit.coordinators.txn_helpers import open_txn, run, started

NOW = 1_700_000_000_000


def _txn_batch(pid: int, epoch: int, seq: int = 0, key: bytes = b"k") -> bytes:
    return rec.build_batch([(key, b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           is_transactional=True)


async def _produce(node, part, records, op: Op | None, acks: int = 1):
    verification = None if op is None else TxnVerification("tx", op)
    results = await node.broker.replica_manager.append_records(
        {part: records}, acks=acks, timeout_ms=1000, origin=AppendOrigin.CLIENT, verification=verification,
        api_version={None: 9, Op.DEFAULT_ERROR: 9, Op.GENERIC_ERROR_SUPPORTED: 11, Op.ADD_PARTITION: 12}[op])
    return results[part]


def test_verification_errors_as_produce_and_txn_offset_commit_answer_them():
    # postVerificationCallback: retriable coordinator errors read NOT_ENOUGH_REPLICAS, CONCURRENT_TRANSACTIONS
    # too -- except for a TV2 producer (Produce v12+), answered CONCURRENT_TRANSACTIONS itself
    assert verification_error_for_produce(Errors.NONE, Op.ADD_PARTITION) is None
    for err in (Errors.NETWORK_EXCEPTION, Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.COORDINATOR_NOT_AVAILABLE,
                Errors.NOT_COORDINATOR):
        for op in Op:
            assert verification_error_for_produce(err, op) == Errors.NOT_ENOUGH_REPLICAS
    assert verification_error_for_produce(Errors.CONCURRENT_TRANSACTIONS, Op.DEFAULT_ERROR) == Errors.NOT_ENOUGH_REPLICAS
    assert verification_error_for_produce(Errors.CONCURRENT_TRANSACTIONS, Op.GENERIC_ERROR_SUPPORTED) \
        == Errors.NOT_ENOUGH_REPLICAS
    assert verification_error_for_produce(Errors.CONCURRENT_TRANSACTIONS, Op.ADD_PARTITION) \
        == Errors.CONCURRENT_TRANSACTIONS
    assert verification_error_for_produce(Errors.INVALID_TXN_STATE, Op.DEFAULT_ERROR) == Errors.INVALID_TXN_STATE
    # TxnOffsetCommit: the group coordinator's mapping (handleOperationException) instead
    assert operation_error_to_response(Errors.CONCURRENT_TRANSACTIONS) == Errors.CONCURRENT_TRANSACTIONS
    assert operation_error_to_response(Errors.NETWORK_EXCEPTION) == Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert operation_error_to_response(Errors.COORDINATOR_LOAD_IN_PROGRESS) == Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert operation_error_to_response(Errors.COORDINATOR_NOT_AVAILABLE) == Errors.COORDINATOR_NOT_AVAILABLE
    assert operation_error_to_response(Errors.NOT_COORDINATOR) == Errors.NOT_COORDINATOR
    assert operation_error_to_response(Errors.INVALID_PRODUCER_EPOCH) == Errors.INVALID_PRODUCER_EPOCH
    assert operation_error_to_response(Errors.NOT_ENOUGH_REPLICAS) == Errors.COORDINATOR_NOT_AVAILABLE
    assert operation_error_to_response(Errors.KAFKA_STORAGE_ERROR) == Errors.NOT_COORDINATOR


@run
async def test_a_partition_not_in_the_transaction_is_refused_before_the_log(tmp_path, nursery):
    node = await started(tmp_path, nursery, topics={"t": 2}, **{"transaction.partition.verification.enable": "true"})
    _c, pid, e0 = await open_txn(node, "tx", {("t", 0)}, records=False)
    p0, p1 = node.topics.partition("t", 0), node.topics.partition("t", 1)
    r = await _produce(node, p1, _txn_batch(pid, e0), Op.DEFAULT_ERROR)
    assert (r.error, r.error_message, r.log_start_offset, p1.log.log_end_offset) \
        == (Errors.INVALID_TXN_STATE, NOT_IN_TRANSACTION, -1, 0)
    r = await _produce(node, p1, _txn_batch(pid, e0), Op.GENERIC_ERROR_SUPPORTED)
    assert (r.error, r.error_message) == (Errors.TRANSACTION_ABORTABLE, None)
    assert (await _produce(node, p0, _txn_batch(pid, e0 + 1), Op.GENERIC_ERROR_SUPPORTED)).error \
        == Errors.INVALID_PRODUCER_EPOCH
    r = await _produce(node, p0, _txn_batch(pid, e0), Op.GENERIC_ERROR_SUPPORTED, acks=-1)
    assert (r.error, r.base_offset, r.last_offset, r.log_start_offset) == (Errors.NONE, 0, 0, 0)
    # the transaction is open on t-0 now: its next batch is not verified again
    manager = node.broker.add_partitions_manager
    manager.verify = None
    assert (await _produce(node, p0, _txn_batch(pid, e0, 1), Op.GENERIC_ERROR_SUPPORTED)).base_offset == 1
    # without verification (transaction.partition.verification.enable=false before TV2) the log decides
    manager.verification_enabled = False
    r = await _produce(node, p1, _txn_batch(pid, e0), Op.DEFAULT_ERROR)
    assert (r.error, r.base_offset) == (Errors.NONE, 0)


@run
async def test_a_requests_partitions_are_verified_in_one_ask(tmp_path, nursery):
    """verifyTransaction: the partitions of one Produce that need verification go to the
    coordinator in one AddPartitionsToTxn, each answered on its own; those already in an
    ongoing transaction of the producer's epoch are not asked about."""
    node = await started(tmp_path, nursery, topics={"t": 3}, **{"transaction.partition.verification.enable": "true"})
    _c, pid, e0 = await open_txn(node, "tx", {("t", 0), ("t", 1)}, records=False)
    p0, p1, p2 = (node.topics.partition("t", i) for i in range(3))
    manager = node.broker.add_partitions_manager
    asked = []
    verify = manager.verify

    async def recording(tid, producer_id, producer_epoch, partitions, operation):
        asked.append(sorted(partitions))
        return await verify(tid, producer_id, producer_epoch, partitions, operation)

    manager.verify = recording
    batches = {p: _txn_batch(pid, e0) for p in (p0, p1, p2)}
    results = await node.broker.replica_manager.append_records(
        batches, acks=1, timeout_ms=1000, origin=AppendOrigin.CLIENT,
        verification=TxnVerification("tx", Op.GENERIC_ERROR_SUPPORTED), api_version=11)
    assert asked == [[("t", 0), ("t", 1), ("t", 2)]]
    assert [results[p].error for p in (p0, p1, p2)] == [Errors.NONE, Errors.NONE, Errors.TRANSACTION_ABORTABLE]
    assert (p0.log.log_end_offset, p2.log.log_end_offset) == (1, 0)
    await node.broker.replica_manager.append_records(
        {p0: _txn_batch(pid, e0, 1), p2: _txn_batch(pid, e0)}, acks=1, timeout_ms=1000, origin=AppendOrigin.CLIENT,
        verification=TxnVerification("tx", Op.GENERIC_ERROR_SUPPORTED), api_version=11)
    assert asked[1:] == [[("t", 2)]]


@run
async def test_refusals_of_the_log_and_the_partition_as_append_error_answers_them(tmp_path, nursery):
    node = await started(tmp_path, nursery, topics={"t": 1})
    part = node.topics.partition("t", 0)
    rm = node.broker.replica_manager
    ok = rm.append_records_to_leader({part: rec.build_batch([(b"k", b"v")])}, origin=AppendOrigin.CLIENT,
                                     required_acks=1)[part]
    assert (ok.error, ok.base_offset, ok.log_start_offset) == (Errors.NONE, 0, 0)
    # a refusal of the log, for records that reached it: the log start offset, no message
    gap = rec.build_batch([(b"k", b"v")], producer_id=7, producer_epoch=0, base_sequence=0)
    rm.append_records_to_leader({part: gap}, origin=AppendOrigin.CLIENT, required_acks=1)
    gap = rec.build_batch([(b"k", b"v")], producer_id=7, producer_epoch=0, base_sequence=5)
    r = rm.append_records_to_leader({part: gap}, origin=AppendOrigin.CLIENT, required_acks=1)[part]
    assert (r.error, r.log_start_offset, r.error_message) == (Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, 0, None)
    # records that never reached the log (corrupt): no log start offset
    corrupt = bytearray(rec.build_batch([(b"k", b"v")]))
    corrupt[-1] ^= 0xFF
    r = rm.append_records_to_leader({part: bytes(corrupt)}, origin=AppendOrigin.CLIENT, required_acks=1)[part]
    assert (r.error, r.log_start_offset) == (Errors.CORRUPT_MESSAGE, -1)
    # a record validation error carries its message
    strict = node.topics.create("strict", 1, {"message.timestamp.before.max.ms": "1000"}).partitions[0]
    old = rec.build_batch([(b"k", b"v", (), 1)], base_timestamp=1)
    r = rm.append_records_to_leader({strict: old}, origin=AppendOrigin.CLIENT, required_acks=1)[strict]
    assert r.error == Errors.INVALID_TIMESTAMP and r.error_message and r.log_start_offset == 0
    # the partition's own refusal: not the leader here
    part.leader = 99
    r = rm.append_records_to_leader({part: rec.build_batch([(b"k", b"v")])}, origin=AppendOrigin.CLIENT,
                                    required_acks=1)[part]
    assert (r.error, r.log_start_offset, r.error_message) == (Errors.NOT_LEADER_OR_FOLLOWER, -1, None)
    # acks=all below min ISR: the log start offset and no message (Kafka 4.3.1's answers on the wire)
    part.leader, part.isr = node.broker.node_id, []
    r = rm.append_records_to_leader({part: rec.build_batch([(b"k", b"v")])}, origin=AppendOrigin.CLIENT,
                                    required_acks=-1)[part]
    assert (r.error, r.log_start_offset, r.error_message) == (Errors.NOT_ENOUGH_REPLICAS, 0, None)


@run
async def test_a_verification_answered_not_enough_replicas_names_the_underlying_error(tmp_path, nursery):
    """postVerificationCallback's NotEnoughReplicasException carries the coordinator's answer
    (Kafka 4.3.1 on three nodes: "... Underlying error: NETWORK_EXCEPTION", COORDINATOR_LOAD_IN_PROGRESS,
    NOT_COORDINATOR); a TV2 producer's CONCURRENT_TRANSACTIONS is answered as itself, no message."""
    node = await started(tmp_path, nursery, topics={"t": 1}, **{"transaction.partition.verification.enable": "true"})
    _c, pid, e0 = await open_txn(node, "tx", set(), records=False)
    part = node.topics.partition("t", 0)
    manager = node.broker.add_partitions_manager
    for underlying, op, answer, message in (
            (Errors.NETWORK_EXCEPTION, Op.DEFAULT_ERROR, Errors.NOT_ENOUGH_REPLICAS,
             "Unable to verify the partition has been added to the transaction. Underlying error: NETWORK_EXCEPTION"),
            (Errors.CONCURRENT_TRANSACTIONS, Op.GENERIC_ERROR_SUPPORTED, Errors.NOT_ENOUGH_REPLICAS,
             "Unable to verify the partition has been added to the transaction. Underlying error: "
             "CONCURRENT_TRANSACTIONS"),
            (Errors.COORDINATOR_NOT_AVAILABLE, Op.ADD_PARTITION, Errors.NOT_ENOUGH_REPLICAS,
             "Unable to verify the partition has been added to the transaction. Underlying error: "
             "COORDINATOR_NOT_AVAILABLE")):
        async def answering(tid, producer_id, producer_epoch, partitions, operation, err=underlying):
            return dict.fromkeys(partitions, err)

        manager.verify = answering
        r = await _produce(node, part, _txn_batch(pid, e0), op)
        assert (r.error, r.error_message, r.log_start_offset) == (answer, message, -1)
    assert part.log.log_end_offset == 0


async def _verify_next_txn_while_complete_held(tmp_path, nursery, hold_ms: int):
    """Commit a TV2 transaction whose CompleteCommit waits ``hold_ms`` after its markers (the
    fault point after_all_markers, held), then produce the next transaction's first batch at
    once (Produce v12): (its error, seconds it took, verifications sent)."""
    node = await started(tmp_path, nursery, topics={"t": 1}, **{
        "kconform.fault": "after_all_markers", "kconform.fault.action": "hold", "kconform.fault.hold.ms": str(hold_ms)})
    c, pid, e0 = await open_txn(node, "tx", {("t", 0)}, TV_2)
    assert await c.handle_end_transaction("tx", pid, e0, True, TV_2) == TxnResult(Errors.NONE, pid, e0 + 1)
    manager = node.broker.add_partitions_manager
    calls = []
    verify = manager.verify

    async def counting(*args, **kw):
        answers = await verify(*args, **kw)
        calls.append(answers[("t", 0)])
        return answers

    manager.verify = counting
    t0 = trio.current_time()
    r = await _produce(node, node.topics.partition("t", 0), _txn_batch(pid, e0 + 1), Op.ADD_PARTITION)
    return r.error, trio.current_time() - t0, calls


@run
async def test_tv2_produce_verification_retries_concurrent_transactions(tmp_path, nursery):
    """Kafka's maybeRetryOnConcurrentTransactions: CompleteCommit 60 ms late -- the leader asks
    again every 20 ms and the batch is accepted, no error reaches the producer."""
    err, took, calls = await _verify_next_txn_while_complete_held(tmp_path, nursery, 60)
    assert err == Errors.NONE
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
