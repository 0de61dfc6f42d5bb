"""Truncation on fetch (server/replica_fetcher.diverging_truncation_offset) on real logs: a
follower sends its last epoch with every fetch, the leader answers where that epoch ends in its
own log (the leader's side of handlers/fetch: the epoch cache's end_offset_for), and the
follower cuts its log there -- round after round -- until the two logs are one. Each case ends
by copying the rest and comparing the logs byte for byte.

Why: Kafka's followers have truncated this way since IBP 2.7 (no OffsetForLeaderEpoch between
brokers); a follower that keeps records the leader never had serves them once it leads
(cluster/unclean_old_leader_truncates_then_leads, mutant 75).
"""

from __future__ import annotations

import pytest
from log_helpers import NOW, kp_batch

from broker_impl.log.partition_log import PartitionLog
from broker_impl.server.replica_fetcher import diverging_truncation_offset


def _log(tmp_path, name):
    return PartitionLog(str(tmp_path / name), {}, now_ms=NOW)


def _append(log, epoch, n, value):
    log.leader_epoch = epoch
    log.append(kp_batch(n, value=value), now_ms=NOW)


def _fetch_rounds(leader: PartitionLog, follower: PartitionLog, limit: int = 10) -> list[int]:
    """What the fetcher and the leader do, round by round: the truncation offsets taken, then
    the rest copied."""
    cuts = []
    for _ in range(limit):
        latest = follower.leader_epoch_cache.latest_epoch
        if latest is None:
            break
        epoch, end = leader.leader_epoch_cache.end_offset_for(latest, leader.log_end_offset)
        if not (epoch < latest or end < follower.log_end_offset):
            break                                      # no divergence: records come
        target = diverging_truncation_offset(follower, epoch, end)
        cuts.append(target)
        follower.truncate_to(target)
    else:
        raise AssertionError(f"no agreement after {limit} rounds: {cuts}")
    while follower.log_end_offset < leader.log_end_offset:
        follower.append_as_follower(leader.read(follower.log_end_offset, 1 << 20).records, now_ms=NOW)
    return cuts


def _build(tmp_path, history):
    """Leader and follower logs from ``history``: (who, epoch, count) appends, ``both`` being the
    leader's append copied by the follower."""
    leader, follower = _log(tmp_path, "leader"), _log(tmp_path, "follower")
    for i, (who, epoch, n) in enumerate(history):
        if who == "follower":
            _append(follower, epoch, n, b"f%d" % i)
            continue
        _append(leader, epoch, n, b"l%d" % i)
        if who == "both":
            follower.append_as_follower(leader.read(follower.log_end_offset, 1 << 20).records, now_ms=NOW)
    return leader, follower


@pytest.mark.parametrize("history, cuts", [
    # cluster/unclean_old_leader_truncates_then_leads: before0-2 in both at epoch 0; the old
    # leader's 3 more at epoch 0; the new leader's "after" at epoch 2 from offset 3
    ([("both", 0, 3), ("follower", 0, 3), ("leader", 2, 1)], [3]),
    # the follower led at epoch 1 (copied by nobody), the leader was elected at epoch 2 without it
    ([("both", 0, 2), ("follower", 1, 4), ("leader", 2, 3)], [2]),
    # epoch 0 ends at 2 in the follower but runs on to 4 in the leader: the follower's 2-3 (epoch
    # 1) are not the leader's 2-3 (epoch 0), so the cut is at 2 -- the leader's end (4) would
    # keep them and ask the same question for ever
    ([("both", 0, 2), ("leader", 0, 2), ("follower", 1, 4), ("leader", 2, 1)], [2]),
    # KIP-279: leader epochs 0, 3, 5; the follower's 0, 2, 4: it does not know epoch 3, cuts to the
    # end of its own epoch 2 and asks again, until they meet at 2
    ([("both", 0, 2), ("follower", 2, 2), ("follower", 4, 2), ("leader", 3, 3), ("leader", 5, 1)], [4, 2]),
    # a follower behind, even across an epoch: nothing to cut
    ([("both", 0, 2), ("leader", 0, 2), ("leader", 1, 2)], []),
])
def test_the_follower_meets_the_leaders_log(tmp_path, history, cuts):
    leader, follower = _build(tmp_path, history)
    assert _fetch_rounds(leader, follower) == cuts
    assert follower.log_end_offset == leader.log_end_offset
    assert follower.read(0, 1 << 22).records == leader.read(0, 1 << 22).records
    assert follower.leader_epoch_cache.entries() == leader.leader_epoch_cache.entries()


def test_no_offset_from_the_leader_cuts_to_the_high_watermark(tmp_path):
    follower = _log(tmp_path, "follower")
    _append(follower, 0, 4, b"x")
    follower.update_high_watermark(2)
    assert diverging_truncation_offset(follower, 0, -1) == 2
