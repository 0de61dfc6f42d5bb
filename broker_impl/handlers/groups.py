"""Classic group membership APIs: JoinGroup (11), Heartbeat (12), LeaveGroup (13),
SyncGroup (14), DescribeGroups (15), ListGroups (16), DeleteGroups (42).

Handlers translate between the wire messages and
:class:`~broker_impl.coordinators.group.GroupCoordinator`; the rules live behind it, in
:mod:`~broker_impl.coordinators.group_metadata_manager`. A group this broker does not
coordinate reads NOT_COORDINATOR; what a request wrote is replicated before it is answered.
All schema versions are implemented (they only add fields): JoinGroup 0-9,
Heartbeat 0-4, LeaveGroup 0-5, SyncGroup 0-5, DescribeGroups 0-6, ListGroups 0-5,
DeleteGroups 0-2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import handles
from ..coordinators.group_metadata_manager import DescribedGroup
from ..protocol.errors import Errors
from ..cluster.authorizer import (GROUP_OPERATIONS, AclOperation as Op, ResourceType as Res, allowed, allowed_cluster,
                                 authorized_operations)
from .metadata import NO_AUTHORIZED_OPS

if TYPE_CHECKING:
    from ..server.broker import Broker


def _client_host(ctx) -> str:
    """Kafka reports the member's address as ``/ip`` (``InetAddress.toString``)."""
    host = ctx.peer.rsplit(":", 1)[0] if ctx.peer and ctx.peer != "?" else ""
    return "/" + host.strip("[]") if host else ""


def group_denied(broker: Broker, ctx, group_id: str) -> Errors | None:
    """KafkaApis: JoinGroup, SyncGroup, Heartbeat, LeaveGroup (and OffsetCommit) need READ on the
    group, checked before the coordinator is looked at."""
    return None if allowed(broker, ctx, Op.READ, Res.GROUP, group_id) else Errors.GROUP_AUTHORIZATION_FAILED


@handles("JoinGroup")
async def handle_join_group(broker: Broker, ctx, req):
    R = ctx.api.Response
    v = ctx.version
    not_here = group_denied(broker, ctx, req.group_id) or broker.group_coordinator.coordinator_error(req.group_id)
    if not_here is not None:
        return R(throttle_time_ms=0, error_code=not_here, generation_id=-1, protocol_type=None,
                 protocol_name=None if v >= 7 else "", leader="", skip_assignment=False,
                 member_id=req.member_id or "", members=[])
    # v0 has no rebalance timeout: the session timeout serves as both (Kafka's rule).
    rebalance_timeout = req.rebalance_timeout_ms if v >= 1 and req.rebalance_timeout_ms >= 0 else req.session_timeout_ms
    result = await broker.group_coordinator.join_group(
        group_id=req.group_id, member_id=req.member_id or "", group_instance_id=req.group_instance_id,
        client_id=ctx.client_id, client_host=_client_host(ctx), session_timeout_ms=req.session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout, protocol_type=req.protocol_type or "",
        protocols=[(p.name, bytes(p.metadata)) for p in req.protocols or ()],
        require_known_member_id=v >= 4, supports_skip_assignment=v >= 9)
    protocol_name = result.protocol_name
    if protocol_name is None and v < 7:
        protocol_name = ""     # not nullable before v7
    M = R.JoinGroupResponseMember
    return R(throttle_time_ms=0, error_code=result.error, generation_id=result.generation_id,
             protocol_type=result.protocol_type, protocol_name=protocol_name, leader=result.leader,
             skip_assignment=result.skip_assignment, member_id=result.member_id,
             members=[M(member_id=mid, group_instance_id=iid, metadata=md) for mid, iid, md in result.members])


@handles("SyncGroup")
async def handle_sync_group(broker: Broker, ctx, req):
    R = ctx.api.Response
    if ctx.version >= 5 and (req.protocol_type is None or req.protocol_name is None):
        # KafkaApis: from v5 both are mandatory (SyncGroupRequest.areMandatoryProtocolTypeAndNamePresent)
        return R(throttle_time_ms=0, error_code=Errors.INCONSISTENT_GROUP_PROTOCOL, assignment=b"")
    gc = broker.group_coordinator
    not_here = group_denied(broker, ctx, req.group_id) or gc.coordinator_error(req.group_id)
    if not_here is not None:
        return R(throttle_time_ms=0, error_code=not_here, protocol_type=None, protocol_name=None, assignment=b"")
    assignments = {a.member_id: bytes(a.assignment) for a in req.assignments or ()}
    result = await gc.sync_group(
        group_id=req.group_id, generation_id=req.generation_id, member_id=req.member_id,
        group_instance_id=req.group_instance_id, protocol_type=req.protocol_type,
        protocol_name=req.protocol_name, assignments=assignments)
    error = result.error
    if error == Errors.NONE:
        error = await gc.await_replicated(req.group_id)   # the group's assignment is durable
    assignment = result.assignment if error == Errors.NONE else b""
    return R(throttle_time_ms=0, error_code=error, protocol_type=result.protocol_type,
             protocol_name=result.protocol_name, assignment=assignment)


@handles("Heartbeat")
async def handle_heartbeat(broker: Broker, ctx, req):
    err = group_denied(broker, ctx, req.group_id) or broker.group_coordinator.coordinator_error(req.group_id)
    if err is Errors.COORDINATOR_LOAD_IN_PROGRESS:
        # GroupCoordinatorService.heartbeat: "the group is still loading, so blindly respond"
        return ctx.api.Response(throttle_time_ms=0, error_code=Errors.NONE)
    if err is not None:
        return ctx.api.Response(throttle_time_ms=0, error_code=err)
    err = broker.group_coordinator.heartbeat(group_id=req.group_id, member_id=req.member_id,
                                             group_instance_id=req.group_instance_id,
                                             generation_id=req.generation_id)
    return ctx.api.Response(throttle_time_ms=0, error_code=err)


@handles("LeaveGroup")
async def handle_leave_group(broker: Broker, ctx, req):
    R = ctx.api.Response
    if ctx.version < 3:
        members = [(req.member_id, None)]
    else:
        members = [(m.member_id, m.group_instance_id) for m in req.members or ()]
    not_here = group_denied(broker, ctx, req.group_id) or broker.group_coordinator.coordinator_error(req.group_id)
    if not_here is not None:
        if ctx.version < 3:
            return R(throttle_time_ms=0, error_code=not_here)
        return R(throttle_time_ms=0, error_code=not_here, members=[])
    top, errors = broker.group_coordinator.leave_group(req.group_id, members)
    if ctx.version < 3:
        # One member, one error: the member's error is the response's error.
        if top is Errors.NONE and errors:
            top = errors[0]
        return R(throttle_time_ms=0, error_code=top)
    MR = R.MemberResponse
    out = [MR(member_id=mid, group_instance_id=iid, error_code=e) for (mid, iid), e in zip(members, errors)]
    return R(throttle_time_ms=0, error_code=top, members=out)


@handles("DescribeGroups")
async def handle_describe_groups(broker: Broker, ctx, req):
    R = ctx.api.Response
    G = R.DescribedGroup
    M = G.DescribedGroupMember
    out = []
    gc = broker.group_coordinator
    # KafkaApis: DESCRIBE on each group; the refused ones are answered first
    refused = [g for g in req.groups or () if not allowed(broker, ctx, Op.DESCRIBE, Res.GROUP, g)]
    described = [DescribedGroup(g, Errors.GROUP_AUTHORIZATION_FAILED, "", "", "", []) for g in refused]
    for gid in req.groups or ():
        if gid in refused:
            continue
        not_here = gc.coordinator_error(gid)
        described.append(gc.describe_group(gid, ctx.version) if not_here is None
                         else DescribedGroup(gid, not_here, "", "", "", []))
    for d in described:
        out.append(G(error_code=d.error, error_message=d.error_message, group_id=d.group_id, group_state=d.state,
                     protocol_type=d.protocol_type, protocol_data=d.protocol_data,
                     members=[M(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                                client_host=m.client_host, member_metadata=m.metadata,
                                member_assignment=m.assignment) for m in d.members],
                     authorized_operations=authorized_operations(broker, ctx, Res.GROUP, d.group_id, GROUP_OPERATIONS)
                     if req.include_authorized_operations and d.error == Errors.NONE else NO_AUTHORIZED_OPS))
    return R(throttle_time_ms=0, groups=out)


@handles("ListGroups")
async def handle_list_groups(broker: Broker, ctx, req):
    R = ctx.api.Response
    G = R.ListedGroup
    states = req.states_filter if ctx.version >= 4 else None
    types = req.types_filter if ctx.version >= 5 else None
    if broker.group_coordinator.loading:
        # Kafka reads every coordinator of the broker; one still loading fails the whole answer
        return R(throttle_time_ms=0, error_code=Errors.COORDINATOR_LOAD_IN_PROGRESS, groups=[])
    groups = broker.group_coordinator.list_groups(states, types)
    if not allowed_cluster(broker, ctx, Op.DESCRIBE):   # KafkaApis: else the groups it may DESCRIBE
        groups = [g for g in groups if allowed(broker, ctx, Op.DESCRIBE, Res.GROUP, g[0])]
    return R(throttle_time_ms=0, error_code=Errors.NONE,
             groups=[G(group_id=g, protocol_type=pt, group_state=st, group_type=ty) for g, pt, st, ty in groups])


@handles("DeleteGroups")
async def handle_delete_groups(broker: Broker, ctx, req):
    R = ctx.api.Response
    gc = broker.group_coordinator
    out = []
    # KafkaApis: DELETE on each group, the refused ones answered last, once each. (Kafka 4.3.1
    # answers every name once, the others in its coordinator's order: not done here yet.)
    refused = list(dict.fromkeys(g for g in req.groups_names or ()
                                 if not allowed(broker, ctx, Op.DELETE, Res.GROUP, g)))
    for g in req.groups_names or ():
        if g in refused:
            continue
        err = gc.coordinator_error(g)
        if err is None:
            err = gc.delete_group(g)
            if err == Errors.NONE:
                err = await gc.await_replicated(g)
        out.append(R.DeletableGroupResult(group_id=g, error_code=err))
    out += [R.DeletableGroupResult(group_id=g, error_code=Errors.GROUP_AUTHORIZATION_FAILED) for g in refused]
    return R(throttle_time_ms=0, results=out)
