"""InitProducerId (22).

Without a transactional.id this is the idempotent producer's request: a
fresh producer id with epoch 0, as Kafka's TransactionCoordinator answers
it. With a transactional.id the transaction coordinator answers.
"""

from __future__ import annotations

from . import handles
from ..protocol.errors import Errors


@handles("InitProducerId", max_version=5)
async def handle_init_producer_id(broker, ctx, req):
    R = ctx.api.Response
    if req.transactional_id is None:
        return R(throttle_time_ms=0, error_code=Errors.NONE,
                 producer_id=broker.producer_ids.generate(), producer_epoch=0)
    coordinator = getattr(broker, "txn_coordinator", None)
    if coordinator is None:
        return R(throttle_time_ms=0, error_code=Errors.COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1)
    return await coordinator.handle_init_producer_id(ctx, req)
