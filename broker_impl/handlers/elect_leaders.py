"""ElectLeaders (43): a preferred or an unclean leader election asked for by an admin (Kafka's
KafkaApis forwards it to the controller: ControllerApis.handleElectLeaders,
ReplicationControlManager.electLeaders; Admin.electLeaders, kafka-leader-election.sh).

Why a broker of a conformance suite has it: after a broker bounce, Kafka leaves leadership where
the failover put it until the preferred replica is elected again (by the auto rebalance or by
this API), and operators recover a partition whose whole ISR is lost with an unclean election --
the data an out-of-sync replica lacks is gone, transactions included.

Rules, Kafka's: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED at the top (v1+) and for
every partition asked for; an election type other than 0 (preferred) or 1 (unclean) is
INVALID_REQUEST the same way. Per partition: UNKNOWN_TOPIC_OR_PARTITION; preferred: the first
replica already leads -> ELECTION_NOT_NEEDED, it is not in the ISR or not alive ->
PREFERRED_LEADER_NOT_AVAILABLE; unclean: the partition has a leader -> ELECTION_NOT_NEEDED, no
alive replica -> ELIGIBLE_LEADERS_NOT_AVAILABLE, else its first alive ISR member, or failing
that its first alive replica (which becomes the ISR), leads -- whatever
``unclean.leader.election.enable`` says. Null partitions: every partition of every topic, each
topic listed, without the partitions that needed no election. On a cluster the controller
decides (cluster/controller.py); a one-node broker leads all its partitions itself (elections
are never needed, a leaderless one after a restart has no other replica).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import handles
from ..cluster.authorizer import AclOperation as Op, allowed_cluster
from ..cluster.metadata_image import NO_LEADER
from ..protocol.errors import Errors

if TYPE_CHECKING:
    from ..server.broker import Broker

PREFERRED, UNCLEAN = 0, 1
NOT_NEEDED = "Leader election not needed for topic partition."


def _error_response(ctx, req, error: Errors, message: str):
    """ElectLeadersRequest.getErrorResponse: the error at the top and for every partition asked for."""
    R = ctx.api.Response
    T = R.ReplicaElectionResult
    P = T.PartitionResult
    topics = [T(topic=t.topic, partition_result=[P(partition_id=p, error_code=error, error_message=message)
                                                 for p in t.partitions])
              for t in req.topic_partitions or ()]
    return R(throttle_time_ms=0, error_code=error, replica_election_results=topics)


def _elect_here(broker: Broker, preferred: bool, wanted):
    """A one-node broker: each partition's only replica is this broker."""
    def one(name, index):
        topic = broker.topics.get(name)
        if topic is None:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {name}"
        if not 0 <= index < len(topic.partitions):
            return Errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {name}-{index}"
        if topic.partitions[index].leader != NO_LEADER:
            return Errors.ELECTION_NOT_NEEDED, NOT_NEEDED
        if preferred:
            return Errors.PREFERRED_LEADER_NOT_AVAILABLE, "The preferred leader was not available."
        return Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE, "Eligible topic partition leaders are not available."

    if wanted is None:
        out = []
        for name, topic in list(broker.topics.topics.items()):
            results = [(i, *one(name, i)) for i in range(len(topic.partitions))]
            out.append((name, [r for r in results if r[1] != Errors.ELECTION_NOT_NEEDED]))
        return out
    return [(name, [(i, *one(name, i)) for i in indexes]) for name, indexes in wanted]


@handles("ElectLeaders")
async def handle_elect_leaders(broker: Broker, ctx, req):
    from ..server.broker_lifecycle import ControllerUnavailable

    R = ctx.api.Response
    T = R.ReplicaElectionResult
    P = T.PartitionResult
    election = req.election_type if ctx.version >= 1 else PREFERRED
    if not allowed_cluster(broker, ctx, Op.ALTER):
        return _error_response(ctx, req, Errors.CLUSTER_AUTHORIZATION_FAILED,
                               "Cluster authorization failed.")
    if election not in (PREFERRED, UNCLEAN):
        return _error_response(ctx, req, Errors.INVALID_REQUEST, f"Unknown election type {election}")
    preferred = election == PREFERRED
    wanted = None if req.topic_partitions is None else [(t.topic, list(t.partitions)) for t in req.topic_partitions]
    if not broker.is_cluster:
        results = _elect_here(broker, preferred, wanted)
    else:
        try:
            r = await broker.lifecycle.request("elect_leaders", preferred=preferred, topics=wanted)
        except ControllerUnavailable as exc:
            return _error_response(ctx, req, Errors.REQUEST_TIMED_OUT, f"The controller did not answer: {exc}")
        if r.get("error"):
            return _error_response(ctx, req, Errors(r["error"]), r.get("message"))
        results = [(name, [(i, Errors(e), m) for i, e, m in parts]) for name, parts in r["results"]]
    return R(throttle_time_ms=0, error_code=Errors.NONE, replica_election_results=[
        T(topic=name, partition_result=[P(partition_id=i, error_code=e, error_message=m) for i, e, m in parts])
        for name, parts in results])
