"""A broker of a cluster elected leader of a ``__consumer_offsets`` partition reads it back off the
event loop; until then its groups are LOADING, as in Kafka's CoordinatorRuntime: requests for them
read COORDINATOR_LOAD_IN_PROGRESS (Heartbeat NONE, "blindly"), ListGroups fails as a whole, and a
transaction marker for the partition is refused NOT_LEADER_OR_FOLLOWER (KafkaApis' mapping), so
the transaction coordinator retries it once the partition is loaded. The load is held in its
worker thread by a gate, so the window is as long as the test needs."""

from __future__ import annotations

import threading

import trio

from broker_impl.coordinators.partitioner import partition_for
from broker_impl.protocol.errors import Errors
from broker_impl.protocol.messages import API

from tests.unit.coordinators.group_helpers import heartbeat, join
from tests.unit.coordinators.test_group_offsets import commit, fetch_v7

WTM = API["WriteTxnMarkers"].Request


def _other_group(group: str, n: int = 5) -> str:
    return next(g for g in (f"other-{i}" for i in range(100)) if partition_for(g, n) != partition_for(group, n))


def _hold_loads(gc) -> threading.Event:
    """Every load of an elected partition waits in its thread until the returned event is set."""
    gate = threading.Event()
    read = gc._read

    def held(partitions):
        gate.wait(10)
        return read(partitions)
    gc._read = held
    return gate


async def _until_loaded(gc, partition: int) -> None:
    for _ in range(500):
        if partition in gc.owned:
            return
        await trio.sleep(0.01)
    raise AssertionError(f"__consumer_offsets-{partition} not loaded within 5 s")


async def _marker_error(harness, partition: int) -> int:
    r = await harness.call("WriteTxnMarkers", 1, markers=[WTM.WritableTxnMarker(
        producer_id=4000, producer_epoch=0, transaction_result=True, coordinator_epoch=0,
        topics=[WTM.WritableTxnMarker.WritableTxnMarkerTopic(name="__consumer_offsets",
                                                               partition_indexes=[partition])])])
    return r.markers[0].topics[0].partitions[0].error_code


async def _elected_with_load_held(harness, b):
    """Group g's offset committed, then the broker as one of a cluster that led nothing yet,
    elected for g's partition at epoch 3 with the load held: (coordinator, partition, gate)."""
    gc = b.group_coordinator
    b.topics.create("t", 1)
    assert await commit(harness, {"t": {0: 7}}) == {("t", 0): 0}
    p = gc.store.partition_for("g")
    gc.resign_all()
    gate = _hold_loads(gc)
    gc.on_elected(p, 3)
    return gc, p, gate


def test_elected_partition_reads_load_in_progress_until_loaded(harness):
    async def main():
        async with harness.running() as b:
            gc, p, gate = await _elected_with_load_held(harness, b)

            assert (await join(harness)).error_code == Errors.COORDINATOR_LOAD_IN_PROGRESS
            assert await heartbeat(harness, "m-1", 1) == Errors.NONE
            err, _ = await fetch_v7(harness, topics={"t": [0]})
            assert err == Errors.COORDINATOR_LOAD_IN_PROGRESS
            r = await harness.call("ListGroups", 4, states_filter=[])
            assert (r.error_code, r.groups) == (Errors.COORDINATOR_LOAD_IN_PROGRESS, [])
            r = await harness.call("DescribeGroups", 5, groups=["g"], include_authorized_operations=False)
            assert r.groups[0].error_code == Errors.COORDINATOR_LOAD_IN_PROGRESS
            assert await _marker_error(harness, p) == Errors.NOT_LEADER_OR_FOLLOWER
            assert (await join(harness, group=_other_group("g"))).error_code == Errors.NOT_COORDINATOR
            # elected again at a newer epoch while loading: the newest load counts
            gc.on_elected(p, 4)
            assert gc.loading == {p: 4}

            gate.set()
            await _until_loaded(gc, p)
            err, got = await fetch_v7(harness, topics={"t": [0]})
            assert (err, got) == (0, {("t", 0): (7, 0)})
            assert (await join(harness)).error_code == Errors.MEMBER_ID_REQUIRED
            r = await harness.call("ListGroups", 4, states_filter=[])
            assert r.error_code == Errors.NONE and [g.group_id for g in r.groups] == ["g"]
    trio.run(main)


def test_partition_resigned_while_loading_is_not_coordinated(harness):
    async def main():
        async with harness.running() as b:
            gc, p, gate = await _elected_with_load_held(harness, b)
            gc.on_resigned(p)
            gate.set()
            for _ in range(50):                   # the load's thread finishes and is discarded
                await trio.sleep(0.01)
            assert p not in gc.owned and not gc.loading
            assert (await join(harness)).error_code == Errors.NOT_COORDINATOR
            assert "g" not in gc.offset_manager.group_ids()
    trio.run(main)


def test_a_read_failing_after_the_partition_was_resigned_is_dropped(harness):
    async def main():
        async with harness.running() as b:
            gc, p, gate = await _elected_with_load_held(harness, b)
            held = gc._read

            def truncated_under_the_read(partitions):
                held(partitions)
                raise OSError("segment gone")   # as a follower's truncation could make it
            gc._read = truncated_under_the_read
            gc.on_elected(p, 4)                  # this load's read will fail
            gc.on_resigned(p)
            gate.set()
            for _ in range(50):
                await trio.sleep(0.01)
            assert p not in gc.owned and not gc.loading
            assert (await join(harness)).error_code == Errors.NOT_COORDINATOR
    trio.run(main)
