"""A KIP-848 consumer group and its members (Kafka's ``ConsumerGroup``,
``ConsumerGroupMember`` and ``CurrentAssignmentBuilder``).

Three epochs drive the protocol:

- the **group epoch** goes up whenever what the assignment depends on changes (a member
  joins, leaves or changes its subscription; a subscribed topic gains partitions...);
- the **target assignment epoch** is the group epoch the target assignment (the assignor's
  output, what every member should own) was computed for;
- each **member epoch** says which target assignment the member has reconciled to.

A member moves to a new target in steps (:meth:`ConsumerGroupMember.reconcile`): it first
gives up the partitions it must lose (*pending revocation*, state UNREVOKED_PARTITIONS, its
epoch unchanged), then takes the new target epoch with every partition that is free; a
partition another member still owns is *unreleased* and handed over once that member has
revoked it (state UNRELEASED_PARTITIONS). The group tracks, per partition, the epoch of the
member that owns it (``partition_epochs``), which is how "free" is decided.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ..protocol.errors import Errors, KafkaError
from .assignors import Assignment


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


class ConsumerGroupState(enum.Enum):
    """``.value`` is what ConsumerGroupDescribe / ListGroups report."""
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


#: Member epochs with a meaning of their own in ConsumerGroupHeartbeat.
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


def copy_assignment(a: Assignment) -> Assignment:
    return {t: set(ps) for t, ps in a.items() if ps}


def _owns_any(owned: list[tuple[bytes, list[int]]] | None, partitions: Assignment) -> bool:
    """Kafka's ``ownsRevokedPartitions``: does the member still report one of ``partitions``
    (an omitted owned list counts as yes)?"""
    if owned is None:
        return True
    return any(p in partitions.get(t, ()) for t, ps in owned for p in ps)


@dataclass
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    state: MemberState = MemberState.STABLE
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    #: KIP-1251 (Kafka 4.3): the member epoch at which each partition it owns was assigned to it.
    assignment_epochs: dict[tuple[bytes, int], int] = field(default_factory=dict)

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    def _set_epoch(self, epoch: int) -> None:
        self.previous_member_epoch = self.member_epoch
        self.member_epoch = epoch

    def reconcile(self, target_epoch: int, target: Assignment, partition_epoch,
                  owned: list[tuple[bytes, list[int]]] | None) -> None:
        """One reconciliation step towards ``target`` (Kafka's ``CurrentAssignmentBuilder.build``);
        ``partition_epoch(topic_id, partition)`` is the owner's epoch or -1 when free."""
        if self.state is MemberState.STABLE:
            if self.member_epoch != target_epoch:
                self._next(self.member_epoch, target_epoch, target, partition_epoch, owned)
        elif self.state is MemberState.UNREVOKED_PARTITIONS:
            if not _owns_any(owned, self.pending_revocation):
                self._next(self.member_epoch + 1, target_epoch, target, partition_epoch, owned)
        else:   # UNRELEASED_PARTITIONS
            self._next(self.member_epoch, target_epoch, target, partition_epoch, owned)

    def _next(self, epoch: int, target_epoch: int, target: Assignment, partition_epoch, owned) -> None:
        assigned: Assignment = {}
        revoke: Assignment = {}
        to_assign: Assignment = {}
        unreleased = False
        for t in set(target) | set(self.assigned):
            want = target.get(t, set())
            have = self.assigned.get(t, set())
            keep = have & want
            gone = have - keep
            new = {p for p in want - keep if partition_epoch(t, p) == -1}
            unreleased = unreleased or len(new) < len(want - keep)
            if keep:
                assigned[t] = keep
            if gone:
                revoke[t] = gone
            if new:
                to_assign[t] = new
        if revoke and _owns_any(owned, revoke):
            self.state = MemberState.UNREVOKED_PARTITIONS
            self._set_epoch(epoch)
            self.assigned, self.pending_revocation = assigned, revoke
            return
        for t, ps in to_assign.items():
            assigned.setdefault(t, set()).update(ps)
        self.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        self._set_epoch(target_epoch)
        self.assigned, self.pending_revocation = assigned, {}
        self.assignment_epochs = {(t, p): self.assignment_epochs.get((t, p), target_epoch)
                                  for t, ps in assigned.items() for p in ps}


class ConsumerGroup:
    """A consumer group: its members, epochs, target assignment and partition owners."""

    def __init__(self, group_id: str):
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}          # instance id -> member id
        self.target: dict[str, Assignment] = {}           # member id -> target assignment
        self.partition_epochs: dict[tuple[bytes, int], int] = {}
        #: The topics the assignment was computed from: name -> (topic id, partitions).
        self.subscription_metadata: dict[str, tuple[bytes, int]] = {}
        #: When the target assignment was last computed (trio clock), None: never.
        self.last_assignment_s: float | None = None
        #: The records last written for the group, by key (consumer_group_records).
        self.persisted: dict[bytes, bytes] = {}
        self.dead = False

    # ------------------------------------------------------------------ what the other APIs read
    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def subscribed_topic_names(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def is_subscribed_to(self, topic: str) -> bool:
        return topic in self.subscribed_topic_names()

    def partition_epoch(self, topic_id: bytes, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def member(self, member_id: str) -> ConsumerGroupMember:
        m = self.members.get(member_id)
        if m is None:
            raise KafkaError(Errors.UNKNOWN_MEMBER_ID,
                             f"Member {member_id} is not a member of group {self.group_id}.")
        return m

    # ------------------------------------------------------------------ members
    def update_member(self, old: ConsumerGroupMember | None, new: ConsumerGroupMember) -> None:
        """Put ``new`` in place of ``old`` (None: a new member); the partitions it owns, assigned
        or pending revocation, carry its epoch."""
        if old is not None:
            self._release(old)
            if old.member_id != new.member_id:
                self.members.pop(old.member_id, None)
        self.members[new.member_id] = new
        if new.instance_id is not None:
            self.static_members[new.instance_id] = new.member_id
        for a in (new.assigned, new.pending_revocation):
            for t, ps in a.items():
                for p in ps:
                    self.partition_epochs[(t, p)] = new.member_epoch

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        m = self.members.pop(member_id, None)
        if m is None:
            return None
        self._release(m)
        if m.instance_id is not None and self.static_members.get(m.instance_id) == member_id:
            del self.static_members[m.instance_id]
        self.target.pop(member_id, None)
        return m

    def _release(self, m: ConsumerGroupMember) -> None:
        for a in (m.assigned, m.pending_revocation):
            for t, ps in a.items():
                for p in ps:
                    if self.partition_epochs.get((t, p)) == m.member_epoch:
                        del self.partition_epochs[(t, p)]

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        mid = self.static_members.get(instance_id)
        return self.members.get(mid) if mid is not None else None

    # ------------------------------------------------------------------ offsets (Kafka's ConsumerGroup)
    def validate_offset_commit(self, member_id: str, instance_id: str | None, member_epoch: int,
                               transactional: bool, api_version: int):
        """Kafka's ``ConsumerGroup.validateOffsetCommit``: an epoch of -1 may commit to an empty
        group (an admin client, a consumer without group management); a transactional commit
        without member fields is not checked; otherwise the member must exist and use
        OffsetCommit v9+. Returns None when every partition may be committed, else a predicate
        ``(topic, partition) -> bool`` for an OffsetCommit with an older epoch: KIP-1251 (Kafka
        4.3, measured) accepts a partition the member was assigned at or before that epoch
        (STALE_MEMBER_EPOCH for the others). A transactional commit needs the current epoch
        (ILLEGAL_GENERATION, KAFKA-19779)."""
        if member_epoch < 0 and not self.members:
            return None
        if transactional and member_epoch == -1 and member_id == "" and instance_id is None:
            return None
        member = self.member(member_id)
        if not transactional and api_version < 9:
            raise KafkaError(Errors.UNSUPPORTED_VERSION,
                             "OffsetCommit version 9 or above must be used by members using the modern group protocol")
        if member_epoch == member.member_epoch:
            return None
        error = Errors.ILLEGAL_GENERATION if transactional else Errors.STALE_MEMBER_EPOCH
        message = (f"The received member epoch {member_epoch} does not match the expected member epoch "
                   f"{member.member_epoch}.")
        if transactional or member_epoch > member.member_epoch or member_epoch < 0:
            raise KafkaError(error, message)
        ids = {name: tid for name, (tid, _n) in self.subscription_metadata.items()}

        def accepts(topic: str, partition: int) -> bool:
            epoch = member.assignment_epochs.get((ids.get(topic, b""), partition))
            return epoch is not None and epoch <= member_epoch
        return accepts

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """Kafka's ``ConsumerGroup.validateOffsetFetch``: epoch -1 (an admin client) may always
        fetch; a member must exist and send its current epoch."""
        if member_epoch == -1:
            return
        member = self.member(member_id or "")
        if member_epoch != member.member_epoch:
            raise KafkaError(Errors.STALE_MEMBER_EPOCH,
                             f"The received member epoch {member_epoch} does not match the expected member epoch "
                             f"{member.member_epoch}.")
