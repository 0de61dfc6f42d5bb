"""InitProducerId (22).

Without a transactional.id this is the idempotent producer's request: a
fresh producer id with epoch 0, as Kafka's TransactionCoordinator answers
it. With a transactional.id the transaction coordinator answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import handles
from ..protocol.errors import Errors, KafkaError
from ..server.authorizer import (AclOperation as Op, ResourceType as Res, allowed, allowed_by_resource_type,
                                 allowed_cluster)

if TYPE_CHECKING:
    from ..server.broker import Broker


@handles("InitProducerId", max_version=5)
async def handle_init_producer_id(broker: Broker, ctx, req):
    R = ctx.api.Response
    # KafkaApis: WRITE on the transactional id; an idempotent producer needs IDEMPOTENT_WRITE on
    # the cluster or WRITE on some topic (authorizeByResourceType)
    if req.transactional_id is not None:
        if not allowed(broker, ctx, Op.WRITE, Res.TRANSACTIONAL_ID, req.transactional_id):
            return R(throttle_time_ms=0, error_code=Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer_id=-1,
                     producer_epoch=-1)
    elif not (allowed_cluster(broker, ctx, Op.IDEMPOTENT_WRITE)
              or allowed_by_resource_type(broker, ctx, Op.WRITE, Res.TOPIC)):
        return R(throttle_time_ms=0, error_code=Errors.CLUSTER_AUTHORIZATION_FAILED, producer_id=-1, producer_epoch=-1)
    if req.transactional_id is None:
        try:
            pid = broker.producer_ids.generate()
        except KafkaError as exc:    # a cluster's broker waiting for its first id block
            return R(throttle_time_ms=0, error_code=exc.error, producer_id=-1, producer_epoch=-1)
        return R(throttle_time_ms=0, error_code=Errors.NONE, producer_id=pid, producer_epoch=0)
    # v3+ may name the producer it had (KIP-360: bump its epoch); both or neither.
    current = (req.producer_id, req.producer_epoch) if ctx.version >= 3 else (-1, -1)
    if current == (-1, -1):
        expected = None
    elif -1 in current:
        return R(throttle_time_ms=0, error_code=Errors.INVALID_REQUEST, producer_id=-1, producer_epoch=-1)
    else:
        expected = current
    result = await broker.txn_coordinator.init_producer_id(req.transactional_id, req.transaction_timeout_ms, expected)
    err = result.error
    if ctx.version < 4 and err == Errors.PRODUCER_FENCED:
        err = Errors.INVALID_PRODUCER_EPOCH   # PRODUCER_FENCED is v4+
    return R(throttle_time_ms=0, error_code=err, producer_id=result.producer_id, producer_epoch=result.producer_epoch)
