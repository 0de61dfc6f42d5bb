"""Records of ``__consumer_offsets``: keys, values and which partition holds a group.

The layouts are Kafka's (``broker_impl/protocol/schemas/OffsetCommit*.json`` and
``GroupMetadata*.json``): every key and value starts with an int16 version. Key
versions 0 and 1 are offset commits, key version 2 is group metadata, key versions 3
and 5-8 are KIP-848 consumer group records (:mod:`.consumer_group_records`); a null
value is a tombstone. Using Kafka's exact bytes means a real Kafka tool reading
the embedded broker's ``__consumer_offsets`` (or a test comparing both) sees the
same records.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..protocol.messages import DATA
from . import consumer_group_records
from .consumer_group_records import ConsumerGroupRecord
from .group_metadata import ClassicGroup, ClassicGroupMember, GroupState

OFFSET_COMMIT_KEY_VERSION = 1      # what Kafka writes (0 is read too)
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3    # without an explicit expire timestamp
OFFSET_COMMIT_VALUE_VERSION_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")

OffsetCommitKey = DATA["OffsetCommitKey"]
OffsetCommitValue = DATA["OffsetCommitValue"]
GroupMetadataKey = DATA["GroupMetadataKey"]
GroupMetadataValue = DATA["GroupMetadataValue"]
MemberMetadata = GroupMetadataValue.cls.MemberMetadata


@dataclass(slots=True)
class OffsetAndMetadata:
    """One committed offset, as Kafka's ``OffsetAndMetadata`` in the coordinator."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int | None = None   # only for OffsetCommit v2-v4 with a RetentionTimeMs


# -- encoding --------------------------------------------------------------------------------

def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return _I16.pack(OFFSET_COMMIT_KEY_VERSION) + OffsetCommitKey.encode(
        0, OffsetCommitKey.cls(group=group, topic=topic, partition=partition))


def offset_commit_value(om: OffsetAndMetadata) -> bytes:
    if om.expire_timestamp is not None:
        version = OFFSET_COMMIT_VALUE_VERSION_EXPIRE
        expire = om.expire_timestamp
    else:
        version, expire = OFFSET_COMMIT_VALUE_VERSION, -1
    value = OffsetCommitValue.cls(offset=om.offset, leader_epoch=om.leader_epoch,
                                  metadata=om.metadata or "", commit_timestamp=om.commit_timestamp,
                                  expire_timestamp=expire)
    return _I16.pack(version) + OffsetCommitValue.encode(version, value)


def group_metadata_key(group: str) -> bytes:
    return _I16.pack(GROUP_METADATA_KEY_VERSION) + GroupMetadataKey.encode(0, GroupMetadataKey.cls(group=group))


def group_metadata_value(value) -> bytes:
    """``value`` is a ``GroupMetadataValue`` object (see :func:`new_group_metadata_value`)."""
    return _I16.pack(GROUP_METADATA_VALUE_VERSION) + GroupMetadataValue.encode(GROUP_METADATA_VALUE_VERSION, value)


def new_group_metadata_value(*, protocol_type: str, generation: int, protocol: str | None,
                             leader: str | None, current_state_timestamp: int, members: list):
    return GroupMetadataValue.cls(protocol_type=protocol_type, generation=generation, protocol=protocol,
                                  leader=leader, current_state_timestamp=current_state_timestamp,
                                  members=members)


def classic_group_value(group: ClassicGroup, assignment: dict[str, bytes]):
    """The ``GroupMetadataValue`` of ``group`` with ``assignment`` (member id -> bytes), as
    Kafka's ``GroupCoordinatorRecordHelpers.newGroupMetadataRecord`` builds it."""
    members = [MemberMetadata(
        member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id or "",
        client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
        session_timeout=m.session_timeout_ms, subscription=m.metadata(group.protocol_name),
        assignment=assignment.get(m.member_id, b"")) for m in group.members.values()]
    return new_group_metadata_value(
        protocol_type=group.protocol_type or "", generation=group.generation_id,
        protocol=group.protocol_name, leader=group.leader_id if members else None,
        current_state_timestamp=group.state_timestamp if group.state_timestamp is not None else -1,
        members=members)


def classic_group_from_value(group_id: str, v) -> ClassicGroup:
    """The group a ``GroupMetadataValue`` describes (Kafka's ``ClassicGroup.fromRecord``): with
    members it is Stable in its last generation with its last assignment, else Empty."""
    members = v.members or []
    g = ClassicGroup(group_id, GroupState.STABLE if members else GroupState.EMPTY)
    g.generation_id = v.generation
    g.protocol_type = v.protocol_type or None
    g.protocol_name = v.protocol
    g.leader_id = v.leader
    if v.current_state_timestamp >= 0:
        g.state_timestamp = v.current_state_timestamp
    for mm in members:
        g.add(ClassicGroupMember(mm.member_id, mm.group_instance_id, mm.client_id, mm.client_host,
                                 mm.rebalance_timeout if mm.rebalance_timeout > 0 else mm.session_timeout,
                                 mm.session_timeout, v.protocol_type, [(v.protocol or "", bytes(mm.subscription))],
                                 bytes(mm.assignment)))
    if members:
        g.subscribed_topics = g.compute_subscribed_topics()
    if g.leader_id not in g.members:
        g.leader_id = next(iter(g.members), None)
    return g


# -- decoding --------------------------------------------------------------------------------

@dataclass(slots=True)
class OffsetRecord:
    group: str
    topic: str
    partition: int
    value: OffsetAndMetadata | None      # None: tombstone


@dataclass(slots=True)
class GroupRecord:
    group: str
    value: object | None                 # GroupMetadataValue, None: tombstone


class UnknownRecord(Exception):
    """A key version this coordinator does not read (e.g. share or streams group records)."""


def _version_and_body(data) -> tuple[int, memoryview]:
    mv = memoryview(data)
    if len(mv) < 2:
        raise ValueError("record shorter than its version prefix")
    return _I16.unpack_from(mv, 0)[0], mv[2:]


def decode_record(key, value) -> OffsetRecord | GroupRecord | ConsumerGroupRecord:
    """Parse one ``__consumer_offsets`` record; raises :class:`UnknownRecord` for other types."""
    kv, kbody = _version_and_body(key)
    if kv in (0, 1):
        k, _ = OffsetCommitKey.decode(0, kbody)
        if value is None:
            return OffsetRecord(k.group, k.topic, k.partition, None)
        vv, vbody = _version_and_body(value)
        v, _ = OffsetCommitValue.decode(min(vv, OffsetCommitValue.spec.valid.hi), vbody)
        expire = v.expire_timestamp if vv == 1 and v.expire_timestamp >= 0 else None
        return OffsetRecord(k.group, k.topic, k.partition,
                            OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata or "", v.commit_timestamp, expire))
    if kv == GROUP_METADATA_KEY_VERSION:
        k, _ = GroupMetadataKey.decode(0, kbody)
        if value is None:
            return GroupRecord(k.group, None)
        vv, vbody = _version_and_body(value)
        v, _ = GroupMetadataValue.decode(min(vv, GroupMetadataValue.spec.valid.hi), vbody)
        return GroupRecord(k.group, v)
    if kv in consumer_group_records.GROUP_KEYS + consumer_group_records.MEMBER_KEYS:
        return consumer_group_records.decode(kv, kbody, value)
    raise UnknownRecord(f"__consumer_offsets key version {kv}")
