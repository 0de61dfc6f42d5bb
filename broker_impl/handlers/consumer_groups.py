"""KIP-848 consumer groups: ConsumerGroupHeartbeat (68) v0-v1 and ConsumerGroupDescribe (69)
v0-v1, the versions Kafka 4.3.1 advertises.

The rules live in :mod:`~broker_impl.coordinators.consumer_group_manager`; these handlers
translate the wire messages. A group this broker does not coordinate reads NOT_COORDINATOR.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import handles
from ..coordinators.consumer_group_manager import HeartbeatRequest
from ..coordinators.group_metadata import group_id_valid
from ..protocol.errors import Errors, KafkaError
from ..cluster.authorizer import (GROUP_OPERATIONS, AclOperation as Op, ResourceType as Res, allowed,
                                 authorized_operations)
from .groups import _client_host
from .metadata import NO_AUTHORIZED_OPS

if TYPE_CHECKING:
    from ..server.broker import Broker

#: ConsumerGroupDescribe v1's member type (KIP-1099): this broker's members all use the
#: consumer protocol.
MEMBER_TYPE_CONSUMER = 1


@handles("ConsumerGroupHeartbeat")
async def handle_consumer_group_heartbeat(broker: Broker, ctx, req):
    R = ctx.api.Response
    gc = broker.group_coordinator
    # KafkaApis.handleConsumerGroupHeartbeat: READ on the group, DESCRIBE on every subscribed
    # topic (the code only: Kafka's error response carries no message).
    not_here = None
    if not allowed(broker, ctx, Op.READ, Res.GROUP, req.group_id):
        not_here = Errors.GROUP_AUTHORIZATION_FAILED
    elif any(not allowed(broker, ctx, Op.DESCRIBE, Res.TOPIC, t) for t in req.subscribed_topic_names or ()):
        not_here = Errors.TOPIC_AUTHORIZATION_FAILED
    else:
        not_here = gc.coordinator_error(req.group_id)
    if not_here is not None:
        return R(throttle_time_ms=0, error_code=not_here, member_epoch=0, heartbeat_interval_ms=0)
    owned = None
    if req.topic_partitions is not None:
        owned = [(bytes(tp.topic_id), list(tp.partitions or ())) for tp in req.topic_partitions]
    result = gc.consumer_group_heartbeat(HeartbeatRequest(
        group_id=req.group_id, member_id=req.member_id or "", member_epoch=req.member_epoch,
        instance_id=req.instance_id, rack_id=req.rack_id, rebalance_timeout_ms=req.rebalance_timeout_ms,
        subscribed_topic_names=list(req.subscribed_topic_names) if req.subscribed_topic_names is not None else None,
        subscribed_topic_regex=req.subscribed_topic_regex if ctx.version >= 1 else None,
        server_assignor=req.server_assignor, owned=owned, client_id=ctx.client_id or "",
        client_host=_client_host(ctx), api_version=ctx.version))
    error = result.error
    if error is Errors.NONE:
        error = await gc.await_replicated(req.group_id)
    if error is not Errors.NONE:
        return R(throttle_time_ms=0, error_code=error, error_message=result.error_message, member_epoch=0,
                 heartbeat_interval_ms=0)
    assignment = None
    if result.assignment is not None:
        A = R.Assignment
        assignment = A(topic_partitions=[A.TopicPartitions(topic_id=t, partitions=sorted(ps))
                                         for t, ps in sorted(result.assignment.items()) if ps])
    return R(throttle_time_ms=0, error_code=Errors.NONE, member_id=result.member_id,
             member_epoch=result.member_epoch, heartbeat_interval_ms=result.heartbeat_interval_ms,
             assignment=assignment)


def _answer_order(ids: list[str]) -> list[str]:
    """Kafka answers the invalid ids first (measured on 4.3.1); the others here in request
    order -- Kafka's order of those follows its coordinator threads (measured: neither the
    request's nor the partitions' order), which nothing here reproduces. (The groups one may
    not DESCRIBE come before all of them: KafkaApis answers those itself.)"""
    return [g for g in ids if not group_id_valid(g)] + [g for g in ids if group_id_valid(g)]


@handles("ConsumerGroupDescribe")
async def handle_consumer_group_describe(broker: Broker, ctx, req):
    R = ctx.api.Response
    G = R.DescribedGroup
    M = G.Member
    A = M.Assignment
    gc = broker.group_coordinator
    names = gc.consumer_manager.topic_name

    def assignment(a):
        return A(topic_partitions=[A.TopicPartitions(topic_id=t, topic_name=names(t), partitions=sorted(ps))
                                   for t, ps in sorted(a.items()) if ps])

    ids = list(req.group_ids or ())
    refused = [g for g in ids if not allowed(broker, ctx, Op.DESCRIBE, Res.GROUP, g)]
    out = [G(error_code=Errors.GROUP_AUTHORIZATION_FAILED, group_id=g, group_state="", group_epoch=0,
             assignment_epoch=0, assignor_name="", members=[], authorized_operations=NO_AUTHORIZED_OPS)
           for g in refused]
    for gid in _answer_order([g for g in ids if g not in refused]):
        error = gc.coordinator_error(gid)
        if error is None and not group_id_valid(gid):
            error = Errors.INVALID_GROUP_ID
        if error is not None:
            out.append(G(error_code=error, group_id=gid, group_state="", group_epoch=0, assignment_epoch=0,
                         assignor_name="", members=[], authorized_operations=NO_AUTHORIZED_OPS))
            continue
        try:
            g = gc.consumer_group(gid)
        except KafkaError as exc:
            out.append(G(error_code=exc.error, error_message=exc.message, group_id=gid, group_state="",
                         group_epoch=0, assignment_epoch=0, assignor_name="", members=[],
                         authorized_operations=NO_AUTHORIZED_OPS))
            continue
        members = [M(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                     member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                     subscribed_topic_names=sorted(m.subscribed_topic_names),
                     # "" when the member has none (measured on 4.3.1)
                     subscribed_topic_regex=m.subscribed_topic_regex or "", assignment=assignment(m.assigned),
                     target_assignment=assignment(g.target.get(m.member_id, {})),
                     member_type=MEMBER_TYPE_CONSUMER)
                   for m in g.members.values()]
        out.append(G(error_code=Errors.NONE, group_id=gid, group_state=g.state.value, group_epoch=g.group_epoch,
                     assignment_epoch=g.assignment_epoch,
                     # the members' preferred assignor now: the default once they are gone (measured)
                     assignor_name=gc.consumer_manager.preferred_assignor(g), members=members,
                     # measured on 4.3.1 without an authorizer: 3400, every group operation
                     authorized_operations=authorized_operations(broker, ctx, Res.GROUP, gid, GROUP_OPERATIONS)
                     if req.include_authorized_operations else NO_AUTHORIZED_OPS))
    return R(throttle_time_ms=0, groups=out)
