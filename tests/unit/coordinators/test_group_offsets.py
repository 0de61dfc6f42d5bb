"""OffsetCommit / OffsetFetch through the real handlers, transactional offset hooks, retention,
and durability through ``__consumer_offsets`` (a second Broker on the same data dir)."""

from __future__ import annotations

import trio

from broker_impl.coordinators.group_metadata import now_ms
from broker_impl.coordinators.group_records import decode_record
from broker_impl.coordinators.partitioner import partition_for
from broker_impl.log import records as rec
from broker_impl.protocol.errors import Errors
from broker_impl.protocol.messages import API

from tests.unit.coordinators.group_helpers import describe, full_join, heartbeat, join, mock_clock_test, sync
from tests.unit.log.log_helpers import append_marker

OC = API["OffsetCommit"].Request
OF = API["OffsetFetch"].Request


def commit_topics(entries: dict[str, dict[int, int]], metadata="m", topic_ids=None):
    T, P = OC.OffsetCommitRequestTopic, OC.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    return [T(name=t, topic_id=(topic_ids or {}).get(t, b"\x00" * 16),
              partitions=[P(partition_index=p, committed_offset=o, committed_leader_epoch=3,
                            committed_metadata=metadata) for p, o in parts.items()])
            for t, parts in entries.items()]


async def commit(h, entries, group="g", generation=-1, member="", version=8, **kw):
    r = await h.call("OffsetCommit", version, group_id=group, generation_id_or_member_epoch=generation,
                     member_id=member, topics=commit_topics(entries, **kw))
    return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}


async def fetch_v7(h, group="g", topics=None, require_stable=False, version=7):
    T = OF.OffsetFetchRequestTopic
    req_topics = None if topics is None else [T(name=t, partition_indexes=ps) for t, ps in topics.items()]
    r = await h.call("OffsetFetch", version, group_id=group, topics=req_topics, require_stable=require_stable)
    return r.error_code, {(t.name, p.partition_index): (p.committed_offset, p.error_code)
                          for t in r.topics for p in t.partitions}


@mock_clock_test
async def test_standalone_commit_and_fetch_all_versions(harness):
    async with harness.running() as b:
        b.topics.create("t", 3)
        b.topics.create("u", 1)
        assert await commit(harness, {"t": {0: 10, 1: 11}, "u": {0: 5}}) == {
            ("t", 0): 0, ("t", 1): 0, ("u", 0): 0}
        # v1 (no null topics), v2-v7 single group, null topics = everything committed.
        err, got = await fetch_v7(harness, topics={"t": [0, 1, 2]}, version=1)
        assert got == {("t", 0): (10, 0), ("t", 1): (11, 0), ("t", 2): (-1, 0)}
        err, got = await fetch_v7(harness, topics=None)
        assert err == 0 and got == {("t", 0): (10, 0), ("t", 1): (11, 0), ("u", 0): (5, 0)}
        r = await harness.call("OffsetFetch", 5, group_id="g",
                               topics=[OF.OffsetFetchRequestTopic(name="t", partition_indexes=[1])])
        p = r.topics[0].partitions[0]
        assert (p.committed_offset, p.committed_leader_epoch, p.metadata) == (11, 3, "m")
        # v8+: several groups in one request; an unknown group reads -1 without error.
        G = OF.OffsetFetchRequestGroup
        r = await harness.call("OffsetFetch", 8, groups=[
            G(group_id="g", topics=None), G(group_id="other", topics=[
                G.OffsetFetchRequestTopics(name="t", partition_indexes=[0])])], require_stable=False)
        assert [g.group_id for g in r.groups] == ["g", "other"]
        assert sorted((t.name, p.partition_index, p.committed_offset) for t in r.groups[0].topics
                      for p in t.partitions) == [("t", 0, 10), ("t", 1, 11), ("u", 0, 5)]
        assert r.groups[1].topics[0].partitions[0].committed_offset == -1
        # v10 names topics by id.
        tid = b.topics.get("t").topic_id
        r = await harness.call("OffsetFetch", 10, groups=[G(group_id="g", topics=[
            G.OffsetFetchRequestTopics(topic_id=tid, partition_indexes=[0]),
            G.OffsetFetchRequestTopics(topic_id=b"\x01" * 16, partition_indexes=[0])])])
        t0, t1 = r.groups[0].topics
        assert bytes(t0.topic_id) == tid and t0.partitions[0].committed_offset == 10
        assert t1.partitions[0].error_code == Errors.UNKNOWN_TOPIC_ID
        errs = await commit(harness, {"t": {2: 99}}, version=10, topic_ids={"t": tid})
        assert list(errs.values()) == [0]
        err, got = await fetch_v7(harness, topics={"t": [2]})
        assert got == {("t", 2): (99, 0)}


@mock_clock_test
async def test_commit_errors(harness):
    async with harness.running() as b:
        b.topics.create("t", 1)
        assert await commit(harness, {"nope": {0: 1}}) == {("nope", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION}
        assert await commit(harness, {"t": {0: 1}}, metadata="x" * 4097) == {
            ("t", 0): Errors.OFFSET_METADATA_TOO_LARGE}
        # A generation for a group that does not exist.
        assert await commit(harness, {"t": {0: 1}}, group="ghost", generation=1, version=8) == {
            ("t", 0): Errors.ILLEGAL_GENERATION}
        assert await commit(harness, {"t": {0: 1}}, group="ghost", generation=1, version=9) == {
            ("t", 0): Errors.GROUP_ID_NOT_FOUND}
        # Kafka keeps offsets of the empty group id "for backwards compatibility" (measured on 4.3.1:
        # a simple commit for "" succeeds and OffsetFetch reads it back); only null is refused.
        assert await commit(harness, {"t": {0: 1}}, group="") == {("t", 0): Errors.NONE}


@mock_clock_test
async def test_member_commit_checks_generation_and_member(harness):
    async with harness.running() as b:
        b.topics.create("t", 1)
        mid = (await full_join(harness, rebalance=10_000)).member_id
        # CompletingRebalance: the member must sync first.
        assert await commit(harness, {"t": {0: 1}}, generation=1, member=mid) == {
            ("t", 0): Errors.REBALANCE_IN_PROGRESS}
        await sync(harness, mid, 1)
        assert await commit(harness, {"t": {0: 7}}, generation=1, member=mid) == {("t", 0): 0}
        assert await commit(harness, {"t": {0: 8}}, generation=0, member=mid) == {
            ("t", 0): Errors.ILLEGAL_GENERATION}
        assert await commit(harness, {"t": {0: 8}}, generation=1, member="other") == {
            ("t", 0): Errors.UNKNOWN_MEMBER_ID}
        # Generation -1 from outside the group while it has members.
        assert await commit(harness, {"t": {0: 8}}, generation=-1, member="") == {
            ("t", 0): Errors.UNKNOWN_MEMBER_ID}
        err, got = await fetch_v7(harness, topics={"t": [0]})
        assert got == {("t", 0): (7, 0)}


@mock_clock_test
async def test_require_stable_and_transactional_offsets(harness):
    async with harness.running() as b:
        b.topics.create("t", 2)
        gc = harness.gc
        await commit(harness, {"t": {0: 1, 1: 1}})
        assert gc.stage_txn_offsets("g", 4000, 0, [("t", 0, 50, -1, "")]) == Errors.NONE
        offsets = gc.offset_manager
        assert offsets.has_pending_txn_offsets("g", "t", 0) and not offsets.has_pending_txn_offsets("g", "t", 1)
        err, got = await fetch_v7(harness, topics={"t": [0, 1]}, require_stable=True)
        assert got == {("t", 0): (-1, Errors.UNSTABLE_OFFSET_COMMIT), ("t", 1): (1, 0)}
        err, got = await fetch_v7(harness, topics={"t": [0, 1]}, require_stable=False)
        assert got == {("t", 0): (1, 0), ("t", 1): (1, 0)}
        # The marker lands in the group's __consumer_offsets partition, then the coordinator applies it.
        p = partition_for("g", 5)
        offsets_log = b.topics.get("__consumer_offsets").partitions[p].log
        append_marker(offsets_log, True, producer_id=4000, producer_epoch=0, coordinator_epoch=0)
        gc.complete_txn_offsets(4000, True)
        err, got = await fetch_v7(harness, topics={"t": [0]}, require_stable=True)
        assert got == {("t", 0): (50, 0)}
        # An aborted one leaves the committed offset alone.
        gc.stage_txn_offsets("g", 4001, 0, [("t", 1, 70, -1, None)])
        append_marker(offsets_log, False, producer_id=4001, producer_epoch=0, coordinator_epoch=0)
        gc.complete_txn_offsets(4001, False)
        err, got = await fetch_v7(harness, topics={"t": [1]}, require_stable=True)
        assert got == {("t", 1): (1, 0)}
        # Still pending at restart: replay keeps it pending.
        gc.stage_txn_offsets("g", 4002, 0, [("t", 1, 90, -1, None)])
    async with harness.running():
        err, got = await fetch_v7(harness, topics={"t": [0, 1]}, require_stable=True)
        assert got == {("t", 0): (50, 0), ("t", 1): (-1, Errors.UNSTABLE_OFFSET_COMMIT)}


@mock_clock_test
async def test_require_stable_waits_for_a_marker_being_settled(harness):
    """A require_stable OffsetFetch that comes after the transaction's marker was appended (its
    offsets settle once it is replicated) waits for them and reads them, as Kafka's fetch run as
    a write operation does; the same fetch without require_stable does not wait."""
    async with harness.running() as b:
        b.topics.create("t", 1)
        gc = harness.gc
        await commit(harness, {"t": {0: 1}})
        assert gc.stage_txn_offsets("g", 4000, 0, [("t", 0, 50, -1, "")]) == Errors.NONE
        answers = []

        async def fetch(require_stable):
            answers.append((require_stable, await fetch_v7(harness, topics={"t": [0]}, require_stable=require_stable)))

        async with trio.open_nursery() as nursery:
            with gc.settling_txn_offsets(partition_for("g", 5)):
                nursery.start_soon(fetch, True)
                nursery.start_soon(fetch, False)
                await trio.sleep(1)          # the marker is being replicated
                assert answers == [(False, (0, {("t", 0): (1, 0)}))]
                gc.complete_txn_offsets(4000, True)
        assert answers[1] == (True, (0, {("t", 0): (50, 0)}))
        # a marker that comes after the fetch is not waited for: its offsets read unstable
        gc.stage_txn_offsets("g", 4001, 0, [("t", 0, 60, -1, "")])
        assert await fetch_v7(harness, topics={"t": [0]}, require_stable=True) == \
            (0, {("t", 0): (-1, Errors.UNSTABLE_OFFSET_COMMIT)})


@mock_clock_test
async def test_offsets_and_group_survive_restart(harness):
    async with harness.running() as b:
        b.topics.create("t", 3)
        mid = (await full_join(harness, session=30_000, rebalance=10_000)).member_id
        await sync(harness, mid, 1, {mid: b"asg"})
        assert await commit(harness, {"t": {0: 3, 2: 4}}, generation=1, member=mid) == {("t", 0): 0, ("t", 2): 0}
        await commit(harness, {"t": {1: 42}}, group="simple")
        # What is on disk is Kafka's layout, in the group's partition.
        plog = b.topics.get("__consumer_offsets").partitions[partition_for("g", 5)].log
        data = plog.read(0, 1 << 20).records
        kinds = [type(decode_record(r.key, r.value)).__name__ for _h, bt in rec.iter_log_batches(data)
                 for r in rec.decode_records(bt)]
        assert kinds.count("GroupRecord") >= 2 and kinds.count("OffsetRecord") == 2
    async with harness.running():
        err, got = await fetch_v7(harness, topics={"t": [0, 1, 2]})
        assert got == {("t", 0): (3, 0), ("t", 1): (-1, 0), ("t", 2): (4, 0)}
        err, got = await fetch_v7(harness, group="simple", topics=None)
        assert got == {("t", 1): (42, 0)}
        # The group came back Stable with its generation and assignment; the member may go on.
        d = await describe(harness)
        assert d.group_state == "Stable" and d.members[0].member_id == mid
        assert bytes(d.members[0].member_assignment) == b"asg"
        assert await heartbeat(harness, mid, 1) == 0
        # ...or expire if it does not come back.
        await trio.sleep(31)
        d = await describe(harness)
        assert d.group_state == "Empty"


@mock_clock_test
async def test_offset_retention_expires_offsets_and_group(harness):
    async with harness.running() as b:
        b.topics.create("t", 1)
        await commit(harness, {"t": {0: 5}}, group="simple")
        # v2-v4 retention_time_ms keeps an explicit expire timestamp.
        r = await harness.call("OffsetCommit", 2, group_id="ret", generation_id_or_member_epoch=-1,
                               member_id="", retention_time_ms=1000, topics=commit_topics({"t": {0: 9}}))
        assert r.topics[0].partitions[0].error_code == 0
        gc = harness.gc
        now = now_ms()
        assert gc.expire_offsets_now(now + 2000) == 1            # only the explicit one
        assert gc.expire_offsets_now(now + gc.offset_manager.offsets_retention_ms + 1000) == 1
        err, got = await fetch_v7(harness, group="simple", topics={"t": [0]})
        assert got == {("t", 0): (-1, 0)}
        assert (await harness.call("ListGroups", 4, states_filter=[])).groups == []
    async with harness.running():
        err, got = await fetch_v7(harness, group="simple", topics={"t": [0]})
        assert got == {("t", 0): (-1, 0)}
        assert "simple" not in harness.gc.group_manager.groups


@mock_clock_test
async def test_delete_groups_offset_delete_and_deleted_topics(harness):
    async with harness.running() as b:
        b.topics.create("t", 2)
        b.topics.create("u", 1)
        await commit(harness, {"t": {0: 1, 1: 2}, "u": {0: 3}})
        OD = API["OffsetDelete"].Request
        r = await harness.call("OffsetDelete", 0, group_id="g", topics=[
            OD.OffsetDeleteRequestTopic(name="t", partitions=[
                OD.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=1)]),
            OD.OffsetDeleteRequestTopic(name="zz", partitions=[
                OD.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=0)])])
        assert r.error_code == 0
        assert [(t.name, [p.error_code for p in t.partitions]) for t in r.topics] == [
            ("t", [0]), ("zz", [Errors.UNKNOWN_TOPIC_OR_PARTITION])]
        r = await harness.call("OffsetDelete", 0, group_id="nope", topics=[])
        assert r.error_code == Errors.GROUP_ID_NOT_FOUND
        err, got = await fetch_v7(harness, topics=None)
        assert got == {("t", 0): (1, 0), ("u", 0): (3, 0)}
        harness.gc.on_topics_deleted({"u"})
        err, got = await fetch_v7(harness, topics=None)
        assert got == {("t", 0): (1, 0)}
        r = await harness.call("DeleteGroups", 2, groups_names=["g", "g", "missing"])
        assert [x.error_code for x in r.results] == [0, Errors.GROUP_ID_NOT_FOUND, Errors.GROUP_ID_NOT_FOUND]
        # A group with members cannot be deleted.
        await join(harness, group="busy", version=3, rebalance=10_000)
        r = await harness.call("DeleteGroups", 1, groups_names=["busy"])
        assert r.results[0].error_code == Errors.NON_EMPTY_GROUP
    async with harness.running():
        err, got = await fetch_v7(harness, topics=None)
        assert got == {}
        assert "g" not in harness.gc.group_manager.groups and "busy" in harness.gc.group_manager.groups


@mock_clock_test
async def test_a_retention_time_past_the_end_of_time_wraps_as_in_kafka(harness):
    """v2-4 carry a retention time; Kafka adds it to now as Java longs. The fuzzer's
    Long.MAX_VALUE made the embedded broker fail to encode the offset record (internal error)."""
    async with harness.running() as b:
        b.topics.create("t", 1)
        r = await harness.call("OffsetCommit", 2, group_id="g", generation_id_or_member_epoch=-1, member_id="",
                               retention_time_ms=2**63 - 1, topics=commit_topics({"t": {0: 4}}))
        assert [p.error_code for t in r.topics for p in t.partitions] == [Errors.NONE]
