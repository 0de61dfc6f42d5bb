"""KIP-848 server-side assignors and the member reconciliation steps (Kafka's UniformAssignor,
RangeAssignor and CurrentAssignmentBuilder rules), on the coordinator's own objects."""

from __future__ import annotations

from broker_impl.coordinators.assignors import MemberSpec, RangeAssignor, UniformAssignor
from broker_impl.coordinators.consumer_group import ConsumerGroup, ConsumerGroupMember, ConsumerGroupState, MemberState

A, B = b"A" * 16, b"B" * 16


def _sizes(out):
    return {m: sum(len(ps) for ps in a.values()) for m, a in out.items()}


def test_uniform_balances_and_keeps_what_members_had():
    out = UniformAssignor().assign({"m1": MemberSpec({A}, {}), "m2": MemberSpec({A}, {})}, {A: 4})
    assert _sizes(out) == {"m1": 2, "m2": 2}
    assert out["m1"][A] | out["m2"][A] == {0, 1, 2, 3}
    # A third member joins: each old member keeps partitions it had, one of them gives one up.
    again = UniformAssignor().assign({"m1": MemberSpec({A}, out["m1"]), "m2": MemberSpec({A}, out["m2"]),
                                      "m3": MemberSpec({A}, {})}, {A: 4})
    assert sorted(_sizes(again).values()) == [1, 1, 2]
    assert again["m1"][A] <= out["m1"][A] and again["m2"][A] <= out["m2"][A]
    assert again["m1"][A] | again["m2"][A] | again["m3"][A] == {0, 1, 2, 3}


def test_uniform_with_different_subscriptions_gives_each_its_topics_only():
    out = UniformAssignor().assign({"m1": MemberSpec({A, B}, {}), "m2": MemberSpec({B}, {})}, {A: 2, B: 2})
    assert out["m1"][A] == {0, 1}
    assert A not in out["m2"]
    assert out["m1"].get(B, set()) | out["m2"][B] == {0, 1}


def test_range_gives_contiguous_ranges_the_first_members_one_more():
    out = RangeAssignor().assign({"b": MemberSpec({A}, {}), "a": MemberSpec({A}, {})}, {A: 5})
    assert out == {"a": {A: {0, 1, 2}}, "b": {A: {3, 4}}}


def test_member_revokes_before_it_takes_the_new_epoch():
    m = ConsumerGroupMember("m1", member_epoch=1, assigned={A: {0, 1}})
    free = lambda t, p: -1  # noqa: E731
    m.reconcile(2, {A: {0}}, free, owned=[(A, [0, 1])])
    assert (m.state, m.member_epoch, m.assigned, m.pending_revocation) == \
        (MemberState.UNREVOKED_PARTITIONS, 1, {A: {0}}, {A: {1}})
    m.reconcile(2, {A: {0}}, free, owned=[(A, [0, 1])])      # still owns 1: no progress
    assert m.state is MemberState.UNREVOKED_PARTITIONS
    m.reconcile(2, {A: {0}}, free, owned=[(A, [0])])
    assert (m.state, m.member_epoch, m.previous_member_epoch, m.assigned) == (MemberState.STABLE, 2, 1, {A: {0}})


def test_a_partition_another_member_still_owns_is_unreleased():
    group = ConsumerGroup("g")
    group.update_member(None, ConsumerGroupMember("old", member_epoch=1, assigned={A: {1}}))
    m = ConsumerGroupMember("new", member_epoch=0)
    m.reconcile(2, {A: {0, 1}}, group.partition_epoch, owned=[])
    assert (m.state, m.member_epoch, m.assigned) == (MemberState.UNRELEASED_PARTITIONS, 2, {A: {0}})
    group.update_member(None, m)
    group.remove_member("old")
    m.reconcile(2, {A: {0, 1}}, group.partition_epoch, owned=[(A, [0])])
    assert (m.state, m.assigned) == (MemberState.STABLE, {A: {0, 1}})


def test_group_state_follows_the_epochs():
    g = ConsumerGroup("g")
    assert g.state is ConsumerGroupState.EMPTY
    g.update_member(None, ConsumerGroupMember("m", member_epoch=0))
    g.group_epoch = 1
    assert g.state is ConsumerGroupState.ASSIGNING
    g.assignment_epoch = 1
    assert g.state is ConsumerGroupState.RECONCILING
    g.members["m"].member_epoch = 1
    assert g.state is ConsumerGroupState.STABLE
