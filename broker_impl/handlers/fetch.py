"""Fetch (1): whole batches from the segment files, with long poll -- for consumers, and for
the followers of a partition (replica id >= 0).

- Followers and consumers before v11 are answered by the partition's leader only
  (NOT_LEADER_OR_FOLLOWER elsewhere, with the leader it knows of, KIP-951); a v11+ consumer by
  any replica, up to what that replica knows is committed (KIP-392, as Kafka's fetchOnlyLeader);
  the request's ``current_leader_epoch`` is checked first (v9+).
- A consumer reads up to the high watermark with read_uncommitted, up to the last stable
  offset (LSO) with read_committed, and the latter also gets the aborted transactions
  overlapping the returned range, so the consumer can drop aborted records itself (Kafka never
  filters records on the broker).
- A follower reads up to the log end offset; its fetch offset tells the leader its log end
  offset (server/replica_manager.record_follower_fetch: ISR and high watermark).
- A last fetched epoch (v12+, KIP-595's divergence detection) is checked against the leader
  epoch cache, as Kafka's Partition.readRecords does for every fetcher: an epoch the cache cannot
  place is OFFSET_OUT_OF_RANGE; one that ended before the fetch offset (or a smaller epoch stands
  in its place) answers no records and the diverging epoch, and a follower's fetch state is then
  left as it was.
- Byte limits follow KIP-74: partitions are filled in request order up to
  ``max_bytes`` overall and ``partition_max_bytes`` each, except that the
  first non-empty partition always returns at least one whole batch.
- Long poll: when fewer than ``min_bytes`` are available the request waits,
  up to ``max_wait_ms``, for appends (or a higher high watermark), then answers with what is
  there -- but a partition whose read fails or diverges answers the request at once, before and
  during the wait, as Kafka's ReplicaManager and DelayedFetch do (``_answer_now``).
- Fetch sessions (KIP-227, server/fetch_session.py): a full fetch at epoch 0 opens a session, an
  incremental one names only what changed and is answered only the partitions with something to
  say; session errors (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
  FETCH_SESSION_TOPIC_ID_ERROR) as Kafka's FetchManager gives them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from . import handles
from ..log.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from ..protocol.errors import Errors, KafkaError
from ..cluster.authorizer import AclOperation as Op, ResourceType as Res, allowed, allowed_cluster
from ..server.fetch_session import FetchContext, FetchTarget

if TYPE_CHECKING:
    from ..server.broker import Broker

READ_COMMITTED = 1
ZERO_ID = bytes(16)


def replica_id_of(ctx, req) -> int:
    """The fetching follower's broker id (-1: a consumer): the top-level field before v15, the
    ReplicaState since (KIP-903)."""
    if ctx.version < 15:
        return req.replica_id
    return req.replica_state.replica_id if req.replica_state is not None else -1


def _read_all(broker: Broker, ctx, req, targets: list[FetchTarget], endpoints: dict):
    """Every target partition read, in order: [(target, PartitionData)] and the bytes read."""
    R = ctx.api.Response
    P = R.FetchableTopicResponse.PartitionData
    A = P.AbortedTransaction
    by_id = ctx.version >= 13
    replica_id = replica_id_of(ctx, req)
    follower = replica_id >= 0
    committed = not follower and ctx.version >= 4 and req.isolation_level == READ_COMMITTED
    # Kafka's FetchParams.fetchOnlyLeader: followers, and consumers before v11 (which carry no
    # client metadata), read from the leader only; a v11+ consumer is served by any replica
    # (KIP-392), up to that replica's high watermark or last stable offset
    only_leader = follower or ctx.version < 11
    remaining = req.max_bytes if ctx.version >= 3 else 0x7FFFFFFF
    total = 0
    out = []
    rm = broker.replica_manager
    # KafkaApis: a follower needs CLUSTER_ACTION on the cluster (else every partition is
    # TOPIC_AUTHORIZATION_FAILED), a consumer READ on each topic (after an unknown topic id)
    follower_denied = follower and not allowed_cluster(broker, ctx, Op.CLUSTER_ACTION)
    authorized: dict = {}
    for target in targets:
        fp = target.fp
        topic = broker.topics.by_id.get(bytes(target.topic_id)) if by_id else broker.topics.get(target.topic)
        name = topic.name if topic is not None else target.topic
        if name not in authorized:
            authorized[name] = not follower_denied and (follower or (by_id and topic is None) or allowed(
                broker, ctx, Op.READ, Res.TOPIC, name))
        denied = not authorized[name]
        pr = P(partition_index=fp.partition, error_code=0, high_watermark=-1, last_stable_offset=-1,
               log_start_offset=-1, aborted_transactions=None if not committed else [],
               preferred_read_replica=-1, records=b"")
        out.append((target, pr))
        if denied:
            pr.error_code = Errors.TOPIC_AUTHORIZATION_FAILED
            pr.aborted_transactions = []
            continue
        if topic is None or not 0 <= fp.partition < len(topic.partitions):
            # Kafka 4.3.1 (measured): an unknown partition of a known topic id is
            # UNKNOWN_TOPIC_OR_PARTITION, and either answer carries an empty aborted list
            pr.error_code = Errors.UNKNOWN_TOPIC_ID if by_id and topic is None else Errors.UNKNOWN_TOPIC_OR_PARTITION
            pr.aborted_transactions = []
            continue
        part = topic.partitions[fp.partition]
        err = part.leader_error(fp.current_leader_epoch if ctx.version >= 9 else -1, require_leader=only_leader)
        if err is None and follower and replica_id not in part.remote:
            # Kafka's Partition.followerReplicaOrThrow, before anything is read: a fetch
            # from a node that is no follower of the partition
            err = Errors.NOT_LEADER_OR_FOLLOWER
        if err is not None:
            pr.error_code = err
            # the leader it knows of, from v16 on (KIP-951; Kafka's KafkaApis, both errors)
            leader_errors = (Errors.NOT_LEADER_OR_FOLLOWER, Errors.FENCED_LEADER_EPOCH)
            hint = rm.leader_hint(part) if ctx.version >= 16 and err in leader_errors else None
            if hint is not None:
                leader, epoch, host, port = hint
                pr.current_leader = P.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
                endpoints[leader] = R.NodeEndpoint(node_id=leader, host=host, port=port, rack=None)
            continue
        plog = part.log
        if ctx.version >= 12 and fp.last_fetched_epoch >= 0:
            epoch, end = part.end_offset_for_epoch(fp.last_fetched_epoch)
            if epoch == UNDEFINED_EPOCH or end == UNDEFINED_EPOCH_OFFSET or fp.fetch_offset < plog.log_start_offset:
                # Kafka answers this error with no offsets at all (-1: ReplicaManager's
                # createLogReadResult) and a null aborted list
                pr.error_code = Errors.OFFSET_OUT_OF_RANGE
                pr.aborted_transactions = None
                continue
        pr.high_watermark = plog.high_watermark
        pr.last_stable_offset = plog.last_stable_offset
        pr.log_start_offset = plog.log_start_offset
        if ctx.version >= 12 and fp.last_fetched_epoch >= 0 and (epoch < fp.last_fetched_epoch or end < fp.fetch_offset):
            pr.diverging_epoch = P.EpochEndOffset(epoch=epoch, end_offset=end)
            continue
        if fp.fetch_offset < plog.log_start_offset or fp.fetch_offset > plog.log_end_offset:
            _read_failed(pr, Errors.OFFSET_OUT_OF_RANGE)
            continue
        if follower:
            try:
                rm.record_follower_fetch(part, replica_id, fp.fetch_offset, fp.log_start_offset)
            except KafkaError as exc:
                _read_failed(pr, exc.error)
                continue
            pr.high_watermark = plog.high_watermark
            pr.last_stable_offset = plog.last_stable_offset
            upper = plog.log_end_offset
        else:
            upper = pr.last_stable_offset if committed else pr.high_watermark
        limit = min(fp.partition_max_bytes, remaining)
        if fp.fetch_offset >= upper or (limit <= 0 and total > 0):
            continue
        try:
            info = plog.read(fp.fetch_offset, limit, max_offset=upper, min_one_batch=total == 0)
        except KafkaError as exc:
            _read_failed(pr, exc.error)
            continue
        data = info.records
        if data:
            pr.records = data
            n = len(data)
            total += n
            remaining -= n
            if committed:
                pr.aborted_transactions = [A(producer_id=pid, first_offset=first)
                                           for pid, first in plog.aborted_transactions(fp.fetch_offset, info.aborted_upper_bound)]
    return out, total


#: Partition errors KafkaApis settles before the ReplicaManager reads (a topic one may not read,
#: an unknown topic id, a partition its metadata does not know): such a partition is left out of
#: the read, so it neither waits nor makes the others' answer come early.
SETTLED_BEFORE_READ = frozenset({Errors.TOPIC_AUTHORIZATION_FAILED, Errors.UNKNOWN_TOPIC_ID,
                                 Errors.UNKNOWN_TOPIC_OR_PARTITION})


def _read_partitions(answers: list) -> list[int]:
    """The answers' indices that the read itself decides (not SETTLED_BEFORE_READ)."""
    return [i for i, (_, pr) in enumerate(answers) if pr.error_code not in SETTLED_BEFORE_READ]


def _answer_now(answers: list, read: list[int], total: int, min_bytes: int, endpoints: dict) -> bool:
    """Whether a Fetch is answered now rather than held in long poll. Kafka's ReplicaManager.
    fetchMessages answers at once when enough bytes are there, nothing is left to read, a
    partition's read failed (any error), an epoch diverged, or a leader is pointed to; and its
    DelayedFetch completes a held one as soon as a partition it reads meets the same (leadership
    moved, the partition gone, the leader epoch fenced, a divergence after truncation) -- so a
    consumer whose leader moves during its poll learns it at once, not max_wait_ms later (nor
    never, when the broker stops meanwhile). `read`: _read_partitions of the first read."""
    if total >= min_bytes or not read or endpoints:
        return True
    return any(answers[i][1].error_code != 0 or answers[i][1].diverging_epoch.epoch >= 0 for i in read)


def _read_failed(pr, error: Errors) -> None:
    """A partition whose read failed after its offsets were looked up: Kafka answers the error
    with no offsets at all (ReplicaManager's LogReadResult of an exception: high watermark, last
    stable offset and log start -1, no aborted list), also for read_committed."""
    pr.error_code = error
    pr.high_watermark = pr.last_stable_offset = pr.log_start_offset = -1
    pr.aborted_transactions = None


def _targets(ctx, req) -> list[FetchTarget]:
    by_id = ctx.version >= 13
    return [FetchTarget(None if by_id else ft.topic, bytes(ft.topic_id) if by_id else ZERO_ID, fp)
            for ft in req.topics for fp in ft.partitions]


def _forgotten(ctx, req) -> list[tuple[str | None, bytes, int]]:
    by_id = ctx.version >= 13
    return [(None if by_id else ft.topic, bytes(ft.topic_id) if by_id else ZERO_ID, p)
            for ft in (req.forgotten_topics_data or []) for p in ft.partitions]


def _topics(ctx, answered: list) -> list:
    """The answered partitions as the response lists them: a topic entry per run of partitions
    of the same topic (FetchResponse.of)."""
    T = ctx.api.Response.FetchableTopicResponse
    by_id = ctx.version >= 13
    out: list = []
    last = None
    for target, pr in answered:
        key = (target.topic, target.topic_id)
        if key != last:
            out.append(T(topic="" if by_id else target.topic, topic_id=target.topic_id, partitions=[]))
            last = key
        out[-1].partitions.append(pr)
    return out


def _server_error(ctx, req):
    """What Kafka answers a Fetch it throws on (FetchRequest.getErrorResponse): the error at the top
    and, before v13, on every partition named."""
    R = ctx.api.Response
    P = R.FetchableTopicResponse.PartitionData
    answered = [] if ctx.version >= 13 else [
        (t, P(partition_index=t.fp.partition, error_code=Errors.UNKNOWN_SERVER_ERROR, high_watermark=-1,
              last_stable_offset=-1, log_start_offset=-1, aborted_transactions=[], preferred_read_replica=-1,
              records=b"")) for t in _targets(ctx, req)]
    return R(throttle_time_ms=0, error_code=Errors.UNKNOWN_SERVER_ERROR, session_id=req.session_id,
             responses=_topics(ctx, answered), node_endpoints=[])


@handles("Fetch")
async def handle_fetch(broker: Broker, ctx, req):
    R = ctx.api.Response
    now_ms = int(trio.current_time() * 1000)
    if ctx.version >= 7:
        try:
            fctx = broker.fetch_sessions.new_context(ctx.version, req.session_id, req.session_epoch,
                                                     replica_id_of(ctx, req) >= 0, _targets(ctx, req),
                                                     _forgotten(ctx, req), now_ms)
        except KafkaError:
            return _server_error(ctx, req)
    else:
        fctx = FetchContext(broker.fetch_sessions, "sessionless", _targets(ctx, req))
    endpoints: dict = {}
    answers, total = _read_all(broker, ctx, req, fctx.targets, endpoints)
    read = _read_partitions(answers)
    if fctx.kind != "error" and req.max_wait_ms > 0 and not _answer_now(answers, read, total, req.min_bytes, endpoints):
        with trio.move_on_after(req.max_wait_ms / 1000.0):
            while True:
                await broker.wait_for_append()
                answers, total = _read_all(broker, ctx, req, fctx.targets, endpoints)
                if _answer_now(answers, read, total, req.min_bytes, endpoints):
                    break
    error, session_id, answered = fctx.respond(answers, int(trio.current_time() * 1000))
    return R(throttle_time_ms=0, error_code=error, session_id=session_id, responses=_topics(ctx, answered),
             node_endpoints=list(endpoints.values()))
