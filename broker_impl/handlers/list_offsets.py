"""ListOffsets (2): earliest, latest, max timestamp, or the first offset at a time.

Answered by the partition's leader (NOT_LEADER_OR_FOLLOWER elsewhere). ``latest`` is the
high watermark for read_uncommitted and the last stable offset for read_committed (what a
read_committed consumer starting at "latest" must begin from); a search by timestamp looks
below the same bound. A timestamp with no record at or after it answers offset -1,
timestamp -1, as Kafka does.

A new leader whose high watermark has not yet reached the start of its leader epoch (its
followers have not fetched since the election) answers a client's ``latest`` with
OFFSET_NOT_AVAILABLE, as Kafka's Partition.fetchOffsetForTimestamp does: the high watermark it
holds may be below what the previous leader already exposed, and a consumer must not be told
an end that goes backwards.

A request that is not a consumer's (replica_id other than -1: a follower asking where the
leader's log ends, Kafka's fetchOffsetAndTruncate) has no isolation level: ``latest`` and the
bound of a timestamp search are the log end offset (Kafka's KafkaApis passes no isolation level
for it, and Partition.fetchOffsetForTimestamp reads up to logEndOffset).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import handles, partition_or_error
from ..log import EARLIEST_TIMESTAMP as EARLIEST
from ..log import LATEST_TIMESTAMP as LATEST
from ..protocol.errors import Errors, KafkaError
from ..cluster.authorizer import AclOperation as Op, ResourceType as Res, allowed

if TYPE_CHECKING:
    from ..server.broker import Broker

# Kafka's other special timestamps (ListOffsetsRequest); MAX_TIMESTAMP (-3) and real
# timestamps are answered by PartitionLog.offset_for_timestamp; anything below -6 is refused.
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
EARLIEST_PENDING_UPLOAD = -5
LATEST_TIERED = -6
READ_COMMITTED = 1
CONSUMER_REPLICA_ID = -1


@handles("ListOffsets")
async def handle_list_offsets(broker: Broker, ctx, req):
    R = ctx.api.Response
    T = R.ListOffsetsTopicResponse
    P = T.ListOffsetsPartitionResponse
    committed = ctx.version >= 2 and req.isolation_level == READ_COMMITTED
    from_client = req.replica_id == CONSUMER_REPLICA_ID
    out = []
    for t in req.topics:
        topic = broker.topics.get(t.name)
        describable = allowed(broker, ctx, Op.DESCRIBE, Res.TOPIC, t.name)   # KafkaApis, before all else
        parts = []
        for p in t.partitions:
            pr = P(partition_index=p.partition_index, error_code=0, timestamp=-1, offset=-1, leader_epoch=-1)
            parts.append(pr)
            part, err = partition_or_error(topic, p.partition_index, describable)
            if err is not None:
                pr.error_code = err
                continue
            err = part.leader_error(p.current_leader_epoch if ctx.version >= 4 else -1)
            if err is not None:
                pr.error_code = err
                continue
            plog = part.log
            ts = p.timestamp
            try:
                if ts == LATEST:
                    start = part.leader_epoch_start_offset
                    if from_client and start is not None and start > plog.high_watermark:
                        pr.error_code = Errors.OFFSET_NOT_AVAILABLE
                        continue
                    pr.offset = _upper(plog, committed, from_client)
                    pr.leader_epoch = part.leader_epoch
                elif ts in (EARLIEST, EARLIEST_LOCAL, EARLIEST_PENDING_UPLOAD):
                    pr.offset = plog.log_start_offset
                    pr.leader_epoch = plog.log_start_epoch()
                elif ts == LATEST_TIERED:
                    pr.offset = -1
                elif ts < MAX_TIMESTAMP:
                    # No special offset has this number (Kafka 4.3.1, measured: -7, -100).
                    pr.error_code = Errors.UNSUPPORTED_VERSION
                else:
                    upper = _upper(plog, committed, from_client)
                    found = plog.offset_for_timestamp(ts, max_offset=upper)
                    if found is not None:  # None also when the match is at or past ``upper``
                        # the epoch of the batch that holds the record (FileRecords.searchForTimestamp)
                        pr.offset, pr.timestamp, pr.leader_epoch = found.offset, found.timestamp, found.leader_epoch
            except KafkaError as exc:
                pr.error_code = exc.error
        out.append(T(name=t.name, partitions=parts))
    return R(throttle_time_ms=0, topics=out)


def _upper(plog, committed: bool, from_client: bool) -> int:
    """The last offset a request may be told of: the last stable offset (read_committed), the
    high watermark (read_uncommitted), or for a replica the log end offset."""
    if not from_client:
        return plog.log_end_offset
    return plog.last_stable_offset if committed else plog.high_watermark
