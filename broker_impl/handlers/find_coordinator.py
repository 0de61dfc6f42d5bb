"""FindCoordinator (10), v0-v6 (v4+ batch keys in ``coordinator_keys``, KIP-699).

This broker is the only node, so it coordinates every group and every
transactional id. As Kafka does on the first lookup of a group, the group
coordinator's internal topic ``__consumer_offsets`` is created here. A
transactional id is always this broker's (while its transaction coordinator
loads, the transaction requests themselves answer COORDINATOR_LOAD_IN_PROGRESS).
Key type 2 (share groups, v6) is not supported by this broker and reads
INVALID_REQUEST, like any unknown key type. A found coordinator's error message is
Kafka's: "NONE" in v1-3, empty in a v4+ coordinator entry (measured on 4.3.1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import handles
from ..protocol.errors import Errors, KafkaError

if TYPE_CHECKING:
    from ..server.broker import Broker

GROUP = 0
TRANSACTION = 1
FOUND = "NONE"  # Errors.NONE.message(), what Kafka puts in error_message of a found coordinator


def _lookup(broker: Broker, key_type: int, key: str) -> tuple[Errors, str | None]:
    if key_type == GROUP:
        try:
            broker.group_coordinator.store.ensure()
        except KafkaError as exc:
            return Errors.COORDINATOR_NOT_AVAILABLE, f"cannot create __consumer_offsets: {exc}"
        return Errors.NONE, FOUND
    if key_type == TRANSACTION:
        return Errors.NONE, FOUND
    return Errors.INVALID_REQUEST, f"Unsupported coordinator key type {key_type}"


@handles("FindCoordinator")
async def handle_find_coordinator(broker: Broker, ctx, req):
    R = ctx.api.Response
    key_type = req.key_type if ctx.version >= 1 else GROUP
    host, port = broker.advertised_address
    if ctx.version >= 4:
        out = []
        for key in req.coordinator_keys or ():
            err, msg = _lookup(broker, key_type, key)
            ok = err is Errors.NONE
            out.append(R.Coordinator(key=key, node_id=broker.node_id if ok else -1, host=host if ok else "",
                                     port=port if ok else -1, error_code=err, error_message="" if ok else msg))
        return R(throttle_time_ms=0, coordinators=out)
    err, msg = _lookup(broker, key_type, req.key)
    ok = err is Errors.NONE
    return R(throttle_time_ms=0, error_code=err, error_message=msg, node_id=broker.node_id if ok else -1,
             host=host if ok else "", port=port if ok else -1)
