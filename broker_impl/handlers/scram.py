"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), as Kafka 4.3.1 answers
them (KIP-554): Describe from the broker's own copy of the credentials (KafkaApis, the metadata
image), Alter by the controller (KafkaApis forwards it; ControllerApis, ScramControlManager).
The rules and the order of the results: cluster/scram.

Why a conformance broker has them: they are how an operator adds a user or changes a password
on a running cluster, and a changed password must count from the next authentication only --
a connection that authenticated before keeps its session until it re-authenticates (KIP-368),
so a transaction open on it still commits (cases/security/).

Authorization, as Kafka checks it (measured on 4.3.1 with the StandardAuthorizer): Describe
needs DESCRIBE on the cluster, else the top-level CLUSTER_AUTHORIZATION_FAILED without a message
and one result per user asked for, without a user name or message
(DescribeUserScramCredentialsRequest.getErrorResponse; ApiError leaves out a message that is the
error's own) -- and no answer at all to a null list of users (that method iterates it: a
NullPointerException); Alter needs ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for
each user named, once, sorted (AlterUserScramCredentialsRequest.getErrorResponse), its message
naming the request as the ACL APIs' do here (Kafka's prints its internal request objects).

A one-node broker applies a change at once and keeps it in its data directory; a broker of a
cluster sends it to the controller, whose metadata image brings it to every broker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import handles
from .acls import _not_authorized
from ..cluster.authorizer import AclOperation as Op, allowed_cluster
from ..protocol.errors import Errors

if TYPE_CHECKING:
    from ..server.broker import Broker


@handles("DescribeUserScramCredentials")
async def handle_describe_user_scram_credentials(broker: Broker, ctx, req):
    R = ctx.api.Response
    Result = R.DescribeUserScramCredentialsResult
    if not allowed_cluster(broker, ctx, Op.DESCRIBE):
        if req.users is None:
            return None   # Kafka's error response iterates the null list: it never answers
        err = Errors.CLUSTER_AUTHORIZATION_FAILED
        return R(throttle_time_ms=0, error_code=err, error_message=None, results=[
            Result(user="", error_code=err, error_message=None, credential_infos=[]) for _ in req.users])
    names = [u.name for u in req.users] if req.users else None
    return R(throttle_time_ms=0, error_code=Errors.NONE, error_message="", results=[
        Result(user=user, error_code=error, error_message=message, credential_infos=[
            Result.CredentialInfo(mechanism=m, iterations=i) for m, i in infos])
        for user, error, message, infos in broker.scram_credentials.describe(names)])


@handles("AlterUserScramCredentials")
async def handle_alter_user_scram_credentials(broker: Broker, ctx, req):
    R = ctx.api.Response
    Result = R.AlterUserScramCredentialsResult
    named = sorted({d.name for d in req.deletions} | {u.name for u in req.upsertions})

    def every(err, message):
        return R(throttle_time_ms=0, results=[Result(user=n, error_code=err, error_message=message) for n in named])

    if not allowed_cluster(broker, ctx, Op.ALTER):
        return every(Errors.CLUSTER_AUTHORIZATION_FAILED, _not_authorized(ctx, Op.ALTER))
    deletions = [(d.name, d.mechanism) for d in req.deletions]
    upsertions = [(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
                  for u in req.upsertions]
    if broker.is_cluster:
        r = await broker.lifecycle.forward(
            "alter_user_scram_credentials", deletions=[list(d) for d in deletions],
            upsertions=[[n, m, i, salt.hex(), salted.hex()] for n, m, i, salt, salted in upsertions])
        if r["error"] != Errors.NONE:
            # the request's error response: every user, no message (ApiError drops the error's own)
            return every(Errors(r["error"]), None)
        results = [(user, error, message) for user, error, message in r["results"]]
    else:
        results = [(x.user, x.error, x.message) for x in broker.scram_credentials.alter(deletions, upsertions)]
        broker.scram_credentials.save()
    return R(throttle_time_ms=0, results=[Result(user=u, error_code=e, error_message=m) for u, e, m in results])
