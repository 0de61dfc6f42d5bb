"""One classic group and its members (Kafka's ``ClassicGroup`` / ``ClassicGroupMember``).

This module holds state and the rules that only look at one group (which
transitions are legal, which protocol is selected, who leads); the decisions
that involve time, persistence and responses live in
:mod:`~broker_impl.coordinators.group_metadata_manager` and
:mod:`~broker_impl.coordinators.classic_rebalance`. Both managers of the
coordinator (groups and offsets) share these types.
"""

from __future__ import annotations

import enum
import time
import uuid
from dataclasses import dataclass, field

import trio

from ..protocol.errors import Errors, KafkaError
from ..protocol.messages import DATA

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    """Kafka's classic group states; ``.value`` is the name DescribeGroups/ListGroups report."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS = {
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
    GroupState.PREPARING_REBALANCE: {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY},
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.DEAD: set(GroupState),
}


def now_ms() -> int:
    return int(time.time() * 1000)


def group_id_valid(group_id: str | None) -> bool:
    """Every group request answers INVALID_GROUP_ID for a null or empty group id."""
    return group_id is not None and group_id != ""


class Waiter:
    """A parked JoinGroup/SyncGroup request: completed once, awaited by its handler.

    Kafka parks these requests in a purgatory (the connection stays muted); here the
    handler task simply awaits the waiter.
    """

    __slots__ = ("_event", "value")

    def __init__(self) -> None:
        self._event = trio.Event()
        self.value = None

    def complete(self, value) -> bool:
        if self._event.is_set():
            return False
        self.value = value
        self._event.set()
        return True

    @property
    def done(self) -> bool:
        return self._event.is_set()

    async def wait(self):
        await self._event.wait()
        return self.value


@dataclass(slots=True)
class JoinResult:
    """What a parked JoinGroup gets back (turned into a JoinGroupResponse by the handler)."""

    error: Errors
    member_id: str = UNKNOWN_MEMBER_ID
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: list = field(default_factory=list)   # [(member_id, group_instance_id, metadata)]


@dataclass(slots=True)
class SyncResult:
    error: Errors
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass
class ClassicGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]          # (name, metadata) in the member's preference order
    assignment: bytes = b""
    join_waiter: Waiter | None = None
    sync_waiter: Waiter | None = None
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    def protocol_names(self) -> list[str]:
        return [n for n, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for n, m in self.protocols:
            if n == protocol:
                return m
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols, same metadata, same order (Kafka's ``ClassicGroupMember.matches``)."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for n, _ in self.protocols:
            if n in candidates:
                return n
        raise KafkaError(Errors.INCONSISTENT_GROUP_PROTOCOL, "member supports no candidate protocol")

    def has_satisfied_heartbeat(self) -> bool:
        """When its heartbeat deadline fires, is the member still alive?

        New members are expired even while parked in JoinGroup (they may have
        gone away while the group was rebalancing); members parked in JoinGroup
        or SyncGroup satisfy it (the rebalance timeout bounds them instead).
        """
        if self.is_new:
            return False
        return self.awaiting_join or self.awaiting_sync


class ClassicGroup:
    def __init__(self, group_id: str, state: GroupState = GroupState.EMPTY):
        self.group_id = group_id
        self.state = state
        self.previous_state: GroupState | None = None
        self.state_timestamp: int | None = now_ms()
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, ClassicGroupMember] = {}
        self.static_members: dict[str, str] = {}          # group.instance.id -> member id
        self.pending_join_members: set[str] = set()       # got MEMBER_ID_REQUIRED, not joined yet
        self.pending_sync_members: set[str] = set()
        self.supported_protocols: dict[str, int] = {}     # protocol -> number of members supporting it
        self.num_awaiting_join = 0
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None

    # -- state ---------------------------------------------------------------------------
    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, target: GroupState) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise AssertionError(f"group {self.group_id}: illegal transition {self.state.value} -> {target.value}")
        self.previous_state = self.state
        self.state = target
        self.state_timestamp = now_ms()

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # -- members -------------------------------------------------------------------------
    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def generate_member_id(self, client_id: str | None, instance_id: str | None) -> str:
        """``client_id-uuid``, or ``group.instance.id-uuid`` for a static member (Kafka's rule)."""
        prefix = instance_id if instance_id is not None else (client_id or "")
        return f"{prefix}-{uuid.uuid4()}"

    def _inc_protocols(self, m: ClassicGroupMember) -> None:
        for n in m.protocol_names():
            self.supported_protocols[n] = self.supported_protocols.get(n, 0) + 1

    def _dec_protocols(self, m: ClassicGroupMember) -> None:
        for n in m.protocol_names():
            c = self.supported_protocols.get(n, 0) - 1
            if c <= 0:
                self.supported_protocols.pop(n, None)
            else:
                self.supported_protocols[n] = c

    def add(self, member: ClassicGroupMember, waiter: Waiter | None = None) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._inc_protocols(member)
        member.join_waiter = waiter
        if waiter is not None:
            self.num_awaiting_join += 1
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        m = self.members.pop(member_id, None)
        if m is not None:
            self._dec_protocols(m)
            if m.awaiting_join:
                self.num_awaiting_join -= 1
            if m.group_instance_id is not None and self.static_members.get(m.group_instance_id) == member_id:
                del self.static_members[m.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def update_member(self, member: ClassicGroupMember, protocols, rebalance_timeout_ms: int,
                      session_timeout_ms: int, waiter: Waiter | None) -> None:
        self._dec_protocols(member)
        member.protocols = protocols
        self._inc_protocols(member)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if waiter is not None and not member.awaiting_join:
            self.num_awaiting_join += 1
        elif waiter is None and member.awaiting_join:
            self.num_awaiting_join -= 1
        if member.join_waiter is not None and waiter is not None and member.join_waiter is not waiter:
            # A retried JoinGroup replaces a parked one: answer the old one so that
            # its handler (and connection) does not stay parked forever.
            member.join_waiter.complete(JoinResult(Errors.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_waiter = waiter

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> ClassicGroupMember:
        """A static member rejoined with an unknown member id: the new id takes its place and
        whoever still waits with the old id is fenced (FENCED_INSTANCE_ID)."""
        old = self.members.pop(old_id)
        if old.awaiting_join:
            old.join_waiter.complete(JoinResult(Errors.FENCED_INSTANCE_ID, old_id))
            old.join_waiter = None
            self.num_awaiting_join -= 1
        if old.sync_waiter is not None:
            old.sync_waiter.complete(SyncResult(Errors.FENCED_INSTANCE_ID))
            old.sync_waiter = None
        new = ClassicGroupMember(new_id, old.group_instance_id, old.client_id, old.client_host,
                                 old.rebalance_timeout_ms, old.session_timeout_ms, old.protocol_type,
                                 list(old.protocols), old.assignment)
        self.members[new_id] = new
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        if old_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_id)
            self.pending_sync_members.add(new_id)
        return new

    def validate_member(self, member_id: str, instance_id: str | None) -> None:
        """UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID as Kafka's ``ClassicGroup.validateMember``."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                raise KafkaError(Errors.UNKNOWN_MEMBER_ID)
            if existing != member_id:
                raise KafkaError(Errors.FENCED_INSTANCE_ID)
        if member_id not in self.members:
            raise KafkaError(Errors.UNKNOWN_MEMBER_ID)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_join_members

    def not_yet_rejoined(self) -> list[ClassicGroupMember]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """If the leader did not rejoin, hand leadership to a member that did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for m in self.members.values():
            if m.awaiting_join:
                self.leader_id = m.member_id
                return True
        return False

    # -- protocols -------------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {p for p, c in self.supported_protocols.items() if c == n}

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(self.supported_protocols.get(p, 0) == n for p in names)

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer (Kafka's vote).

        Ties go to the protocol that got its first vote earliest, so the choice is
        deterministic."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            p = m.vote(candidates)
            votes[p] = votes.get(p, 0) + 1
        return max(votes.items(), key=lambda kv: kv[1])[0]

    def compute_subscribed_topics(self) -> set[str] | None:
        """Topics the members of a ``consumer`` group subscribe to, read from the V0 prefix of
        ConsumerProtocolSubscription (what every version starts with); None if unknown."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        codec = DATA["ConsumerProtocolSubscription"]
        topics: set[str] = set()
        try:
            for m in self.members.values():
                data = m.metadata(self.protocol_name)
                sub, _ = codec.decode(0, data, 2)
                topics.update(sub.topics or ())
        except Exception:
            return None
        return topics

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY)
        self.pending_sync_members.clear()

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()]

    def assignment(self) -> dict[str, bytes]:
        return {mid: m.assignment for mid, m in self.members.items()}

    def is_subscribed_to(self, topic: str) -> bool:
        if self.subscribed_topics is None:
            return self.protocol_type == CONSUMER_PROTOCOL_TYPE
        return topic in self.subscribed_topics
