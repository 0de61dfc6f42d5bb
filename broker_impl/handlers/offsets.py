"""Committed offsets: OffsetCommit (8) v2-v10, OffsetFetch (9) v1-v10, OffsetDelete (47) v0.

Every schema version is implemented. v10 of both names topics by topic id
(KIP-848): the id is resolved through the topic registry and an unknown id
reads UNKNOWN_TOPIC_ID, as in Kafka; offsets are still kept by topic name
(that is what ``__consumer_offsets`` records hold).

As Kafka's KafkaApis does before calling the coordinator, OffsetCommit and
OffsetDelete check that each partition exists (UNKNOWN_TOPIC_OR_PARTITION
otherwise: measured on Kafka 4.3.1 for a partition index the topic lacks).
A group this broker does not coordinate reads NOT_COORDINATOR; a commit is answered
once it is replicated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import handles
from ..protocol.errors import Errors
from ..cluster.authorizer import AclOperation as Op, ResourceType as Res, allowed
from .groups import group_denied
from .metadata import ZERO_UUID

if TYPE_CHECKING:
    from ..server.broker import Broker


def _resolve(broker: Broker, version: int, by_id_from: int, name, topic_id):
    """(name, topic_id, error) of a request topic."""
    if version >= by_id_from:
        t = broker.topics.by_id.get(bytes(topic_id))
        if t is None:
            return None, topic_id, Errors.UNKNOWN_TOPIC_ID
        return t.name, topic_id, Errors.NONE
    t = broker.topics.get(name)
    if t is None:
        return name, ZERO_UUID, Errors.UNKNOWN_TOPIC_OR_PARTITION
    return name, t.topic_id, Errors.NONE


@handles("OffsetCommit")
async def handle_offset_commit(broker: Broker, ctx, req):
    R = ctx.api.Response
    T = R.OffsetCommitResponseTopic
    P = T.OffsetCommitResponsePartition
    v = ctx.version
    entries = []
    resolved = []
    refused = group_denied(broker, ctx, req.group_id)
    for td in req.topics or ():
        name, tid, err = _resolve(broker, v, 10, td.name, td.topic_id)
        if refused is not None:
            err = refused    # KafkaApis: READ on the group, else every partition refused
        elif name is not None and not allowed(broker, ctx, Op.READ, Res.TOPIC, name):
            err = Errors.TOPIC_AUTHORIZATION_FAILED
        resolved.append((td, name, tid, err))
        if err is Errors.NONE:
            for pd in td.partitions or ():
                if broker.topics.partition(name, pd.partition_index) is not None:
                    entries.append((name, pd.partition_index, pd.committed_offset,
                                    pd.committed_leader_epoch if v >= 6 else -1, pd.committed_metadata))
    results = {}
    gc = broker.group_coordinator
    not_here = gc.coordinator_error(req.group_id)
    if not_here is not None:
        results = {(name, pd.partition_index): not_here for _td, name, _tid, err in resolved if err is Errors.NONE
                   for pd in _td.partitions or ()}
    elif entries:
        results = gc.commit_offsets(
            group_id=req.group_id, member_id=req.member_id or "", group_instance_id=req.group_instance_id,
            generation_id=req.generation_id_or_member_epoch,
            retention_time_ms=req.retention_time_ms if v <= 4 else -1, offsets=entries, api_version=v)
        if any(e is Errors.NONE for e in results.values()):
            replicated = await gc.await_replicated(req.group_id)
            if replicated is not Errors.NONE:
                results = {k: replicated if e is Errors.NONE else e for k, e in results.items()}
    out = []
    for td, name, tid, err in resolved:
        parts = [P(partition_index=pd.partition_index,
                   error_code=err if err is not Errors.NONE else results.get((name, pd.partition_index),
                                                                             Errors.UNKNOWN_TOPIC_OR_PARTITION))
                 for pd in td.partitions or ()]
        out.append(T(name=td.name, topic_id=td.topic_id, partitions=parts))
    return R(throttle_time_ms=0, topics=out)


async def _fetch_group(broker: Broker, ctx, group_id: str, topics, require_stable: bool,
                       member_id: str | None = None, member_epoch: int = -1):
    """Run one group's fetch; returns (group error, [(name, topic_id, [(p, off, epoch, md, err)])]).
    require_stable reads after the group's pending writes (GroupCoordinator.await_stable).
    KafkaApis: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED), on each topic (a topic
    refused is left out of an all-topics fetch, else its partitions are TOPIC_AUTHORIZATION_FAILED,
    after the others)."""
    if not allowed(broker, ctx, Op.DESCRIBE, Res.GROUP, group_id):
        return Errors.GROUP_AUTHORIZATION_FAILED, []
    err, out = await _fetch_offsets(broker, ctx.version, group_id, topics, require_stable, member_id, member_epoch)
    if broker.authorizer is None or err is not Errors.NONE:
        return err, out
    kept, refused = [], []
    for name, tid, parts in out:
        if name is None or allowed(broker, ctx, Op.DESCRIBE, Res.TOPIC, name):
            kept.append((name, tid, parts))
        elif topics is not None:
            refused.append((name, tid, [(p[0], -1, -1, "", Errors.TOPIC_AUTHORIZATION_FAILED) for p in parts]))
    return err, kept + refused


async def _fetch_offsets(broker: Broker, version: int, group_id: str, topics, require_stable: bool,
                         member_id: str | None, member_epoch: int):
    gc = broker.group_coordinator
    by_id = version >= 10
    not_here = gc.coordinator_error(group_id)
    if not_here is not None:
        return not_here, []
    if require_stable:
        err = await gc.await_stable(group_id)
        if err is not Errors.NONE:
            return err, []
    if topics is None:
        err, res = gc.fetch_offsets(group_id, None, require_stable, member_id, member_epoch)
        out = []
        for name, parts in res:
            t = broker.topics.get(name)
            if by_id and t is None:
                continue       # a deleted topic has no id to answer with
            out.append((name, t.topic_id if t is not None else ZERO_UUID, parts))
        return err, out
    wanted = []
    unknown = {}
    for td in topics:
        if by_id:
            t = broker.topics.by_id.get(bytes(td.topic_id))
            if t is None:
                unknown[len(wanted)] = td
                wanted.append((None, td.topic_id, list(td.partition_indexes or ())))
                continue
            wanted.append((t.name, td.topic_id, list(td.partition_indexes or ())))
        else:
            wanted.append((td.name, ZERO_UUID, list(td.partition_indexes or ())))
    err, res = gc.fetch_offsets(group_id, [(n, ps) for n, _tid, ps in wanted if n is not None], require_stable,
                                member_id, member_epoch)
    it = iter(res)
    out = []
    for i, (name, tid, ps) in enumerate(wanted):
        if i in unknown:
            out.append((name, tid, [(p, -1, -1, "", Errors.UNKNOWN_TOPIC_ID) for p in ps]))
        else:
            _n, parts = next(it, (name, []))
            out.append((name, tid, parts))
    return err, out


@handles("OffsetFetch")
async def handle_offset_fetch(broker: Broker, ctx, req):
    R = ctx.api.Response
    v = ctx.version
    require_stable = bool(req.require_stable) if v >= 7 else False
    if v >= 8:
        G = R.OffsetFetchResponseGroup
        T = G.OffsetFetchResponseTopics
        P = T.OffsetFetchResponsePartitions
        groups = []
        for g in req.groups or ():
            # v9+: a KIP-848 member names itself and its epoch (checked for consumer groups only)
            err, res = await _fetch_group(broker, ctx, g.group_id, g.topics, require_stable,
                                          g.member_id if v >= 9 else None, g.member_epoch if v >= 9 else -1)
            topics = [] if err is not Errors.NONE else [
                T(name=name or "", topic_id=tid,
                  partitions=[P(partition_index=p, committed_offset=off, committed_leader_epoch=ep, metadata=md,
                                error_code=e) for p, off, ep, md, e in parts])
                for name, tid, parts in res]
            groups.append(G(group_id=g.group_id, topics=topics, error_code=err))
        return R(throttle_time_ms=0, groups=groups)
    T = R.OffsetFetchResponseTopic
    P = T.OffsetFetchResponsePartition
    topics_req = req.topics
    if topics_req is None and v < 2:
        topics_req = []
    err, res = await _fetch_group(broker, ctx, req.group_id, topics_req, require_stable)
    if err is not Errors.NONE:
        if v >= 2:
            return R(throttle_time_ms=0, topics=[], error_code=err)
        # v1 has no top-level error: every requested partition carries it.
        return R(throttle_time_ms=0, topics=[
            T(name=td.name, partitions=[P(partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                                          metadata="", error_code=err) for p in td.partition_indexes or ()])
            for td in req.topics or ()])
    topics = [T(name=name, partitions=[P(partition_index=p, committed_offset=off, committed_leader_epoch=ep,
                                         metadata=md, error_code=e) for p, off, ep, md, e in parts])
              for name, _tid, parts in res]
    return R(throttle_time_ms=0, topics=topics, error_code=Errors.NONE)


@handles("OffsetDelete")
async def handle_offset_delete(broker: Broker, ctx, req):
    """OffsetDelete (47): unknown topics read UNKNOWN_TOPIC_OR_PARTITION (KafkaApis' check);
    the group rules are the coordinator's."""
    R = ctx.api.Response
    T = R.OffsetDeleteResponseTopic
    P = T.OffsetDeleteResponsePartition
    # KafkaApis: DELETE on the group, then READ on each topic
    if not allowed(broker, ctx, Op.DELETE, Res.GROUP, req.group_id):
        return R(error_code=Errors.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0, topics=[])
    readable = {td.name for td in req.topics or () if allowed(broker, ctx, Op.READ, Res.TOPIC, td.name)}
    wanted = []
    for td in req.topics or ():
        wanted.extend((td.name, pd.partition_index) for pd in td.partitions or ()
                      if td.name in readable and broker.topics.partition(td.name, pd.partition_index) is not None)
    gc = broker.group_coordinator
    err = gc.coordinator_error(req.group_id) or Errors.NONE
    results = {}
    if err is Errors.NONE:
        err, results = gc.delete_offsets(req.group_id, wanted)
    if err is Errors.NONE:
        err = await gc.await_replicated(req.group_id)
    if err is not Errors.NONE:
        return R(error_code=err, throttle_time_ms=0, topics=[])
    topics = []
    for td in req.topics or ():
        topics.append(T(name=td.name, partitions=[
            P(partition_index=pd.partition_index,
              error_code=Errors.TOPIC_AUTHORIZATION_FAILED if td.name not in readable
              else results.get((td.name, pd.partition_index), Errors.NONE)
              if broker.topics.partition(td.name, pd.partition_index) is not None
              else Errors.UNKNOWN_TOPIC_OR_PARTITION)
            for pd in td.partitions or ()]))
    return R(error_code=Errors.NONE, throttle_time_ms=0, topics=topics)
