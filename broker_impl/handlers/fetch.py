"""Fetch (1): whole batches from the segment files, with long poll.

- read_uncommitted reads up to the high watermark, read_committed up to the
  last stable offset (LSO), and the latter also gets the aborted
  transactions overlapping the returned range, so the consumer can drop
  aborted records itself (Kafka never filters records on the broker).
- Byte limits follow KIP-74: partitions are filled in request order up to
  ``max_bytes`` overall and ``partition_max_bytes`` each, except that the
  first non-empty partition always returns at least one whole batch.
- Long poll: when fewer than ``min_bytes`` are available the request waits,
  up to ``max_wait_ms``, for appends, then answers with what is there.
- Fetch sessions (KIP-227): this broker answers every request as a
  sessionless full fetch (session id 0), which Kafka itself does when its
  session cache is full; clients then keep sending full requests. A request
  naming an unknown session id gets FETCH_SESSION_ID_NOT_FOUND.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from . import handles
from ..log.errors import LogError
from ..protocol.errors import Errors

if TYPE_CHECKING:
    from ..server.broker import Broker

READ_COMMITTED = 1
INVALID_SESSION_ID = 0


def _read_all(broker: Broker, ctx, req):
    R = ctx.api.Response
    T = R.FetchableTopicResponse
    P = T.PartitionData
    A = P.AbortedTransaction
    by_id = ctx.version >= 13
    committed = ctx.version >= 4 and req.isolation_level == READ_COMMITTED
    remaining = req.max_bytes if ctx.version >= 3 else 0x7FFFFFFF
    total = 0
    out = []
    for ft in req.topics:
        topic = broker.topics.by_id.get(bytes(ft.topic_id)) if by_id else broker.topics.get(ft.topic)
        parts = []
        for fp in ft.partitions:
            pr = P(partition_index=fp.partition, error_code=0, high_watermark=-1, last_stable_offset=-1,
                   log_start_offset=-1, aborted_transactions=None if not committed else [],
                   preferred_read_replica=-1, records=b"")
            parts.append(pr)
            if topic is None or not 0 <= fp.partition < len(topic.partitions):
                # Kafka 4.3.1 (measured): an unknown partition of a known topic id is
                # UNKNOWN_TOPIC_OR_PARTITION, and either answer carries an empty aborted list
                pr.error_code = Errors.UNKNOWN_TOPIC_ID if by_id and topic is None else Errors.UNKNOWN_TOPIC_OR_PARTITION
                pr.aborted_transactions = []
                continue
            part = topic.partitions[fp.partition]
            plog = part.log
            err = part.check_current_leader_epoch(fp.current_leader_epoch) if ctx.version >= 9 else None
            if err is not None:
                pr.error_code = err
                continue
            hw = plog.log_end_offset
            lso = plog.last_stable_offset
            pr.high_watermark = hw
            pr.last_stable_offset = lso
            pr.log_start_offset = plog.log_start_offset
            if fp.fetch_offset < plog.log_start_offset or fp.fetch_offset > hw:
                pr.error_code = Errors.OFFSET_OUT_OF_RANGE
                continue
            upper = lso if committed else hw
            limit = min(fp.partition_max_bytes, remaining)
            if fp.fetch_offset >= upper or (limit <= 0 and total > 0):
                continue
            try:
                info = plog.read(fp.fetch_offset, limit, max_offset=upper, min_one_batch=total == 0)
            except LogError as exc:
                pr.error_code = exc.error_code
                continue
            data = info.records
            if data:
                pr.records = data
                n = len(data)
                total += n
                remaining -= n
                if committed:
                    pr.aborted_transactions = [A(producer_id=pid, first_offset=first)
                                               for pid, first in plog.aborted_transactions(fp.fetch_offset, info.next_offset)]
        out.append(T(topic=ft.topic, topic_id=ft.topic_id, partitions=parts))
    return out, total


@handles("Fetch")
async def handle_fetch(broker: Broker, ctx, req):
    R = ctx.api.Response
    if ctx.version >= 7 and req.session_id != INVALID_SESSION_ID:
        return R(throttle_time_ms=0, error_code=Errors.FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[])
    responses, total = _read_all(broker, ctx, req)
    if total < req.min_bytes and req.max_wait_ms > 0:
        with trio.move_on_after(req.max_wait_ms / 1000.0):
            while total < req.min_bytes:
                await broker.wait_for_append()
                responses, total = _read_all(broker, ctx, req)
    return R(throttle_time_ms=0, error_code=0, session_id=INVALID_SESSION_ID, responses=responses)
