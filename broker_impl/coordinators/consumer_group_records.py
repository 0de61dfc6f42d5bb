"""KIP-848 consumer group records of ``__consumer_offsets`` (Kafka's ConsumerGroup* records).

Key versions (an int16 prefix, as for every record of the topic) and what their value holds:

==== ============================================== =========================================
  3  ConsumerGroupMetadata (group)                   the group epoch
  5  ConsumerGroupMemberMetadata (group, member)     subscription, instance, rack, client, ...
  6  ConsumerGroupTargetAssignmentMetadata (group)   the target assignment's epoch
  7  ConsumerGroupTargetAssignmentMember (g, m)      the member's target assignment
  8  ConsumerGroupCurrentMemberAssignment (g, m)     epochs, state, assigned and pending revocation
==== ============================================== =========================================

(Version 4, the subscribed topics' metadata, is not written: it is recomputed from the topics.)
A tombstone deletes a key. The coordinator writes, after each change of a group, the records
whose value changed and tombstones for the keys gone (:func:`group_snapshot` and the diff in
the manager), and rebuilds the groups from the last value of every key at load
(:func:`groups_from_records`), as Kafka replays them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..protocol.messages import DATA
from .consumer_group import ConsumerGroup, ConsumerGroupMember, MemberState

GROUP_METADATA = 3
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
GROUP_KEYS = (GROUP_METADATA, TARGET_ASSIGNMENT_METADATA)
MEMBER_KEYS = (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT)

_I16 = struct.Struct(">h")
GroupKey = DATA["ConsumerGroupKey"]
MemberKey = DATA["ConsumerGroupMemberKey"]
VALUES = {
    GROUP_METADATA: DATA["ConsumerGroupMetadataValue"],
    MEMBER_METADATA: DATA["ConsumerGroupMemberMetadataValue"],
    TARGET_ASSIGNMENT_METADATA: DATA["ConsumerGroupTargetAssignmentMetadataValue"],
    TARGET_ASSIGNMENT_MEMBER: DATA["ConsumerGroupTargetAssignmentMemberValue"],
    CURRENT_MEMBER_ASSIGNMENT: DATA["ConsumerGroupCurrentMemberAssignmentValue"],
}
#: Kafka's MemberState bytes.
STATE_BYTES = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1, MemberState.UNRELEASED_PARTITIONS: 2}
_STATES = {b: s for s, b in STATE_BYTES.items()}


@dataclass(slots=True)
class ConsumerGroupRecord:
    group: str
    key_version: int
    member_id: str | None
    key: bytes
    value: object | None        # the decoded value, None: tombstone


def key(version: int, group_id: str, member_id: str | None = None) -> bytes:
    if member_id is None:
        return _I16.pack(version) + GroupKey.encode(0, GroupKey.cls(group_id=group_id))
    return _I16.pack(version) + MemberKey.encode(0, MemberKey.cls(group_id=group_id, member_id=member_id))


def _value(version: int, **fields) -> bytes:
    codec = VALUES[version]
    return _I16.pack(0) + codec.encode(0, codec.cls(**fields))


def _partitions(cls, a) -> list:
    return [cls(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(a.items()) if ps]


def group_snapshot(group: ConsumerGroup) -> dict[bytes, bytes]:
    """Every record describing ``group`` now, by key."""
    gid = group.group_id
    out = {key(GROUP_METADATA, gid): _value(GROUP_METADATA, epoch=group.group_epoch),
           key(TARGET_ASSIGNMENT_METADATA, gid): _value(TARGET_ASSIGNMENT_METADATA,
                                                        assignment_epoch=group.assignment_epoch)}
    target_tp = VALUES[TARGET_ASSIGNMENT_MEMBER].cls.TopicPartition
    current_tp = VALUES[CURRENT_MEMBER_ASSIGNMENT].cls.TopicPartitions
    for mid, m in group.members.items():
        out[key(MEMBER_METADATA, gid, mid)] = _value(
            MEMBER_METADATA, instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
            client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
            subscribed_topic_regex=m.subscribed_topic_regex, rebalance_timeout_ms=m.rebalance_timeout_ms,
            server_assignor=m.server_assignor)
        out[key(CURRENT_MEMBER_ASSIGNMENT, gid, mid)] = _value(
            CURRENT_MEMBER_ASSIGNMENT, member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
            state=STATE_BYTES[m.state], assigned_partitions=_partitions(current_tp, m.assigned),
            partitions_pending_revocation=_partitions(current_tp, m.pending_revocation))
    for mid, a in group.target.items():
        out[key(TARGET_ASSIGNMENT_MEMBER, gid, mid)] = _value(
            TARGET_ASSIGNMENT_MEMBER, topic_partitions=_partitions(target_tp, a))
    return out


def decode(key_version: int, kbody, value) -> ConsumerGroupRecord:
    """One record of key version 3, 5, 6, 7 or 8 (``kbody``: the key after its version)."""
    if key_version in GROUP_KEYS:
        k, _ = GroupKey.decode(0, kbody)
        member_id = None
    else:
        k, _ = MemberKey.decode(0, kbody)
        member_id = k.member_id
    raw = _I16.pack(key_version) + bytes(kbody)
    if value is None:
        return ConsumerGroupRecord(k.group_id, key_version, member_id, raw, None)
    v, _ = VALUES[key_version].decode(0, memoryview(value)[2:])
    return ConsumerGroupRecord(k.group_id, key_version, member_id, raw, v)


def _assignment(tps) -> dict[bytes, set[int]]:
    return {bytes(tp.topic_id): set(tp.partitions or ()) for tp in tps or () if tp.partitions}


def groups_from_records(records: dict[str, dict[bytes, ConsumerGroupRecord]]) -> dict[str, ConsumerGroup]:
    """The groups the last value of every key describes (tombstoned keys are gone already);
    a group without its metadata record is dropped, as are members without both their metadata
    and current assignment. Each group remembers its records (``persisted``), so that the next
    change writes only the difference."""
    out = {}
    for gid, by_key in records.items():
        parts = list(by_key.values())
        meta = [r for r in parts if r.key_version == GROUP_METADATA]
        if not meta:
            continue
        g = ConsumerGroup(gid)
        g.group_epoch = meta[0].value.epoch
        members: dict[str, dict[int, object]] = {}
        for r in parts:
            if r.key_version == TARGET_ASSIGNMENT_METADATA:
                g.assignment_epoch = r.value.assignment_epoch
            elif r.member_id is not None:
                members.setdefault(r.member_id, {})[r.key_version] = r.value
        for mid, vs in members.items():
            target = vs.get(TARGET_ASSIGNMENT_MEMBER)
            if target is not None:
                g.target[mid] = _assignment(target.topic_partitions)
            md, cur = vs.get(MEMBER_METADATA), vs.get(CURRENT_MEMBER_ASSIGNMENT)
            if md is None or cur is None:
                continue
            m = ConsumerGroupMember(
                mid, instance_id=md.instance_id, rack_id=md.rack_id, rebalance_timeout_ms=md.rebalance_timeout_ms,
                client_id=md.client_id, client_host=md.client_host,
                subscribed_topic_names=list(md.subscribed_topic_names or ()),
                subscribed_topic_regex=md.subscribed_topic_regex, server_assignor=md.server_assignor,
                state=_STATES.get(cur.state, MemberState.STABLE), member_epoch=cur.member_epoch,
                previous_member_epoch=cur.previous_member_epoch, assigned=_assignment(cur.assigned_partitions),
                pending_revocation=_assignment(cur.partitions_pending_revocation))
            # KIP-1251's assignment epochs are not written (Kafka 4.3 adds them to record 8):
            # after a load every partition counts as assigned at the member's epoch.
            m.assignment_epochs = {(t, p): m.member_epoch for t, ps in m.assigned.items() for p in ps}
            g.update_member(None, m)
        g.target = {mid: a for mid, a in g.target.items() if mid in g.members}
        g.persisted = group_snapshot(g)
        out[gid] = g
    return out
