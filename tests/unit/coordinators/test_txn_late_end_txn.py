"""S20: an EndTxn delayed in the network past the client's retry reaches the coordinator after
the producer began its next transaction.

With transaction version 1 a transaction is named by (producer id, epoch) only, and the epoch
does not change between transactions, so the late EndTxn(COMMIT) is indistinguishable from a
commit of the next transaction and commits it (Jepsen's "aborted read"). Transaction version 2
bumps the epoch at every EndTxn, so the late request carries an old epoch and is fenced. The
expected answers are Apache Kafka 4.3.1's, measured with raw requests
(cases/txn/delayed_end_txn_raw) and with real clients through the proxy
(cases/txn/delayed_end_txn_tv1, _tv2).
"""

from __future__ import annotations

from broker_impl.coordinators.transaction import TxnResult
from broker_impl.coordinators.transaction_metadata import TV_0, TV_2, TransactionState
from broker_impl.protocol.errors import Errors

from tests.unit.coordinators.txn_helpers import open_txn, produce, run, settle, started

S = TransactionState


@run
async def test_tv1_late_commit_commits_the_next_transaction(tmp_path, nursery):
    node = await started(tmp_path, nursery, topics={"t": 1})
    c, pid, epoch = await open_txn(node, "tx", {("t", 0)})                     # "a", txn 1
    assert (await c.handle_end_transaction("tx", pid, epoch, True, TV_0)).error == Errors.NONE   # the retry
    await settle(c)
    assert await c.add_partitions("tx", pid, epoch, {("t", 0)}) == Errors.NONE          # txn 2, same epoch
    produce(node, "t", 0, pid, epoch, 1)                                       # "b"
    # the first EndTxn(COMMIT), late: same id and epoch, so it commits txn 2
    assert (await c.handle_end_transaction("tx", pid, epoch, True, TV_0)).error == Errors.NONE
    await settle(c)
    md = c.txn_manager.get("tx")
    assert md.state is S.COMPLETE_COMMIT and md.producer_epoch == epoch
    plog = node.topics.partition("t", 0).log
    assert plog.last_stable_offset == plog.log_end_offset == 4                 # a, COMMIT, b, COMMIT
    # the application aborts "its" txn 2: too late
    assert (await c.handle_end_transaction("tx", pid, epoch, False, TV_0)).error == Errors.INVALID_TXN_STATE


@run
async def test_tv1_late_commit_while_the_previous_markers_are_written(tmp_path, nursery):
    """Until txn 1's markers are written (state PrepareCommit, CompleteCommit pending) the
    producer cannot begin txn 2 and no EndTxn lands, commit or abort: CONCURRENT_TRANSACTIONS,
    which clients retry (Kafka checks the pending transition before the state; measured on
    4.3.1 with raw requests: AddPartitionsToTxn v3 and EndTxn v4 right after the commit)."""
    node = await started(tmp_path, nursery, topics={"t": 1})
    c, pid, epoch = await open_txn(node, "tx", {("t", 0)})
    assert (await c.handle_end_transaction("tx", pid, epoch, True, TV_0)).error == Errors.NONE
    # no checkpoint since: the marker task has not run yet
    assert c.txn_manager.get("tx").state is S.PREPARE_COMMIT
    assert await c.add_partitions("tx", pid, epoch, {("t", 0)}) == Errors.CONCURRENT_TRANSACTIONS
    assert (await c.handle_end_transaction("tx", pid, epoch, True, TV_0)).error == Errors.CONCURRENT_TRANSACTIONS
    assert (await c.handle_end_transaction("tx", pid, epoch, False, TV_0)).error == Errors.CONCURRENT_TRANSACTIONS
    await settle(c)
    assert c.txn_manager.get("tx").state is S.COMPLETE_COMMIT
    assert (await c.handle_end_transaction("tx", pid, epoch, False, TV_0)).error == Errors.INVALID_TXN_STATE


@run
async def test_tv2_late_commit_is_fenced_by_the_epoch_bump(tmp_path, nursery):
    node = await started(tmp_path, nursery, topics={"t": 1})
    c, pid, e0 = await open_txn(node, "tx", {("t", 0)}, TV_2)                  # "x", txn 1
    assert await c.handle_end_transaction("tx", pid, e0, True, TV_2) == TxnResult(Errors.NONE, pid, e0 + 1)
    await settle(c)
    assert await c.add_partitions("tx", pid, e0 + 1, {("t", 0)}, TV_2) == Errors.NONE  # txn 2 at e0+1
    produce(node, "t", 0, pid, e0 + 1, 0)                                      # "y"
    # the first EndTxn(COMMIT), late, at the old epoch: fenced, txn 2 untouched
    assert (await c.handle_end_transaction("tx", pid, e0, True, TV_2)).error == Errors.PRODUCER_FENCED
    md = c.txn_manager.get("tx")
    assert md.state is S.ONGOING and md.producer_epoch == e0 + 1
    # the application's abort goes through and bumps again
    assert await c.handle_end_transaction("tx", pid, e0 + 1, False, TV_2) == TxnResult(Errors.NONE, pid, e0 + 2)
    await settle(c)
    assert c.txn_manager.get("tx").state is S.COMPLETE_ABORT
    plog = node.topics.partition("t", 0).log
    assert plog.last_stable_offset == plog.log_end_offset == 4                 # x, COMMIT, y, ABORT
