"""The classic group protocol, driven through the real handlers with real
encoded/decoded requests against a real Broker (logs on disk), on MockClock."""

from __future__ import annotations

import trio

from broker_impl.protocol.errors import Errors
from broker_impl.protocol.messages import API

from tests.unit.coordinators.group_helpers import (
    describe, full_join, heartbeat, join, mock_clock_test, subscription, sync,
)

MI = API["LeaveGroup"].Request.MemberIdentity


@mock_clock_test
async def test_member_id_required_then_single_member_group(harness):
    async with harness.running():
        first = await join(harness, client_id="app-1")
        assert first.error_code == Errors.MEMBER_ID_REQUIRED
        assert first.member_id.startswith("app-1-") and len(first.member_id) == len("app-1-") + 36
        r = await join(harness, member_id=first.member_id, client_id="app-1")
        assert r.error_code == Errors.NONE
        assert (r.generation_id, r.leader, r.member_id, r.protocol_name) == (1, first.member_id, first.member_id,
                                                                             "range")
        assert [m.member_id for m in r.members] == [first.member_id]
        assert bytes(r.members[0].metadata) == subscription("t")
        s = await sync(harness, r.member_id, 1, {r.member_id: b"assign-1"})
        assert (s.error_code, bytes(s.assignment)) == (Errors.NONE, b"assign-1")
        assert await heartbeat(harness, r.member_id, 1) == Errors.NONE
        d = await describe(harness)
        assert (d.group_state, d.protocol_type, d.protocol_data) == ("Stable", "consumer", "range")
        assert d.members[0].client_id == "app-1" and d.members[0].client_host == "/127.0.0.1"
        assert bytes(d.members[0].member_assignment) == b"assign-1"


@mock_clock_test
async def test_v3_join_needs_no_member_id_round_trip(harness):
    async with harness.running():
        r = await join(harness, version=3)
        assert r.error_code == Errors.NONE and r.generation_id == 1 and r.member_id.startswith("client-")


@mock_clock_test
async def test_second_member_triggers_rebalance_and_leader_gets_all_metadata(harness):
    async with harness.running():
        a = await full_join(harness, client_id="a")
        assert (await sync(harness, a.member_id, 1, {a.member_id: b"A1"})).error_code == Errors.NONE
        results = {}

        async def join_b():
            results["b"] = await full_join(harness, client_id="b")

        harness.nursery.start_soon(join_b)
        await trio.sleep(0.01)   # b is parked in JoinGroup: the group is rebalancing
        assert (await describe(harness)).group_state == "PreparingRebalance"
        assert await heartbeat(harness, a.member_id, 1) == Errors.REBALANCE_IN_PROGRESS
        assert (await sync(harness, a.member_id, 1)).error_code == Errors.REBALANCE_IN_PROGRESS
        a2 = await join(harness, member_id=a.member_id, client_id="a")
        await trio.sleep(0.01)
        b = results["b"]
        assert a2.generation_id == b.generation_id == 2
        assert a2.leader == b.leader == a.member_id
        assert sorted(m.member_id for m in a2.members) == sorted([a.member_id, b.member_id])
        assert b.members == []
        assert (await describe(harness)).group_state == "CompletingRebalance"
        # A follower syncing first waits for the leader's assignment.
        got = {}

        async def sync_b():
            got["b"] = await sync(harness, b.member_id, 2)

        harness.nursery.start_soon(sync_b)
        await trio.sleep(0.01)
        assert "b" not in got
        sa = await sync(harness, a.member_id, 2, {a.member_id: b"A2", b.member_id: b"B2"})
        await trio.sleep(0.01)
        assert bytes(sa.assignment) == b"A2" and bytes(got["b"].assignment) == b"B2"
        assert (await describe(harness)).group_state == "Stable"
        # Stale generation.
        assert await heartbeat(harness, a.member_id, 1) == Errors.ILLEGAL_GENERATION
        assert (await sync(harness, a.member_id, 1)).error_code == Errors.ILLEGAL_GENERATION
        assert await heartbeat(harness, "nobody", 2) == Errors.UNKNOWN_MEMBER_ID


@mock_clock_test
async def test_member_not_rejoining_is_removed_after_rebalance_timeout(harness):
    async with harness.running():
        a = await full_join(harness, client_id="a", rebalance=5_000, session=60_000)
        await sync(harness, a.member_id, 1, {a.member_id: b"A"})
        t0 = trio.current_time()
        b = await full_join(harness, client_id="b", rebalance=5_000, session=60_000)   # a never rejoins
        assert trio.current_time() - t0 >= 5.0
        assert b.generation_id == 2 and b.leader == b.member_id
        assert [m.member_id for m in b.members] == [b.member_id]
        assert await heartbeat(harness, a.member_id, 2) == Errors.UNKNOWN_MEMBER_ID


@mock_clock_test
async def test_session_timeout_removes_a_silent_member(harness):
    async with harness.running():
        a = await full_join(harness, session=6_000)
        await sync(harness, a.member_id, 1, {a.member_id: b"A"})
        for _ in range(5):              # heartbeats keep it alive past several timeouts
            await trio.sleep(4)
            assert await heartbeat(harness, a.member_id, 1) == Errors.NONE
        await trio.sleep(6.5)
        d = await describe(harness)
        assert d.group_state == "Empty" and d.members == []
        assert await heartbeat(harness, a.member_id, 1) == Errors.UNKNOWN_MEMBER_ID


@mock_clock_test
async def test_session_timeout_bounds(harness):
    async with harness.running():
        assert (await join(harness, session=5_999)).error_code == Errors.INVALID_SESSION_TIMEOUT
        assert (await join(harness, session=1_800_001)).error_code == Errors.INVALID_SESSION_TIMEOUT
        assert (await join(harness, group="")).error_code == Errors.INVALID_GROUP_ID
        assert (await join(harness, member_id="ghost")).error_code == Errors.UNKNOWN_MEMBER_ID


@mock_clock_test
async def test_protocol_selection_by_votes_and_inconsistent_protocol(harness):
    async with harness.running():
        out = {}

        async def member(name, names):
            out[name] = await full_join(harness, client_id=name, names=names)

        # One group, first member alone picks its favourite; then three members rejoin.
        a = await full_join(harness, client_id="a", names=("range", "roundrobin"))
        assert a.protocol_name == "range"
        await sync(harness, a.member_id, 1, {})
        harness.nursery.start_soon(member, "b", ("roundrobin", "range"))
        harness.nursery.start_soon(member, "c", ("roundrobin", "sticky"))
        await trio.sleep(0.01)
        r = await join(harness, member_id=a.member_id, client_id="a", names=("range", "roundrobin"))
        await trio.sleep(0.01)
        # range is not supported by c: roundrobin is the only candidate.
        assert r.protocol_name == out["b"].protocol_name == out["c"].protocol_name == "roundrobin"
        bad = await join(harness, client_id="d", names=("other",))
        assert bad.error_code == Errors.INCONSISTENT_GROUP_PROTOCOL
        bad = await join(harness, client_id="d", names=("roundrobin",), protocol_type="connect")
        assert bad.error_code == Errors.INCONSISTENT_GROUP_PROTOCOL


@mock_clock_test
async def test_leave_group_batched_and_single(harness):
    async with harness.running():
        a = await full_join(harness, client_id="a")
        await sync(harness, a.member_id, 1, {})
        r = await harness.call("LeaveGroup", 3, group_id="g",
                               members=[MI(member_id=a.member_id), MI(member_id="ghost")])
        assert r.error_code == Errors.NONE
        assert [(m.member_id, m.error_code) for m in r.members] == [(a.member_id, Errors.NONE),
                                                                     ("ghost", Errors.UNKNOWN_MEMBER_ID)]
        assert (await describe(harness)).group_state == "Empty"
        r = await harness.call("LeaveGroup", 1, group_id="g", member_id="ghost")
        assert r.error_code == Errors.UNKNOWN_MEMBER_ID
        # an unknown group: no group-level error, every member unknown (Kafka 4.3.1, measured)
        r = await harness.call("LeaveGroup", 4, group_id="nope", members=[MI(member_id="x")])
        assert r.error_code == Errors.NONE
        assert [(m.member_id, m.error_code) for m in r.members] == [("x", Errors.UNKNOWN_MEMBER_ID)]
        r = await harness.call("LeaveGroup", 1, group_id="nope", member_id="x")
        assert r.error_code == Errors.UNKNOWN_MEMBER_ID


@mock_clock_test
async def test_leave_of_one_member_rebalances_the_other(harness):
    async with harness.running():
        res = {}

        async def member(name):
            res[name] = await full_join(harness, client_id=name)

        harness.broker.config.values["group.initial.rebalance.delay.ms"] = "1000"
        harness.nursery.start_soon(member, "a")
        harness.nursery.start_soon(member, "b")
        await trio.sleep(5)
        a, b = res["a"], res["b"]
        assert a.generation_id == b.generation_id == 1      # the initial delay let both in
        leader, follower = (a, b) if a.leader == a.member_id else (b, a)
        harness.nursery.start_soon(sync, harness, follower.member_id, 1)
        await sync(harness, leader.member_id, 1, {a.member_id: b"a", b.member_id: b"b"})
        await harness.call("LeaveGroup", 5, group_id="g", members=[MI(member_id=leader.member_id, reason="bye")])
        assert await heartbeat(harness, follower.member_id, 1) == Errors.REBALANCE_IN_PROGRESS
        r = await join(harness, member_id=follower.member_id, client_id="x")
        assert r.generation_id == 2 and r.leader == follower.member_id


@mock_clock_test
async def test_static_member_rejoin_keeps_generation(harness):
    async with harness.running():
        a = await join(harness, instance="inst-1", version=5)
        assert a.error_code == Errors.NONE         # static members get no MEMBER_ID_REQUIRED
        assert a.member_id.startswith("inst-1-")
        await sync(harness, a.member_id, 1, {a.member_id: b"A"}, instance="inst-1")
        # The same instance restarts: new member id, same generation, no rebalance.
        a2 = await join(harness, instance="inst-1", version=5)
        assert a2.error_code == Errors.NONE and a2.member_id != a.member_id and a2.generation_id == 1
        assert (await describe(harness)).group_state == "Stable"
        s = await sync(harness, a2.member_id, 1, instance="inst-1")
        assert bytes(s.assignment) == b"A"
        assert await heartbeat(harness, a.member_id, 1, instance="inst-1") == Errors.FENCED_INSTANCE_ID
        assert await heartbeat(harness, a2.member_id, 1, instance="inst-1") == Errors.NONE
        # v9: the leader rejoining statically is told to skip the assignment.
        a3 = await join(harness, instance="inst-1", version=9)
        assert a3.skip_assignment is True and a3.leader == a3.member_id and len(a3.members) == 1
        # Admin removal by instance id (member id unknown).
        r = await harness.call("LeaveGroup", 4, group_id="g", members=[MI(member_id="", group_instance_id="inst-1")])
        assert r.members[0].error_code == Errors.NONE
        assert (await describe(harness)).group_state == "Empty"


@mock_clock_test
async def test_describe_and_list_groups(harness):
    async with harness.running():
        a = await full_join(harness, group="g1")
        await sync(harness, a.member_id, 1, {}, group="g1")
        b = await full_join(harness, group="g2")
        await harness.call("LeaveGroup", 1, group_id="g2", member_id=b.member_id)
        r = await harness.call("ListGroups", 4, states_filter=[])
        assert sorted((g.group_id, g.group_state) for g in r.groups) == [("g1", "Stable"), ("g2", "Empty")]
        r = await harness.call("ListGroups", 4, states_filter=["stable"])
        assert [g.group_id for g in r.groups] == ["g1"]
        r = await harness.call("ListGroups", 5, states_filter=[], types_filter=["consumer"])
        assert r.groups == []
        r = await harness.call("ListGroups", 5, states_filter=[], types_filter=["Classic"])
        assert {g.group_type for g in r.groups} == {"classic"}
        r = await harness.call("ListGroups", 0)
        assert sorted(g.group_id for g in r.groups) == ["g1", "g2"]
        d = await describe(harness, group="missing", version=5)
        assert (d.error_code, d.group_state) == (Errors.NONE, "Dead")
        d = await describe(harness, group="missing", version=6)
        assert (d.error_code, d.group_state) == (Errors.GROUP_ID_NOT_FOUND, "Dead")


@mock_clock_test
async def test_find_coordinator_all_versions(harness):
    async with harness.running() as b:
        r = await harness.call("FindCoordinator", 0, key="g")
        assert (r.error_code, r.node_id, r.port) == (Errors.NONE, b.node_id, b.port)
        assert b.topics.get("__consumer_offsets") is not None        # created on first lookup
        assert len(b.topics.get("__consumer_offsets").partitions) == 5
        # A Broker always runs its transaction coordinator: every transactional id is its own.
        r = await harness.call("FindCoordinator", 3, key="tx", key_type=1)
        assert (r.error_code, r.node_id, r.port) == (Errors.NONE, b.node_id, b.port)
        r = await harness.call("FindCoordinator", 4, key_type=0, coordinator_keys=["a", "b"])
        assert [(c.key, c.error_code, c.node_id) for c in r.coordinators] == [("a", 0, b.node_id),
                                                                                ("b", 0, b.node_id)]
        r = await harness.call("FindCoordinator", 6, key_type=1, coordinator_keys=["tx"])
        assert r.coordinators[0].error_code == Errors.NONE
        r = await harness.call("FindCoordinator", 6, key_type=2, coordinator_keys=["s:x:0"])
        assert r.coordinators[0].error_code == Errors.INVALID_REQUEST
