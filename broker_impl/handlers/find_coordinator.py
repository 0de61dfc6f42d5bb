"""FindCoordinator (10), v0-v6 (v4+ batch keys in ``coordinator_keys``, KIP-699).

The coordinator of a group is the leader of the ``__consumer_offsets`` partition the group id
hashes to, the coordinator of a transactional id the leader of its ``__transaction_state``
partition (Kafka's partitionFor). As Kafka does, the first lookup creates the internal topic
(server/topic_creation); until the topic and a leader of that partition exist the answer is
COORDINATOR_NOT_AVAILABLE, and clients ask again. While the coordinator loads its partition,
the coordinator requests themselves answer COORDINATOR_LOAD_IN_PROGRESS. Key type 2 (share
groups, v6) is not supported by this broker and reads INVALID_REQUEST, like any unknown key
type. A found coordinator's error
message is Kafka's: "NONE" in v1-3, empty in a v4+ coordinator entry (measured on 4.3.1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import handles
from ..coordinators.group_store import OFFSETS_TOPIC
from ..coordinators.transaction_log import TRANSACTION_STATE_TOPIC
from ..protocol.errors import Errors
from ..server.authorizer import AclOperation as Op, ResourceType as Res, allowed

if TYPE_CHECKING:
    from ..server.broker import Broker

GROUP = 0
TRANSACTION = 1
FOUND = "NONE"  # Errors.NONE.message(), what Kafka puts in error_message of a found coordinator
NOT_FOUND = (-1, "", -1)


async def _lookup(broker: Broker, ctx, key_type: int, key: str) -> tuple[Errors, str | None, tuple[int, str, int]]:
    """(error, message, (node id, host, port)) of the coordinator of ``key``."""
    # KafkaApis.getCoordinator: DESCRIBE on the group / transactional id, Errors' own message
    if key_type == GROUP and not allowed(broker, ctx, Op.DESCRIBE, Res.GROUP, key):
        return Errors.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.", NOT_FOUND
    if key_type == TRANSACTION and not allowed(broker, ctx, Op.DESCRIBE, Res.TRANSACTIONAL_ID, key):
        return Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "Transactional Id authorization failed.", NOT_FOUND
    if key_type == GROUP:
        topic_name = OFFSETS_TOPIC
    elif key_type == TRANSACTION:
        topic_name = TRANSACTION_STATE_TOPIC
    else:
        return Errors.INVALID_REQUEST, f"Unsupported coordinator key type {key_type}", NOT_FOUND
    err = await broker.topic_creator.ensure_internal(topic_name)
    if err != Errors.NONE:
        return Errors.COORDINATOR_NOT_AVAILABLE, f"cannot create {topic_name}: {err.name}", NOT_FOUND
    topic = broker.topics.get(topic_name)
    if topic is None:
        return Errors.COORDINATOR_NOT_AVAILABLE, None, NOT_FOUND
    if key_type == GROUP:
        index = broker.group_coordinator.store.partition_for(key)
    else:
        index = broker.txn_coordinator.txn_manager.partition_for(key)
    leader = topic.partitions[index].leader
    endpoint = broker.replica_manager.endpoint(leader) if broker.replica_manager.broker_alive(leader) else None
    if endpoint is None:
        return Errors.COORDINATOR_NOT_AVAILABLE, None, NOT_FOUND
    return Errors.NONE, FOUND, (leader, *endpoint)


@handles("FindCoordinator")
async def handle_find_coordinator(broker: Broker, ctx, req):
    R = ctx.api.Response
    key_type = req.key_type if ctx.version >= 1 else GROUP
    if ctx.version >= 4:
        out = []
        for key in req.coordinator_keys or ():
            err, msg, (node, host, port) = await _lookup(broker, ctx, key_type, key)
            if err in (Errors.NONE, Errors.GROUP_AUTHORIZATION_FAILED, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED):
                msg = ""   # Kafka 4.3.1 (measured) sets no message for these in a batched answer
            out.append(R.Coordinator(key=key, node_id=node, host=host, port=port, error_code=err, error_message=msg))
        return R(throttle_time_ms=0, coordinators=out)
    err, msg, (node, host, port) = await _lookup(broker, ctx, key_type, req.key)
    return R(throttle_time_ms=0, error_code=err, error_message=msg, node_id=node, host=host, port=port)
