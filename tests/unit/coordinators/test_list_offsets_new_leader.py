"""ListOffsets(latest) from a leader whose high watermark is below the start of its leader
epoch (handlers/list_offsets.py), on a real embedded Broker through its handler.

Why: right after an election the new leader's high watermark can be below what the previous
leader had exposed (its followers have not fetched from it yet). Kafka answers a client's
latest with OFFSET_NOT_AVAILABLE until it caught up (measured on 4.3.1 after
cluster/acks_all_survives_leader_kill's leader kill); the embedded broker answered the stale
high watermark, so an observer saw an end that later moved (2, then 3).
"""
from __future__ import annotations

import trio

from broker_impl.log import records as rec
from broker_impl.protocol.errors import Errors
from broker_impl.protocol.messages import API

LATEST = -1


async def _create_t1(harness):
    CT = API["CreateTopics"].Request
    created = await harness.call("CreateTopics", 5, topics=[CT.CreatableTopic(
        name="t1", num_partitions=1, replication_factor=1)], timeout_ms=5000)
    assert created.topics[0].error_code == 0


def test_latest_is_not_available_until_the_high_watermark_reaches_the_epoch_start(harness):
    async def main():
        async with harness.running() as broker:
            await _create_t1(harness)
            part = broker.topics.get("t1").partitions[0]
            LO = API["ListOffsets"].Request

            async def latest(replica_id: int):
                r = await harness.call("ListOffsets", 7, replica_id=replica_id, isolation_level=0, topics=[
                    LO.ListOffsetsTopic(name="t1", partitions=[LO.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=0, timestamp=LATEST)])])
                p = r.topics[0].partitions[0]
                return p.error_code, p.offset

            assert await latest(-1) == (0, 0)
            part.leader_epoch_start_offset = 3          # elected with 3 records, HW still 0
            assert await latest(-1) == (Errors.OFFSET_NOT_AVAILABLE, -1)
            assert await latest(1) == (0, 0)            # a replica is asked for the log end
            part.leader_epoch_start_offset = 0
            assert await latest(-1) == (0, 0)

    trio.run(main)


def test_a_replica_is_told_the_log_end_a_consumer_the_high_watermark(harness):
    """Kafka's KafkaApis gives a ListOffsets that is not a consumer's (replica_id >= 0: a
    follower's fetchOffsetAndTruncate) no isolation level, so latest is the log end offset;
    a consumer's is the high watermark (read_uncommitted) or the last stable offset."""
    async def main():
        async with harness.running() as broker:
            await _create_t1(harness)
            plog = broker.topics.get("t1").partitions[0].log
            plog.append(rec.build_batch([(b"k", b"v")] * 3))
            plog.update_high_watermark(1)               # as a leader whose followers lag
            LO = API["ListOffsets"].Request

            async def latest(replica_id: int, isolation: int = 0):
                r = await harness.call("ListOffsets", 10, replica_id=replica_id, isolation_level=isolation,
                                       timeout_ms=1000, topics=[LO.ListOffsetsTopic(name="t1", partitions=[
                                           LO.ListOffsetsTopic.ListOffsetsPartition(
                                               partition_index=0, current_leader_epoch=-1, timestamp=LATEST)])])
                p = r.topics[0].partitions[0]
                return p.error_code, p.offset

            assert await latest(-1) == (0, 1)
            assert await latest(2) == (0, 3)
            assert await latest(2, isolation=1) == (0, 3)   # a replica's isolation level is not read

    trio.run(main)
