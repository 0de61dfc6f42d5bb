"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31), as Kafka's AclApis answers them (the
ACLs and their rules: cluster/authorizer).

Measured on Kafka 4.3.1 (docs/security.md, "ACLs"):

- Each first needs the cluster operation Kafka's AuthHelper.authorizeClusterOperation checks
  (DESCRIBE for DescribeAcls, ALTER for the others): CLUSTER_AUTHORIZATION_FAILED on every
  result. Kafka's message prints its internal request object (``Request Request(processor=...,
  ...) needs ALTER permission.``); here the request is named by API, version and principal.
- Without an authorizer: SECURITY_DISABLED, "No Authorizer is configured.".
- An element coded 0 (UNKNOWN) in a binding or filter: the connection is closed (the request's
  own validation, while Kafka parses it). Another code Kafka does not know reads as UNKNOWN: a
  binding is INVALID_REQUEST ``Invalid resourceType UNKNOWN``, a filter matches nothing.
- A binding naming ANY (resource type, operation, permission) or ANY/MATCH (pattern type) fails
  the whole request: UNKNOWN_SERVER_ERROR without a message on every result, nothing created
  (Kafka's ResourcePattern / AccessControlEntry constructors throw).
- Otherwise each binding on its own: INVALID_REQUEST with Kafka's message (a CLUSTER resource
  not named kafka-cluster, an empty name, a principal without ``:``), the others created.
"""

from __future__ import annotations

from itertools import groupby
from typing import TYPE_CHECKING

from . import handles
from ..protocol.codegen import ProtocolError
from ..protocol.errors import Errors
from ..cluster.authorizer import (AclBinding, AclBindingFilter, AclOperation as Op, AclPermissionType, PatternType,
                                 ResourceType, binding_dict, binding_from_dict, enum_of, allowed_cluster)

if TYPE_CHECKING:
    from ..server.broker import Broker

NO_AUTHORIZER = "No Authorizer is configured."


def _not_authorized(ctx, op: Op) -> str:
    return f"Request {ctx.api.name} v{ctx.version} of {ctx.principal} needs {op.name} permission."


def _filter(f, name: str, pattern: int, principal: str, host: str, op: int, perm: int) -> AclBindingFilter:
    if 0 in (f, pattern, op, perm):
        raise ProtocolError("Filter contain UNKNOWN elements")
    return AclBindingFilter(enum_of(ResourceType, f), name, enum_of(PatternType, pattern), principal, host,
                            enum_of(Op, op), enum_of(AclPermissionType, perm))


@handles("DescribeAcls")
async def handle_describe_acls(broker: Broker, ctx, req):
    R = ctx.api.Response
    if not allowed_cluster(broker, ctx, Op.DESCRIBE):
        return R(throttle_time_ms=0, error_code=Errors.CLUSTER_AUTHORIZATION_FAILED,
                 error_message=_not_authorized(ctx, Op.DESCRIBE), resources=[])
    f = _filter(req.resource_type_filter, req.resource_name_filter, req.pattern_type_filter, req.principal_filter,
                req.host_filter, req.operation, req.permission_type)
    if broker.authorizer is None:
        return R(throttle_time_ms=0, error_code=Errors.SECURITY_DISABLED, error_message=NO_AUTHORIZER, resources=[])
    Res, Acl = R.DescribeAclsResource, R.DescribeAclsResource.AclDescription

    def resource(b: AclBinding):
        return b.resource_type, b.resource_name, b.pattern_type

    found = sorted(broker.authorizer.describe(f), key=resource)
    return R(throttle_time_ms=0, error_code=Errors.NONE, error_message="", resources=[
        Res(resource_type=rt, resource_name=name, pattern_type=pt,
            acls=[Acl(principal=b.principal, host=b.host, operation=b.operation, permission_type=b.permission_type)
                  for b in acls])
        for (rt, name, pt), acls in groupby(found, key=resource)])


@handles("CreateAcls")
async def handle_create_acls(broker: Broker, ctx, req):
    R = ctx.api.Response
    C = R.AclCreationResult
    if any(0 in (c.resource_type, c.resource_pattern_type, c.operation, c.permission_type) for c in req.creations):
        raise ProtocolError("Contain UNKNOWN elements")
    bindings = [AclBinding(enum_of(ResourceType, c.resource_type), c.resource_name,
                           enum_of(PatternType, c.resource_pattern_type), c.principal, c.host,
                           enum_of(Op, c.operation), enum_of(AclPermissionType, c.permission_type))
                for c in req.creations]

    def every(err, msg):
        return R(throttle_time_ms=0, results=[C(error_code=err, error_message=msg) for _ in bindings])

    if not allowed_cluster(broker, ctx, Op.ALTER):
        return every(Errors.CLUSTER_AUTHORIZATION_FAILED, _not_authorized(ctx, Op.ALTER))
    if broker.authorizer is None:
        return every(Errors.SECURITY_DISABLED, NO_AUTHORIZER)
    if any(b.names_any() for b in bindings):
        return every(Errors.UNKNOWN_SERVER_ERROR, None)
    results, valid = [], []
    for b in bindings:
        why = b.validation_error()
        results.append(C(error_code=Errors.INVALID_REQUEST, error_message=why) if why else
                       C(error_code=Errors.NONE, error_message=""))
        if why is None:
            valid.append(b)
    if broker.is_cluster:
        error, _ = await _forward(broker, valid, [])
        if error != Errors.NONE:
            return every(error, None)
    else:
        broker.authorizer.create(valid)
    return R(throttle_time_ms=0, results=results)


async def _forward(broker: Broker, creations: list[AclBinding], deletions: list[AclBindingFilter]):
    """A broker of a cluster forwards ACL changes to the controller, which commits them to the
    metadata image every broker applies (Kafka's brokers forward CreateAcls and DeleteAcls):
    (error, per deletion filter the bindings it removed). A forwarding that found no quorum or no
    controller is answered with the request's error response, no message."""
    r = await broker.lifecycle.forward("alter_acls", creations=[binding_dict(b) for b in creations],
                                       deletions=[binding_dict(f) for f in deletions])
    if r["error"] != Errors.NONE:
        return Errors(r["error"]), []
    return Errors.NONE, [[binding_from_dict(AclBinding, d) for d in matched] for matched in r["deleted"]]


@handles("DeleteAcls")
async def handle_delete_acls(broker: Broker, ctx, req):
    R = ctx.api.Response
    F = R.DeleteAclsFilterResult
    M = F.DeleteAclsMatchingAcl
    filters = [_filter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                       f.host_filter, f.operation, f.permission_type) for f in req.filters]

    def every(err, msg):
        return R(throttle_time_ms=0, filter_results=[F(error_code=err, error_message=msg, matching_acls=[])
                                                     for _ in filters])

    if not allowed_cluster(broker, ctx, Op.ALTER):
        return every(Errors.CLUSTER_AUTHORIZATION_FAILED, _not_authorized(ctx, Op.ALTER))
    if broker.authorizer is None:
        return every(Errors.SECURITY_DISABLED, NO_AUTHORIZER)
    if broker.is_cluster:
        error, deleted = await _forward(broker, [], filters)
        if error != Errors.NONE:
            return every(error, None)
    else:
        deleted = broker.authorizer.delete(filters)
    return R(throttle_time_ms=0, filter_results=[
        F(error_code=Errors.NONE, error_message=None, matching_acls=[
            M(error_code=Errors.NONE, error_message=None, resource_type=b.resource_type, resource_name=b.resource_name,
              pattern_type=b.pattern_type, principal=b.principal, host=b.host, operation=b.operation,
              permission_type=b.permission_type) for b in acls])
        for acls in deleted])
