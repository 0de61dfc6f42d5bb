"""Transaction APIs (KafkaApis' handlers): AddPartitionsToTxn (24), AddOffsetsToTxn (25),
EndTxn (26), WriteTxnMarkers (27), TxnOffsetCommit (28), DescribeProducers (61),
DescribeTransactions (65), ListTransactions (66).

The decisions are the TransactionCoordinator's (``coordinators/transaction.py``); this module
does what KafkaApis does around them: request shape per version, topic checks, and the
per-version error rewriting (PRODUCER_FENCED is INVALID_PRODUCER_EPOCH for clients that predate
it: InitProducerId < v4, AddPartitionsToTxn / AddOffsetsToTxn / EndTxn < v2). WriteTxnMarkers
appends through the replica manager (``append_records``, as Produce does); TxnOffsetCommit
verifies the offsets partition with the transaction's coordinator through the
AddPartitionsToTxnManager, as a Produce's partitions are.
"""

from __future__ import annotations

import re
import time
from contextlib import ExitStack
from typing import TYPE_CHECKING

from . import handles
from ..cluster.append import TransactionSupportedOperation
from ..cluster.topics import by_topic, validate_topic_name
from ..coordinators.group_store import operation_error_to_response
from ..coordinators.transaction_markers import GROUP_METADATA_TOPIC
from ..coordinators.transaction_metadata import TV_0, TV_2
from ..log import records as rec
from ..log.producer_state import AppendOrigin
from ..protocol.errors import Errors, KafkaError
from ..cluster.authorizer import AclOperation as Op, ResourceType as Res, allowed, allowed_cluster

if TYPE_CHECKING:
    from ..server.broker import Broker


def _fenced_for(version: int, first_with_fenced: int, err: int) -> int:
    if version < first_with_fenced and err == Errors.PRODUCER_FENCED:
        return Errors.INVALID_PRODUCER_EPOCH
    return err


# ---------------------------------------------------------------- AddPartitionsToTxn
@handles("AddPartitionsToTxn")
async def handle_add_partitions_to_txn(broker: Broker, ctx, req):
    R = ctx.api.Response
    TR = R.AddPartitionsToTxnTopicResult
    PR = TR.AddPartitionsToTxnPartitionResult
    v = ctx.version
    coordinator = broker.txn_coordinator
    if v >= 4 and not allowed_cluster(broker, ctx, Op.CLUSTER_ACTION):
        # v4+ come from brokers only (KafkaApis' authorizeClusterOperation)
        return R(throttle_time_ms=0, error_code=Errors.CLUSTER_AUTHORIZATION_FAILED, results_by_topic_v3_and_below=[],
                 results_by_transaction=[])
    if v < 4:
        txns = [(req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                 req.v3_and_below_producer_epoch, False, req.v3_and_below_topics)]
    else:
        txns = [(t.transactional_id, t.producer_id, t.producer_epoch, t.verify_only, t.topics)
                for t in req.transactions]
    results = []
    for tid, pid, epoch, verify_only, topics in txns:
        partitions = [(t.name, p) for t in topics for p in t.partitions]
        errors: dict = {}
        # v0-3 come from clients: WRITE on the transactional id, then on each topic (but the
        # internal ones), KafkaApis' order: unauthorized, unknown, not attempted
        if v < 4 and not allowed(broker, ctx, Op.WRITE, Res.TRANSACTIONAL_ID, tid):
            results.append((tid, _topic_results(TR, PR, partitions, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)))
            continue
        denied = {tp for tp in partitions if v < 4 and not tp[0].startswith("__")
                  and not allowed(broker, ctx, Op.WRITE, Res.TOPIC, tp[0])}
        unknown = {tp for tp in partitions if broker.topics.partition(*tp) is None}
        if unknown or denied:
            # any bad partition fails the whole transaction's request
            errors = {tp: Errors.TOPIC_AUTHORIZATION_FAILED if tp in denied else Errors.UNKNOWN_TOPIC_OR_PARTITION
                      if tp in unknown else Errors.OPERATION_NOT_ATTEMPTED for tp in partitions}
        elif verify_only:
            errors = coordinator.verify_partitions(tid, pid, epoch, partitions)
        else:
            client_tv = TV_2 if v > 3 else TV_0   # TransactionVersion.transactionVersionForAddPartitionsToTxn
            err = await coordinator.add_partitions(tid, pid, epoch, set(partitions), client_tv)
            err = _fenced_for(v, 2, err)
            errors = {tp: err for tp in partitions}
        results.append((tid, _topic_results(TR, PR, partitions, errors)))
    if v < 4:
        return R(throttle_time_ms=0, error_code=Errors.NONE, results_by_transaction=[],
                 results_by_topic_v3_and_below=results[0][1])
    return R(throttle_time_ms=0, error_code=Errors.NONE, results_by_topic_v3_and_below=[],
             results_by_transaction=[R.AddPartitionsToTxnResult(transactional_id=tid, topic_results=tr)
                                     for tid, tr in results])


def _topic_results(TR, PR, partitions, errors):
    """AddPartitionsToTxn's per topic results; ``errors``: by partition, or one for all."""
    def error(tp):
        return errors[tp] if isinstance(errors, dict) else errors
    return [TR(name=t, results_by_partition=[PR(partition_index=p, partition_error_code=error((t, p))) for p in ps])
            for t, ps in by_topic(partitions).items()]


# ---------------------------------------------------------------- AddOffsetsToTxn
@handles("AddOffsetsToTxn")
async def handle_add_offsets_to_txn(broker: Broker, ctx, req):
    R = ctx.api.Response
    if not allowed(broker, ctx, Op.WRITE, Res.TRANSACTIONAL_ID, req.transactional_id):
        return R(throttle_time_ms=0, error_code=Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not allowed(broker, ctx, Op.READ, Res.GROUP, req.group_id):
        return R(throttle_time_ms=0, error_code=Errors.GROUP_AUTHORIZATION_FAILED)
    coordinator = broker.txn_coordinator
    tp = coordinator.offsets_partition(req.group_id)
    err = await coordinator.add_partitions(req.transactional_id, req.producer_id, req.producer_epoch, {tp}, TV_0)
    return R(throttle_time_ms=0, error_code=_fenced_for(ctx.version, 2, err))


# ---------------------------------------------------------------- EndTxn
@handles("EndTxn")
async def handle_end_txn(broker: Broker, ctx, req):
    R = ctx.api.Response
    if not allowed(broker, ctx, Op.WRITE, Res.TRANSACTIONAL_ID, req.transactional_id):
        return R(throttle_time_ms=0, error_code=Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer_id=-1,
                 producer_epoch=-1)
    client_tv = TV_2 if ctx.version > 4 else TV_0   # TransactionVersion.transactionVersionForEndTxn
    result = await broker.txn_coordinator.handle_end_transaction(
        req.transactional_id, req.producer_id, req.producer_epoch, req.committed, client_tv,
        after_response=ctx.after_response)
    return R(throttle_time_ms=0, error_code=_fenced_for(ctx.version, 2, result.error), producer_id=result.producer_id,
             producer_epoch=result.producer_epoch)


# ---------------------------------------------------------------- WriteTxnMarkers
@handles("WriteTxnMarkers")
async def handle_write_txn_markers(broker: Broker, ctx, req):
    """Broker to broker (coordinators/transaction_markers): each marker's COMMIT/ABORT batch on
    its partitions, appended through ReplicaManager.append_records with acks=all, one marker after
    the other (NOT_LEADER_OR_FOLLOWER where this broker does not lead); a data partition refuses
    a marker of an older coordinator epoch (TRANSACTION_COORDINATOR_FENCED) or producer epoch.
    Once a marker on ``__consumer_offsets`` is replicated, the group coordinator settles that
    producer's transactional offsets, as Kafka's handler has it do (a require_stable OffsetFetch
    of those groups waits meanwhile). Also a tool for tests and operators (S11)."""
    R = ctx.api.Response
    MR = R.WritableTxnMarkerResult
    TR = MR.WritableTxnMarkerTopicResult
    PR = TR.WritableTxnMarkerPartitionResult
    if not (allowed_cluster(broker, ctx, Op.ALTER) or allowed_cluster(broker, ctx, Op.CLUSTER_ACTION)):
        # KafkaApis: ALTER on the cluster, else CLUSTER_ACTION; the error on every partition
        return R(markers=[MR(producer_id=m.producer_id, topics=[
            TR(name=t.name, partitions=[PR(partition_index=p, error_code=Errors.CLUSTER_AUTHORIZATION_FAILED)
                                        for p in t.partition_indexes]) for t in m.topics]) for m in req.markers])
    gc = broker.group_coordinator
    timeout_ms = broker.config.int("request.timeout.ms")
    out = []
    for m in req.markers:
        now = int(time.time() * 1000)
        batch = rec.build_control_batch(rec.COMMIT if m.transaction_result else rec.ABORT,
                                        producer_id=m.producer_id, producer_epoch=m.producer_epoch,
                                        coordinator_epoch=m.coordinator_epoch, timestamp_ms=now)
        entries = {}
        requested = []          # (topic, [(index, Partition or None)])
        refused = {}            # offsets partitions whose group coordinator is not ready
        for t in m.topics:
            parts = [(p, broker.topics.partition(t.name, p)) for p in t.partition_indexes]
            for _, part in parts:
                if part is None:
                    continue
                if part.topic == GROUP_METADATA_TOPIC and gc.partition_error(part.index) is not None:
                    # KafkaApis: the group coordinator's NOT_COORDINATOR / LOAD_IN_PROGRESS read
                    # NOT_LEADER_OR_FOLLOWER, which the transaction coordinator retries
                    refused[part] = Errors.NOT_LEADER_OR_FOLLOWER
                else:
                    entries[part] = batch
            requested.append((t.name, parts))
        with ExitStack() as settling:
            for part in entries:
                if part.topic == GROUP_METADATA_TOPIC:
                    settling.enter_context(gc.settling_txn_offsets(part.index))
            results = await broker.replica_manager.append_records(
                entries, acks=-1, timeout_ms=timeout_ms, origin=AppendOrigin.COORDINATOR,
                transaction_version=m.transaction_version if ctx.version >= 2 else 0, now=now)
            if any(part.topic == GROUP_METADATA_TOPIC and r.error == Errors.NONE for part, r in results.items()):
                gc.complete_txn_offsets(m.producer_id, m.transaction_result)
        out.append(MR(producer_id=m.producer_id, topics=[
            TR(name=name, partitions=[PR(partition_index=p, error_code=Errors.UNKNOWN_TOPIC_OR_PARTITION
                                         if part is None else refused[part] if part in refused
                                         else results[part].error) for p, part in parts])
            for name, parts in requested]))
    return R(markers=out)


# ---------------------------------------------------------------- TxnOffsetCommit
@handles("TxnOffsetCommit")
async def handle_txn_offset_commit(broker: Broker, ctx, req):
    """Validated here (topics, the group's coordinator, KIP-890 verification of the offsets
    partition with the transaction's coordinator), staged in the group coordinator: invisible
    until the COMMIT marker, dropped on ABORT (OffsetFetch RequireStable answers
    UNSTABLE_OFFSET_COMMIT meanwhile). The producer's epoch is checked where Kafka checks it:
    the offsets go to ``__consumer_offsets`` as a transactional batch of that producer, which the
    partition's producer state refuses for an older epoch (INVALID_PRODUCER_EPOCH)."""
    R = ctx.api.Response
    T = R.TxnOffsetCommitResponseTopic
    P = T.TxnOffsetCommitResponsePartition
    v = ctx.version
    coordinator = broker.txn_coordinator
    gc = broker.group_coordinator

    def answer(errors: dict):
        return R(throttle_time_ms=0, topics=[T(name=t, partitions=[P(partition_index=p, error_code=errors[(t, p)])
                                                                    for p in ps])
                                             for t, ps in by_topic(errors).items()])

    errors: dict = {}
    valid = {}
    # KafkaApis: WRITE on the transactional id, READ on the group (the error on every
    # partition), then READ on each topic
    for op, rtype, name, err in ((Op.WRITE, Res.TRANSACTIONAL_ID, req.transactional_id,
                                  Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                                 (Op.READ, Res.GROUP, req.group_id, Errors.GROUP_AUTHORIZATION_FAILED)):
        if not allowed(broker, ctx, op, rtype, name):
            return answer({(t.name, p.partition_index): err for t in req.topics for p in t.partitions})
    for t in req.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if not allowed(broker, ctx, Op.READ, Res.TOPIC, t.name):
                errors[tp] = Errors.TOPIC_AUTHORIZATION_FAILED
            elif broker.topics.partition(*tp) is None:
                errors[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                valid[tp] = p
    if not valid:
        return answer(errors)

    def fail_all(err):
        if v < 2 and err == Errors.COORDINATOR_LOAD_IN_PROGRESS:
            err = Errors.COORDINATOR_NOT_AVAILABLE
        errors.update({tp: err for tp in valid})
        return answer(errors)

    if not req.group_id:  # the group coordinator checks it before the transaction (Kafka 4.3.1)
        return fail_all(Errors.INVALID_GROUP_ID)
    not_here = gc.coordinator_error(req.group_id)
    if not_here is not None:
        return fail_all(not_here)
    # The producer epoch, as the __consumer_offsets partition's producer state would check it. Only
    # where this broker is also the transaction's coordinator: elsewhere it knows no epoch to check.
    try:
        md = coordinator.txn_manager.get(req.transactional_id)
    except KafkaError as exc:
        if exc.error != Errors.NOT_COORDINATOR:   # still loading
            return fail_all(exc.error)
        md = None
    if md is not None and md.producer_id == req.producer_id and req.producer_epoch < md.producer_epoch:
        return fail_all(Errors.INVALID_PRODUCER_EPOCH)
    manager = broker.add_partitions_manager
    operation = TransactionSupportedOperation.for_txn_offset_commit(v)
    if manager.verifies(operation):
        # KIP-890 for the offsets partition, as for a Produce's data partitions: v5+ (TV2) adds it
        # to the transaction implicitly (the client sends no AddOffsetsToTxn), older versions only
        # verify that AddOffsetsToTxn added it; a refusal reads as the group coordinator maps it.
        offsets_tp = coordinator.offsets_partition(req.group_id)
        err = (await manager.verify(req.transactional_id, req.producer_id, req.producer_epoch, [offsets_tp],
                                    operation))[offsets_tp]
        if err != Errors.NONE:
            return fail_all(operation_error_to_response(err))
    err = gc.validate_txn_offset_commit(req.group_id, req.member_id, req.generation_id, req.group_instance_id)
    if err:
        return fail_all(err)
    offsets = [(t, p, pd.committed_offset, pd.committed_leader_epoch, pd.committed_metadata)
               for (t, p), pd in valid.items()]
    err = gc.stage_txn_offsets(req.group_id, req.producer_id, req.producer_epoch, offsets)
    if err == Errors.NONE:
        err = await gc.await_replicated(req.group_id)
    errors.update({tp: err for tp in valid})
    return answer(errors)


# ---------------------------------------------------------------- DescribeTransactions
@handles("DescribeTransactions")
async def handle_describe_transactions(broker: Broker, ctx, req):
    R = ctx.api.Response
    T = R.TransactionState
    # KafkaApis: DESCRIBE on each transactional id; of the others' partitions only the topics
    # one may DESCRIBE are listed
    states = []
    for tid in req.transactional_ids:
        if not allowed(broker, ctx, Op.DESCRIBE, Res.TRANSACTIONAL_ID, tid):
            states.append(T(error_code=Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, transactional_id=tid))
            continue
        state = broker.txn_coordinator.describe(tid, T)
        state.topics = [t for t in state.topics if allowed(broker, ctx, Op.DESCRIBE, Res.TOPIC, t.topic)]
        states.append(state)
    return R(throttle_time_ms=0, transaction_states=states)


# ---------------------------------------------------------------- ListTransactions
@handles("ListTransactions")
async def handle_list_transactions(broker: Broker, ctx, req):
    R = ctx.api.Response
    pattern = None
    if ctx.version >= 2 and req.transactional_id_pattern:
        try:
            pattern = re.compile(req.transactional_id_pattern)
        except re.error:
            return R(throttle_time_ms=0, error_code=Errors.INVALID_REGULAR_EXPRESSION, unknown_state_filters=[],
                     transaction_states=[])
    duration = req.duration_filter if ctx.version >= 1 else -1
    err, unknown, rows = broker.txn_coordinator.list_transactions(set(req.producer_id_filters or ()),
                                                                  list(req.state_filters or ()), duration, pattern)
    TS = R.TransactionState
    # KafkaApis: only the transactional ids one may DESCRIBE
    return R(throttle_time_ms=0, error_code=err, unknown_state_filters=unknown,
             transaction_states=[TS(transactional_id=t, producer_id=p, transaction_state=s) for t, p, s in rows
                                 if allowed(broker, ctx, Op.DESCRIBE, Res.TRANSACTIONAL_ID, t)])


# ---------------------------------------------------------------- DescribeProducers
@handles("DescribeProducers")
async def handle_describe_producers(broker: Broker, ctx, req):
    R = ctx.api.Response
    TResp = R.TopicResponse
    PResp = TResp.PartitionResponse
    PS = PResp.ProducerState
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partition_indexes:
            part = broker.topics.partition(t.name, p)
            if broker.authorizer is not None and _valid_topic_name(t.name) and \
                    not allowed(broker, ctx, Op.READ, Res.TOPIC, t.name):
                # KafkaApis: READ on the topic, after the name's validity
                parts.append(PResp(partition_index=p, error_code=Errors.TOPIC_AUTHORIZATION_FAILED,
                                   error_message="Topic authorization failed.", active_producers=[]))
                continue
            if part is None:
                try:  # a name that cannot be a topic's is INVALID_TOPIC_EXCEPTION, as in Kafka
                    validate_topic_name(t.name)
                    err, msg = Errors.UNKNOWN_TOPIC_OR_PARTITION, None
                except KafkaError as exc:
                    err, msg = exc.error, exc.message
                parts.append(PResp(partition_index=p, error_code=err, error_message=msg, active_producers=[]))
                continue
            if not part.is_leader:
                parts.append(PResp(partition_index=p, error_code=Errors.NOT_LEADER_OR_FOLLOWER, error_message=None,
                                   active_producers=[]))
                continue
            producers = [PS(**d) for d in part.log.describe_producers()]
            parts.append(PResp(partition_index=p, error_code=Errors.NONE, error_message=None,
                               active_producers=producers))
        topics.append(TResp(name=t.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)


def _valid_topic_name(name: str) -> bool:
    try:
        validate_topic_name(name)
    except KafkaError:
        return False
    return True
