"""The leader's side of replication on a real log (broker_impl.cluster.partition.Partition):
the high watermark as the ISR's smallest log end offset, frozen under min ISR, acks=all answers,
ISR proposals by lag and by catching up, and a leader that loses its leadership."""

from __future__ import annotations

import pytest
import trio

from broker_impl.cluster.metadata_image import PartitionRegistration
from broker_impl.cluster.partition import Partition
from broker_impl.log import records as rec
from broker_impl.log.partition_log import PartitionLog
from broker_impl.log.producer_state import AppendOrigin
from broker_impl.protocol.errors import Errors, KafkaError

NOW = 1_700_000_000_000
LAG = 10_000


def _leader(tmp_path, isr=(1, 2, 3), min_isr=1) -> Partition:
    log = PartitionLog(str(tmp_path / "t-0"), {}, now_ms=NOW)
    part = Partition("t", 0, log, 1, replicated=True, min_insync_replicas=min_isr, replica_lag_time_max_ms=LAG)
    part.make_leader(PartitionRegistration([1, 2, 3], list(isr), leader=1, leader_epoch=4, partition_epoch=7), now=NOW)
    return part


def _append(part: Partition, n: int = 1, acks: int = -1):
    batch = rec.build_batch([(b"k", b"v%d" % i) for i in range(n)], base_timestamp=NOW)
    return part.append_records_to_leader(batch, origin=AppendOrigin.CLIENT, required_acks=acks, now=NOW)


def test_high_watermark_is_the_smallest_log_end_offset_of_the_isr(tmp_path):
    part = _leader(tmp_path)
    _append(part, 3)
    assert part.log.high_watermark == 0
    part.update_follower_fetch_state(2, 3, now=NOW + 1)
    assert part.log.high_watermark == 0            # follower 3 has not fetched
    part.update_follower_fetch_state(3, 1, now=NOW + 2)
    assert part.log.high_watermark == 1
    part.update_follower_fetch_state(3, 3, now=NOW + 3)
    assert part.log.high_watermark == 3
    assert part.log.leader_epoch_cache.entries() == [(4, 0)]


def test_acks_all_below_min_isr_is_refused_and_acks_1_is_not_readable(tmp_path):
    part = _leader(tmp_path, isr=(1,), min_isr=2)
    with pytest.raises(KafkaError) as exc:
        _append(part, acks=-1)
    assert exc.value.error == Errors.NOT_ENOUGH_REPLICAS
    info = _append(part, acks=1)
    assert info.first_offset == 0
    part.update_follower_fetch_state(2, 1, now=NOW + 1)
    assert part.log.high_watermark == 0             # under min ISR the HW stays (KIP-966)


def test_not_enough_replicas_after_append(tmp_path):
    part = _leader(tmp_path, isr=(1, 2), min_isr=2)
    _append(part)
    part.update_follower_fetch_state(2, 1, now=NOW + 1)
    assert part.log.high_watermark == 1
    assert part.check_enough_replicas_reach_offset(1) == (True, Errors.NONE)
    # the ISR shrank to the leader before the waiting produce looked again
    part.pending_isr = [1]
    part.on_alter_partition_response(Errors.NONE, PartitionRegistration([1, 2, 3], [1], 1, 4, 8))
    assert part.check_enough_replicas_reach_offset(1) == (True, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


def test_isr_shrinks_after_the_lag_and_expands_once_caught_up(tmp_path):
    part = _leader(tmp_path)
    _append(part, 2)
    part.update_follower_fetch_state(2, 2, now=NOW + 100)
    assert part.maybe_shrink_isr(now=NOW + LAG // 2) is None
    proposal = part.maybe_shrink_isr(now=NOW + LAG + 200)      # follower 3 never caught up
    assert proposal == [1, 2]
    assert part.maybe_shrink_isr(now=NOW + LAG + 300) is None   # one proposal at a time
    part.on_alter_partition_response(Errors.NONE, PartitionRegistration([1, 2, 3], [1, 2], 1, 4, 8))
    assert part.isr == [1, 2] and part.partition_epoch == 8
    assert part.log.high_watermark == 2                         # follower 3 no longer holds it
    _append(part, 1)
    part.update_follower_fetch_state(2, 3, now=NOW + LAG + 400)
    assert part.update_follower_fetch_state(3, 3, now=NOW + LAG + 500) == [1, 2, 3]


def test_a_refused_proposal_leaves_the_committed_isr(tmp_path):
    part = _leader(tmp_path)
    assert part.maybe_shrink_isr(now=NOW + 2 * LAG) == [1]
    part.on_alter_partition_response(Errors.INVALID_UPDATE_VERSION, None)
    assert part.isr == [1, 2, 3] and part.pending_isr is None


def test_wait_for_replication_times_out_or_loses_the_leadership(tmp_path):
    part = _leader(tmp_path)
    info = _append(part)

    async def main():
        assert await part.wait_for_replication(info.last_offset + 1, 50) == Errors.REQUEST_TIMED_OUT
        async with trio.open_nursery() as nursery:
            results = []

            async def wait():
                results.append(await part.wait_for_replication(info.last_offset + 1, 5000))

            nursery.start_soon(wait)
            await trio.sleep(0.01)
            part.make_follower(PartitionRegistration([1, 2, 3], [2, 3], 2, 5, 8))
        assert results == [Errors.NOT_LEADER_OR_FOLLOWER]

    trio.run(main)


def test_a_one_node_partition_never_waits(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), {}, now_ms=NOW)
    part = Partition("t", 0, log, 1)
    info = _append(part)
    assert part.check_enough_replicas_reach_offset(info.last_offset + 1) == (True, Errors.NONE)
    assert log.high_watermark == log.log_end_offset == 1
    assert part.end_offset_for_epoch(0) == (0, 1)


def test_the_epoch_is_checked_before_the_leadership_as_kafka_does(tmp_path):
    """Partition.getLocalLog: a follower answers a stale epoch FENCED_LEADER_EPOCH and a newer
    one UNKNOWN_LEADER_EPOCH; only the current epoch (or none) gets NOT_LEADER_OR_FOLLOWER."""
    part = _leader(tmp_path)
    assert part.leader_error(4) is None and part.leader_error(-1) is None
    part.make_follower(PartitionRegistration([1, 2, 3], [2, 3], leader=2, leader_epoch=5, partition_epoch=8))
    assert part.leader_error(4) == Errors.FENCED_LEADER_EPOCH
    assert part.leader_error(6) == Errors.UNKNOWN_LEADER_EPOCH
    assert part.leader_error(5) == Errors.NOT_LEADER_OR_FOLLOWER
    assert part.leader_error(-1) == Errors.NOT_LEADER_OR_FOLLOWER
    assert Partition("t", 1, None, 1, replicated=True).leader_error(0) == Errors.NOT_LEADER_OR_FOLLOWER
