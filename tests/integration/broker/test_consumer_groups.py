"""KIP-848 consumer groups (ConsumerGroupHeartbeat, server-side assignment) against the
embedded broker (a real subprocess) with librdkafka's ``group.protocol=consumer``, plus raw
ConsumerGroupHeartbeat/ConsumerGroupDescribe requests for the error answers. Every wait is
bounded; nothing asserts on elapsed time."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from broker_impl.protocol.errors import Errors
from broker_impl.protocol.messages import API

from .rawclient import RawConnection
from .test_groups import create_topic, produce

pytestmark = pytest.mark.slow


def consumer(bootstrap: str, group: str, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra})


def assigned(c: Consumer) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in c.assignment()}


def poll_until(consumers, predicate, timeout: float = 60.0, sink: dict | None = None) -> bool:
    """Poll every consumer until ``predicate()``; records polled land in ``sink[consumer]``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            m = c.poll(0.1)
            if m is not None and not m.error() and sink is not None:
                sink.setdefault(id(c), []).append((m.partition(), m.offset()))
        if predicate():
            return True
    return False


def test_two_members_share_four_partitions_then_one_takes_all_and_offsets_resume(broker):
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 4)
    produce(broker.bootstrap, topic, per_partition=5, partitions=4)
    c1 = consumer(broker.bootstrap, group)
    c2 = consumer(broker.bootstrap, group)
    c3 = None
    try:
        c1.subscribe([topic])
        c2.subscribe([topic])
        assert poll_until([c1, c2], lambda: len(assigned(c1)) == 2 and len(assigned(c2)) == 2), \
            (assigned(c1), assigned(c2))
        assert assigned(c1) | assigned(c2) == {(topic, p) for p in range(4)}

        # Each commits offset 2 on its partitions, then leaves: the other takes all four.
        for c in (c1, c2):
            c.commit(offsets=[TopicPartition(topic, p, 2) for _t, p in sorted(assigned(c))], asynchronous=False)
        c2.close()
        c2 = None
        assert poll_until([c1], lambda: len(assigned(c1)) == 4), assigned(c1)

        # ConsumerGroupDescribe, through the admin client: one member, every partition, Stable.
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        desc = admin.describe_consumer_groups([group])[group].result(15)
        assert str(desc.type).endswith("CONSUMER"), desc.type
        assert len(desc.members) == 1
        assert {tp.partition for tp in desc.members[0].assignment.topic_partitions} == {0, 1, 2, 3}
        listed = admin.list_consumer_groups().result(15)
        assert [str(g.type) for g in listed.valid if g.group_id == group][0].endswith("CONSUMER")
        c1.close()
        c1 = None

        # A new member of the group resumes at the committed offsets: 2 on every partition.
        c3 = consumer(broker.bootstrap, group)
        c3.subscribe([topic])
        got: dict = {}
        assert poll_until([c3], lambda: len({p for p, _o in got.get(id(c3), [])}) == 4, sink=got), got
        first = {}
        for p, o in got[id(c3)]:
            first.setdefault(p, o)
        assert first == {0: 2, 1: 2, 2: 2, 3: 2}
    finally:
        for c in (c1, c2, c3):
            if c is not None:
                c.close()


HB = API["ConsumerGroupHeartbeat"].Request


def _owned(topic_id: bytes, *partitions: int):
    return [HB.TopicPartitions(topic_id=topic_id, partitions=list(partitions))]


def _hb(client: RawConnection, version: int = 1, **fields):
    body = dict(group_id="g", member_id="", member_epoch=0, instance_id=None, rack_id=None,
                rebalance_timeout_ms=30000, subscribed_topic_names=["t"], server_assignor=None,
                topic_partitions=[])
    body.update(fields)
    return client.request("ConsumerGroupHeartbeat", version, HB(**body))


def _join_assigned(client: RawConnection, group: str, member: str, topic: str, **fields):
    """Join and heartbeat until the member is assigned something (bounded: 10 s). The embedded
    broker assigns at once; Kafka's coordinator may not see a topic created a moment ago yet."""
    r = _hb(client, group_id=group, member_id=member, subscribed_topic_names=[topic], **fields)
    deadline = time.monotonic() + 10
    while r.error_code == Errors.NONE and not (r.assignment and r.assignment.topic_partitions) \
            and time.monotonic() < deadline:
        time.sleep(0.2)
        r = _hb(client, group_id=group, member_id=member, member_epoch=r.member_epoch,
                subscribed_topic_names=[topic], **fields)
    return r


def _describe(bootstrap: str, group: str):
    with RawConnection(bootstrap) as c:
        return c.request("ConsumerGroupDescribe", 1, API["ConsumerGroupDescribe"].Request(group_ids=[group])).groups[0]


def test_heartbeat_errors_epochs_and_describe(broker_factory):
    # Each heartbeat recomputes the target assignment when due (Kafka waits 1 s between two)
    broker = broker_factory({"group.consumer.assignment.interval.ms": "0"})
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 2)
    with RawConnection(broker.bootstrap) as c:
        # A first heartbeat must be a full one, name its member (v1) and a known assignor.
        r = _hb(c, group_id=group, member_id="m1", rebalance_timeout_ms=-1)
        assert (r.error_code, r.error_message) == (Errors.INVALID_REQUEST,
                                                   "RebalanceTimeoutMs must be provided in first request.")
        r = _hb(c, group_id=group, member_id="")
        assert (r.error_code, r.error_message) == (Errors.INVALID_REQUEST, "MemberId can't be empty.")
        r = _hb(c, group_id=group, member_id="m1", subscribed_topic_names=[topic], server_assignor="sticky")
        assert r.error_code == Errors.UNSUPPORTED_ASSIGNOR
        r = _hb(c, group_id=group, member_id="m1", member_epoch=5)
        assert (r.error_code, r.error_message) == (Errors.GROUP_ID_NOT_FOUND, f"Consumer group {group} not found.")
        r = _hb(c, group_id=group, member_id="m1", member_epoch=-1)
        assert (r.error_code, r.error_message) == (Errors.GROUP_ID_NOT_FOUND, f"Group {group} not found.")
        r = _hb(c, group_id="", member_id="", member_epoch=-1)     # the member id is checked first
        assert (r.error_code, r.error_message) == (Errors.INVALID_REQUEST, "MemberId can't be empty.")
        r = _hb(c, version=0, group_id=group, member_id="", rack_id="")   # v0: the broker names the member
        assert (r.error_code, r.error_message) == (Errors.INVALID_REQUEST, "RackId can't be empty.")

        # Join: both partitions, epoch e: 2 when the topic is known at once (a new group leaves
        # epoch 0, then the subscription bumps it); Kafka may see a topic just created later.
        r = _join_assigned(c, group, "m1", topic, server_assignor="range")
        e = r.member_epoch
        assert (r.error_code, r.member_id) == (Errors.NONE, "m1") and e >= 2
        assert [sorted(tp.partitions) for tp in r.assignment.topic_partitions] == [[0, 1]]
        tid = r.assignment.topic_partitions[0].topic_id
        # A second member: the group epoch goes to e + 1; m2 waits for m1 to revoke one partition.
        r2 = _hb(c, group_id=group, member_id="m2", subscribed_topic_names=[topic])
        assert (r2.error_code, r2.member_epoch) == (Errors.NONE, e + 1)
        assert r2.assignment.topic_partitions == []
        r = _hb(c, group_id=group, member_id="m1", member_epoch=e, rebalance_timeout_ms=-1,
                subscribed_topic_names=None, topic_partitions=_owned(tid, 0, 1))
        assert r.member_epoch == e and [sorted(tp.partitions) for tp in r.assignment.topic_partitions] == [[0]]
        # Revoked (m1 reports only partition 0): m1 moves to epoch e + 1, then m2 gets partition 1.
        r = _hb(c, group_id=group, member_id="m1", member_epoch=e, rebalance_timeout_ms=-1,
                subscribed_topic_names=None, topic_partitions=_owned(tid, 0))
        assert (r.error_code, r.member_epoch) == (Errors.NONE, e + 1)
        r2 = _hb(c, group_id=group, member_id="m2", member_epoch=e + 1, rebalance_timeout_ms=-1,
                 subscribed_topic_names=None, topic_partitions=[])
        assert [sorted(tp.partitions) for tp in r2.assignment.topic_partitions] == [[1]]

        # Wrong epochs and unknown members.
        assert _hb(c, group_id=group, member_id="m1", member_epoch=e + 7, topic_partitions=None,
                   subscribed_topic_names=None).error_code == Errors.FENCED_MEMBER_EPOCH
        assert _hb(c, group_id=group, member_id="nobody", member_epoch=e + 1, topic_partitions=None,
                   subscribed_topic_names=None).error_code == Errors.UNKNOWN_MEMBER_ID

        # OffsetCommit v9 carries the member epoch: a stale one is refused.
        OC = API["OffsetCommit"].Request
        T = OC.OffsetCommitRequestTopic

        def commit(epoch, version=9, member="m1", partition=0):
            part = T.OffsetCommitRequestPartition(partition_index=partition, committed_offset=3,
                                                  committed_leader_epoch=-1, committed_metadata="")
            return c.request("OffsetCommit", version, OC(
                group_id=group, generation_id_or_member_epoch=epoch, member_id=member, group_instance_id=None,
                retention_time_ms=-1, topics=[T(name=topic, partitions=[part])]))
        assert commit(e - 1).topics[0].partitions[0].error_code == Errors.STALE_MEMBER_EPOCH
        assert commit(e + 2).topics[0].partitions[0].error_code == Errors.STALE_MEMBER_EPOCH
        # KIP-1251 (Kafka 4.3): an older epoch commits the partitions the member had then.
        assert commit(e).topics[0].partitions[0].error_code == Errors.NONE
        assert commit(e, partition=1).topics[0].partitions[0].error_code == Errors.STALE_MEMBER_EPOCH
        assert commit(e + 1).topics[0].partitions[0].error_code == Errors.NONE
        assert commit(e + 1, version=8).topics[0].partitions[0].error_code == Errors.UNSUPPORTED_VERSION
        # -1 without a member: only an empty group takes it
        assert commit(-1, member="").topics[0].partitions[0].error_code == Errors.UNKNOWN_MEMBER_ID
        # OffsetFetch v9 names the member and its epoch; -1 (an admin client) always reads.
        OF = API["OffsetFetch"].Request

        def fetch(member, epoch):
            g = OF.OffsetFetchRequestGroup(group_id=group, member_id=member, member_epoch=epoch, topics=None)
            return c.request("OffsetFetch", 9, OF(groups=[g], require_stable=False)).groups[0]
        got = fetch("m1", e + 1)
        assert (got.error_code, [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions])
                                 for t in got.topics]) == (Errors.NONE, [(topic, [(0, 3)])])
        assert fetch("m1", e).error_code == Errors.STALE_MEMBER_EPOCH
        assert fetch("nobody", e + 1).error_code == Errors.UNKNOWN_MEMBER_ID
        assert fetch(None, -1).error_code == Errors.NONE

        d = c.request("ConsumerGroupDescribe", 1, API["ConsumerGroupDescribe"].Request(
            group_ids=[group, "no-such-group", ""], include_authorized_operations=True))
        invalid = d.groups[0]               # Kafka answers the invalid ids first, the others in its order
        g, missing = sorted(d.groups[1:], key=lambda x: x.group_id != group)
        assert (invalid.group_id, invalid.error_code) == ("", Errors.INVALID_GROUP_ID)
        assert (missing.error_code, missing.error_message) == (Errors.GROUP_ID_NOT_FOUND,
                                                               "Group no-such-group not found.")
        assert g.authorized_operations == 3400
        assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == \
            (Errors.NONE, "Stable", e + 1, e + 1, "range")
        assert sorted((m.member_id, m.member_epoch, m.member_type, m.subscribed_topic_regex) for m in g.members) == \
            [("m1", e + 1, 1, ""), ("m2", e + 1, 1, "")]
        dg = c.request("DescribeGroups", 5, API["DescribeGroups"].Request(groups=[group]))
        assert (dg.groups[0].error_code, dg.groups[0].group_state) == (Errors.NONE, "Dead")
        dg = c.request("DescribeGroups", 6, API["DescribeGroups"].Request(groups=[group]))
        assert (dg.groups[0].error_code, dg.groups[0].error_message) == \
            (Errors.GROUP_ID_NOT_FOUND, f"Group {group} is not a classic group.")

        # A classic member of another protocol type cannot join a consumer group (Kafka 4.3.1 lets a
        # "consumer" one join, upgrading it: not done here, docs/groups.md).
        JG = API["JoinGroup"].Request
        j = c.request("JoinGroup", 5, JG(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                         member_id="", group_instance_id=None, protocol_type="connect",
                                         protocols=[JG.JoinGroupRequestProtocol(name="range", metadata=b"")]))
        assert (j.error_code, j.member_id) == (Errors.INCONSISTENT_GROUP_PROTOCOL, "")
        hb = c.request("Heartbeat", 4, API["Heartbeat"].Request(group_id=group, generation_id=1, member_id="m1"))
        assert hb.error_code == Errors.UNKNOWN_MEMBER_ID
        dl = c.request("DeleteGroups", 2, API["DeleteGroups"].Request(groups_names=[group]))
        assert dl.results[0].error_code == Errors.NON_EMPTY_GROUP

        # A known member joining again (epoch 0, same id) goes on as it is (measured on 4.3.1).
        r = _hb(c, group_id=group, member_id="m1", subscribed_topic_names=[topic])
        assert (r.error_code, r.member_epoch, [sorted(tp.partitions) for tp in r.assignment.topic_partitions]) == \
            (Errors.NONE, e + 1, [[0]])
        # Leave (epoch -1): the group epoch goes up, m2 reconciles to both partitions.
        r = _hb(c, group_id=group, member_id="m1", member_epoch=-1, topic_partitions=None,
                subscribed_topic_names=None, rebalance_timeout_ms=-1)
        assert (r.error_code, r.member_epoch) == (Errors.NONE, -1)
        r2 = _hb(c, group_id=group, member_id="m2", member_epoch=e + 1, rebalance_timeout_ms=-1,
                 subscribed_topic_names=None, topic_partitions=_owned(tid, 1))
        assert r2.member_epoch == e + 2 and [sorted(tp.partitions) for tp in r2.assignment.topic_partitions] == [[0, 1]]


def test_target_assignment_waits_for_the_assignment_interval(broker):
    """Kafka 4.3.1 (measured): a member joining just after the group's last assignment gets the
    old target (the group reads Assigning); a heartbeat once group.consumer.assignment.interval.ms
    (1 s) has passed gets the new one."""
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 2)
    with RawConnection(broker.bootstrap) as c:
        r1 = _join_assigned(c, group, "d1", topic)
        tid = r1.assignment.topic_partitions[0].topic_id
        r2 = _hb(c, group_id=group, member_id="d2", subscribed_topic_names=[topic])
        assert (r2.member_epoch, r2.assignment.topic_partitions) == (r1.member_epoch, [])
        d = c.request("ConsumerGroupDescribe", 0, API["ConsumerGroupDescribe"].Request(group_ids=[group]))
        assert (d.groups[0].group_state, d.groups[0].group_epoch, d.groups[0].assignment_epoch) == \
            ("Assigning", r1.member_epoch + 1, r1.member_epoch)
        deadline = time.monotonic() + 5
        r = None
        while time.monotonic() < deadline:
            r = _hb(c, group_id=group, member_id="d1", member_epoch=r1.member_epoch, rebalance_timeout_ms=-1,
                    subscribed_topic_names=None, topic_partitions=_owned(tid, 0, 1))
            if r.assignment is not None:
                break
            time.sleep(0.2)
        assert r.assignment is not None and len(r.assignment.topic_partitions[0].partitions) == 1


def test_consumer_group_survives_a_restart(broker_factory):
    """The group's records in __consumer_offsets are replayed: after a restart the members go on
    with their epochs and assignments, and the group epoch keeps counting."""
    broker = broker_factory({"group.consumer.assignment.interval.ms": "0"})
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 2)
    with RawConnection(broker.bootstrap) as c:
        r1 = _join_assigned(c, group, "m1", topic, instance_id="i1")
        tid, e = r1.assignment.topic_partitions[0].topic_id, r1.member_epoch
        r2 = _hb(c, group_id=group, member_id="m2", subscribed_topic_names=[topic])
        r1 = _hb(c, group_id=group, member_id="m1", instance_id="i1", member_epoch=e, rebalance_timeout_ms=-1,
                 subscribed_topic_names=None, topic_partitions=_owned(tid, 0, 1))
        kept = sorted(r1.assignment.topic_partitions[0].partitions)
        r1 = _hb(c, group_id=group, member_id="m1", instance_id="i1", member_epoch=e, rebalance_timeout_ms=-1,
                 subscribed_topic_names=None, topic_partitions=_owned(tid, *kept))
        r2 = _hb(c, group_id=group, member_id="m2", member_epoch=r2.member_epoch, rebalance_timeout_ms=-1,
                 subscribed_topic_names=None, topic_partitions=[])
        assert (r1.member_epoch, r2.member_epoch) == (e + 1, e + 1) and r2.assignment is not None
    before = _describe(broker.bootstrap, group)
    broker.restart()
    after = _describe(broker.bootstrap, group)
    with RawConnection(broker.bootstrap) as c:
        assert after.error_code == Errors.NONE
        assert (after.group_state, after.group_epoch, after.assignment_epoch) == \
            (before.group_state, before.group_epoch, before.assignment_epoch) == ("Stable", e + 1, e + 1)
        assert sorted((m.member_id, m.instance_id, m.member_epoch, str(m.assignment), str(m.target_assignment))
                      for m in after.members) == \
            sorted((m.member_id, m.instance_id, m.member_epoch, str(m.assignment), str(m.target_assignment))
                   for m in before.members)
        # m1 goes on where it was; m2 leaves and m1 gets both partitions at the next epoch.
        r1 = _hb(c, group_id=group, member_id="m1", instance_id="i1", member_epoch=e + 1, rebalance_timeout_ms=-1,
                 subscribed_topic_names=None, topic_partitions=_owned(tid, *kept))
        assert (r1.error_code, r1.member_epoch) == (Errors.NONE, e + 1)
        assert _hb(c, group_id=group, member_id="m2", member_epoch=-1, topic_partitions=None,
                   subscribed_topic_names=None, rebalance_timeout_ms=-1).error_code == Errors.NONE
    broker.restart()
    with RawConnection(broker.bootstrap) as c:
        r1 = _hb(c, group_id=group, member_id="m1", instance_id="i1", member_epoch=e + 1, rebalance_timeout_ms=-1,
                 subscribed_topic_names=None, topic_partitions=_owned(tid, *kept))
        assert (r1.error_code, r1.member_epoch) == (Errors.NONE, e + 2)
        assert [sorted(tp.partitions) for tp in r1.assignment.topic_partitions] == [[0, 1]]
        # m2 is gone for good: its tombstones were replayed
        assert _hb(c, group_id=group, member_id="m2", member_epoch=e + 1, topic_partitions=None,
                   subscribed_topic_names=None).error_code == Errors.UNKNOWN_MEMBER_ID


def _owned_by_client(d) -> dict[str, list[int]]:
    return {m.client_id: sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions) for m in d.members}


def test_java_consumers_share_then_one_takes_all_and_offsets_resume(broker):
    """kafka-clients 4.4 (the project's Java driver) with group.protocol=consumer: the same steps as
    the librdkafka test, the group checked through ConsumerGroupDescribe."""
    from conformance.clients import CLIENTS, ClientProcess
    ok, why = CLIENTS["java"].availability()
    if not ok:
        pytest.skip(f"java driver: {why}")
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 4)
    produce(broker.bootstrap, topic, per_partition=5, partitions=4)
    procs = {}

    def consumer(name):
        p = procs[name] = ClientProcess("java", label=name).start()
        config = {"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                  "client.id": name, "auto.offset.reset": "earliest", "enable.auto.commit": "false"}
        assert p.call("create_consumer", config=config).ok
        assert p.call("subscribe", topics=[topic]).ok
        return p

    def poll_until(names, predicate, rounds=60):
        """Poll each consumer (500 ms at most each) until ``predicate(describe)``; bounded by rounds."""
        got = {n: [] for n in names}
        for _ in range(rounds):
            for n in names:
                out = procs[n].call("poll", timeout_ms=500, deadline_ms=10_000)
                assert out.ok, out.error
                got[n] += [(r["partition"], r["offset"]) for r in out.data["records"]]
            d = _describe(broker.bootstrap, group)
            if predicate(d):
                return d, got
        raise AssertionError(f"not reached within {rounds} rounds: {_describe(broker.bootstrap, group)}")

    try:
        consumer("c1")
        consumer("c2")
        d, _ = poll_until(["c1", "c2"], lambda d: d.group_state == "Stable"
                          and sorted(map(len, _owned_by_client(d).values())) == [2, 2])
        owned = _owned_by_client(d)
        assert sorted(owned) == ["c1", "c2"] and sorted(owned["c1"] + owned["c2"]) == [0, 1, 2, 3]
        for n in ("c1", "c2"):
            out = procs[n].call("commit", offsets=[{"topic": topic, "partition": q, "offset": 2} for q in owned[n]])
            assert out.ok, out.error
        assert procs["c2"].call("close", deadline_ms=30_000).ok
        d, _ = poll_until(["c1"], lambda d: _owned_by_client(d) == {"c1": [0, 1, 2, 3]})
        assert d.group_state == "Stable"
        assert procs["c1"].call("close", deadline_ms=30_000).ok
        assert _describe(broker.bootstrap, group).group_state == "Empty"
        consumer("c3")
        _, got = poll_until(["c3"], lambda d: True, rounds=1)
        deadline = time.monotonic() + 60
        while len({p for p, _o in got["c3"]}) < 4 and time.monotonic() < deadline:
            out = procs["c3"].call("poll", timeout_ms=500, deadline_ms=10_000)
            assert out.ok, out.error
            got["c3"] += [(r["partition"], r["offset"]) for r in out.data["records"]]
        first = {}
        for p, o in got["c3"]:
            first.setdefault(p, o)
        assert first == {0: 2, 1: 2, 2: 2, 3: 2}
    finally:
        for p in procs.values():
            p.kill()


def test_txn_offset_commit_checks_the_member_epoch(broker):
    """TxnOffsetCommit v3-v5 to a consumer group (measured on Kafka 4.3.1, same answers): the
    current member epoch commits; an older or newer one reads ILLEGAL_GENERATION (no KIP-1251
    relaxation here, unlike OffsetCommit), an unknown member UNKNOWN_MEMBER_ID; without member
    fields (v2, or -1 and "") nothing is checked."""
    topic, group, tid = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}", f"tx-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 2)
    with RawConnection(broker.bootstrap) as c:
        e = _join_assigned(c, group, "m1", topic).member_epoch
        init = API["InitProducerId"].Request(transactional_id=tid, transaction_timeout_ms=60000,
                                             producer_id=-1, producer_epoch=-1)
        ip = c.request("InitProducerId", 4, init)
        for _ in range(50):      # bounded: the transaction coordinator may still be loading
            if ip.error_code == Errors.NONE:
                break
            time.sleep(0.2)
            ip = c.request("InitProducerId", 4, init)
        assert ip.error_code == Errors.NONE
        ao = c.request("AddOffsetsToTxn", 3, API["AddOffsetsToTxn"].Request(
            transactional_id=tid, producer_id=ip.producer_id, producer_epoch=ip.producer_epoch, group_id=group))
        assert ao.error_code == Errors.NONE
        TR = API["TxnOffsetCommit"].Request
        T = TR.TxnOffsetCommitRequestTopic

        def commit(version, epoch, member):
            part = T.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                                                     committed_metadata="")
            return c.request("TxnOffsetCommit", version, TR(
                transactional_id=tid, group_id=group, producer_id=ip.producer_id, producer_epoch=ip.producer_epoch,
                generation_id=epoch, member_id=member, group_instance_id=None,
                topics=[T(name=topic, partitions=[part])])).topics[0].partitions[0].error_code
        for v in (3, 4, 5):
            assert [commit(v, ep, m) for ep, m in ((e - 1, "m1"), (e + 1, "m1"), (e, "nobody"), (-1, ""),
                                                   (-1, "m1"), (e, "m1"))] == \
                [Errors.ILLEGAL_GENERATION, Errors.ILLEGAL_GENERATION, Errors.UNKNOWN_MEMBER_ID, Errors.NONE,
                 Errors.ILLEGAL_GENERATION, Errors.NONE], v
        assert commit(2, -1, "") == Errors.NONE
        et = c.request("EndTxn", 3, API["EndTxn"].Request(transactional_id=tid, producer_id=ip.producer_id,
                                                          producer_epoch=ip.producer_epoch, committed=False))
        assert et.error_code == Errors.NONE


def test_session_and_rebalance_timeouts_fence_members(broker_factory):
    """A member that stops heartbeating is fenced after group.consumer.session.timeout.ms; one that
    does not revoke within its rebalance timeout is fenced too (UNKNOWN_MEMBER_ID afterwards), and
    the other member gets its partitions."""
    broker = broker_factory({"group.consumer.assignment.interval.ms": "0",
                             "group.consumer.session.timeout.ms": "1500",
                             "group.consumer.heartbeat.interval.ms": "500"})
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 2)

    def heartbeat_until(c, member, epoch, owned, want, limit_s=10.0):
        """Heartbeat (with the latest epoch answered) until ``want(answer)``; bounded by limit_s."""
        deadline = time.monotonic() + limit_s
        while True:
            r = _hb(c, group_id=group, member_id=member, member_epoch=epoch, rebalance_timeout_ms=-1,
                    subscribed_topic_names=None, topic_partitions=owned)
            if want(r) or time.monotonic() >= deadline:
                return r
            epoch = r.member_epoch if r.error_code == Errors.NONE else epoch
            time.sleep(0.2)

    with RawConnection(broker.bootstrap) as c:
        r1 = _join_assigned(c, group, "m1", topic)
        tid, e = r1.assignment.topic_partitions[0].topic_id, r1.member_epoch
        # m2 joins and then goes silent: m1 is told to give one partition up, does, and once
        # m2's session expires gets it back at a new epoch.
        r2 = _hb(c, group_id=group, member_id="m2", subscribed_topic_names=[topic])
        r1 = _hb(c, group_id=group, member_id="m1", member_epoch=e, rebalance_timeout_ms=-1,
                 subscribed_topic_names=None, topic_partitions=_owned(tid, 0, 1))
        kept = sorted(r1.assignment.topic_partitions[0].partitions)
        assert len(kept) == 1
        r1 = heartbeat_until(c, "m1", e, _owned(tid, *kept), lambda r: r.assignment is not None
                             and len(r.assignment.topic_partitions[0].partitions) == 2)
        assert r1.error_code == Errors.NONE and r1.member_epoch > e + 1, r1
        assert sorted(r1.assignment.topic_partitions[0].partitions) == [0, 1]
        assert _hb(c, group_id=group, member_id="m2", member_epoch=r2.member_epoch, topic_partitions=None,
                   subscribed_topic_names=None).error_code == Errors.UNKNOWN_MEMBER_ID
        # m3 joins; m1, its rebalance timeout now 1 s, is told to revoke one partition and never
        # does: it is fenced, and m3 ends up with both partitions.
        e1 = r1.member_epoch
        r3 = _hb(c, group_id=group, member_id="m3", subscribed_topic_names=[topic])
        r1 = _hb(c, group_id=group, member_id="m1", member_epoch=e1, rebalance_timeout_ms=1000,
                 subscribed_topic_names=None, topic_partitions=_owned(tid, 0, 1))
        assert r1.member_epoch == e1 and len(r1.assignment.topic_partitions[0].partitions) == 1
        r1 = heartbeat_until(c, "m1", e1, _owned(tid, 0, 1), lambda r: r.error_code != Errors.NONE)
        assert r1.error_code == Errors.UNKNOWN_MEMBER_ID
        r3 = heartbeat_until(c, "m3", r3.member_epoch, [], lambda r: r.error_code != Errors.NONE or (
            r.assignment is not None and sum(len(tp.partitions) for tp in r.assignment.topic_partitions) == 2))
        assert r3.error_code == Errors.NONE


def test_regex_subscription_takes_the_matching_topics(broker):
    """v1's SubscribedTopicRegex: the member is assigned the partitions of every topic the regex
    matches (in full), including one created later; other topics are not."""
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, f"{prefix}-a", 1)
    create_topic(broker.bootstrap, f"{prefix}-b", 2)
    create_topic(broker.bootstrap, f"x{prefix}-c", 1)

    def partitions(r):
        return sum(len(tp.partitions) for tp in r.assignment.topic_partitions) if r.assignment else None

    with RawConnection(broker.bootstrap) as c:
        r = _hb(c, group_id=group, member_id="m1", subscribed_topic_names=[], subscribed_topic_regex=f"{prefix}-.*")
        deadline = time.monotonic() + 20
        while r.error_code == Errors.NONE and partitions(r) != 3 and time.monotonic() < deadline:
            time.sleep(0.3)       # Kafka resolves a regex in the background
            r = _hb(c, group_id=group, member_id="m1", member_epoch=r.member_epoch, subscribed_topic_names=[],
                    subscribed_topic_regex=None)
        assert (r.error_code, partitions(r)) == (Errors.NONE, 3)
        create_topic(broker.bootstrap, f"{prefix}-d", 1)
        deadline = time.monotonic() + 30
        while r.error_code == Errors.NONE and partitions(r) != 4 and time.monotonic() < deadline:
            time.sleep(0.3)
            r = _hb(c, group_id=group, member_id="m1", member_epoch=r.member_epoch, subscribed_topic_names=[],
                    subscribed_topic_regex=None)
        assert (r.error_code, partitions(r)) == (Errors.NONE, 4)
        d = _describe(broker.bootstrap, group)
        assert d.members[0].subscribed_topic_regex == f"{prefix}-.*"


def test_static_member_leaves_for_now_and_its_instance_comes_back(broker):
    """Static membership (measured on Kafka 4.3.1, same answers): while the instance's member has
    not left, no member may join with its instance id (UNRELEASED_INSTANCE_ID, even its own);
    after a temporary leave (epoch -2) the instance's next member takes the assignment over and
    the old member is fenced (FENCED_INSTANCE_ID)."""
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 2)
    with RawConnection(broker.bootstrap) as c:
        r = _join_assigned(c, group, "s1", topic, instance_id="i1")
        e = r.member_epoch
        for member in ("s2", "s1"):
            r2 = _hb(c, group_id=group, member_id=member, instance_id="i1", subscribed_topic_names=[topic])
            assert (r2.error_code, r2.error_message) == (
                Errors.UNRELEASED_INSTANCE_ID, f"Static member {member} with instance id i1 cannot join the group "
                "because the instance id is owned by s1 member.")
        r = _hb(c, group_id=group, member_id="s1", instance_id="i1", member_epoch=-2, subscribed_topic_names=None,
                topic_partitions=None, rebalance_timeout_ms=-1)
        assert (r.error_code, r.member_id, r.member_epoch) == (Errors.NONE, "s1", -2)
        r = _hb(c, group_id=group, member_id="s2", instance_id="i1", subscribed_topic_names=[topic])
        assert (r.error_code, r.member_id, r.member_epoch) == (Errors.NONE, "s2", e)
        assert [sorted(tp.partitions) for tp in r.assignment.topic_partitions] == [[0, 1]]
        r = _hb(c, group_id=group, member_id="s1", instance_id="i1", member_epoch=e, subscribed_topic_names=None,
                topic_partitions=None, rebalance_timeout_ms=-1)
        assert (r.error_code, r.error_message) == (Errors.FENCED_INSTANCE_ID,
                                                   "Static member s1 with instance id i1 was fenced by member s2.")
        assert [m.member_id for m in _describe(broker.bootstrap, group).members] == ["s2"]


def test_kip848_consumer_needs_read_on_the_group_with_acls(broker_factory):
    """With ACLs on (test_acls' secured broker): a group.protocol=consumer member without READ on
    the group reads GROUP_AUTHORIZATION_FAILED; with it (and READ on the topic) it consumes.
    Embedded broker only: KafkaApis' checks, not measured on Kafka here."""
    from confluent_kafka.admin import AclOperation, AdminClient, ResourceType

    from .test_acls import SECURED, _acl, _conf, _grant
    b = broker_factory(SECURED)
    admin = AdminClient(_conf(b, "admin"))
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    p = Producer(_conf(b, "admin"))
    for i in range(3):
        p.produce(topic, value=b"v%d" % i)
    assert p.flush(20) == 0
    _grant(admin, _acl(ResourceType.TOPIC, topic, "bob", AclOperation.READ))

    def consume(limit_s: float = 20):
        got, errors = [], []
        c = Consumer(_conf(b, "bob", **{"group.id": group, "group.protocol": "consumer",
                                       "auto.offset.reset": "earliest", "enable.auto.commit": False}))
        c.subscribe([topic])
        deadline = time.monotonic() + limit_s
        try:
            while len(got) < 3 and not errors and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None:
                    (errors if m.error() else got).append(m.error() or m.value())
        finally:
            c.close()
        return got, [e.code() for e in errors]

    assert consume() == ([], [KafkaError.GROUP_AUTHORIZATION_FAILED])
    _grant(admin, _acl(ResourceType.GROUP, group, "bob", AclOperation.READ))
    assert consume() == ([b"v0", b"v1", b"v2"], [])
