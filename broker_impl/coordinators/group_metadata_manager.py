"""The classic group state machine (Kafka's ``GroupMetadataManager``, classic-group part).

Kafka's group coordinator keeps two managers side by side over one ``__consumer_offsets``
partition: this one runs the groups, :mod:`.offset_metadata_manager` keeps their committed
offsets. The split follows the records each side writes and replays: this module writes the
group metadata records (key version 2) and owns JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
DescribeGroups and ListGroups, the group side of DeleteGroups and of expiring empty groups;
the offsets side only asks it for a group (:class:`~.offset_metadata_manager.GroupLookup`).
What the requests set in motion (deadlines, the join and sync phases completing, members
dropped, the group's record written) is :class:`~.classic_rebalance.ClassicRebalance`'s.

The rules, error codes and their order follow Kafka; the machinery is trio's:

- a parked JoinGroup/SyncGroup is a :class:`~.group_metadata.Waiter` its handler awaits
  (Kafka keeps the connection muted meanwhile; so do we, since a connection handles one
  request at a time);
- every deadline (heartbeat expiry per member, join and sync deadline per group, the initial
  rebalance delay) is a key in the coordinator's one :class:`~.group_timer.CoordinatorTimer`
  task, so a heartbeat costs a dict write and a heap push;
- a group's metadata is written synchronously to ``__consumer_offsets`` before a request is
  answered (:mod:`.group_store`), and replayed at start-up.

State-changing methods are synchronous: on one trio thread nothing can run between their
steps, which is what Kafka's per-partition coordinator thread guarantees too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..protocol.errors import Errors, KafkaError
from .classic_rebalance import ClassicRebalance
from .consumer_group import ConsumerGroup
from .group_metadata import (
    UNKNOWN_MEMBER_ID, ClassicGroup, ClassicGroupMember, GroupState, JoinResult, SyncResult, Waiter,
    group_id_valid,
)
from .group_records import (
    classic_group_from_value, group_metadata_key, group_metadata_value, new_group_metadata_value,
)
from .group_store import OffsetsTopic
from .group_timer import CoordinatorTimer

if TYPE_CHECKING:
    from ..config import BrokerConfig

log = logging.getLogger("kconform.broker.group")


@dataclass(slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(slots=True)
class DescribedGroup:
    group_id: str
    error: Errors
    state: str
    protocol_type: str
    protocol_data: str
    members: list[DescribedMember]
    error_message: str | None = None


class GroupMetadataManager:
    def __init__(self, config: BrokerConfig, store: OffsetsTopic, timer: CoordinatorTimer):
        self.config = config
        self.store = store
        self.groups: dict[str, ClassicGroup] = {}
        #: The KIP-848 consumer groups (ConsumerGroupManager's): one group id space with these.
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.rebalance = ClassicRebalance(config, store, timer, self.groups)

    # ------------------------------------------------------------------ configuration
    def _cfg(self, name: str) -> int:
        # Read on every use: a test (or an operator) may change a setting on a running broker.
        return self.config.int(name)

    @property
    def min_session_timeout_ms(self) -> int:
        return self._cfg("group.min.session.timeout.ms")

    @property
    def max_session_timeout_ms(self) -> int:
        return self._cfg("group.max.session.timeout.ms")

    @property
    def max_group_size(self) -> int:
        return self._cfg("group.max.size")

    # ------------------------------------------------------------------ what the offsets side asks
    def group(self, group_id: str) -> ClassicGroup | None:
        return self.groups.get(group_id)

    def get_or_create_simple_group(self, group_id: str) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id)
        return group

    def reschedule_heartbeat(self, group: ClassicGroup, member: ClassicGroupMember) -> None:
        self.rebalance.reschedule_heartbeat(group, member)

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """The KIP-848 consumer group of ``group_id`` (its manager shares this dict), if any."""
        return self.consumer_groups.get(group_id)

    def forget_empty_group(self, group_id: str) -> None:
        """An Empty classic group gives way to a consumer group of the same id (Kafka's
        ``maybeDeleteEmptyClassicGroup``): its tombstone is written, its offsets stay."""
        try:
            self.store.append(group_id, [self.tombstone(group_id)])
        except KafkaError as exc:
            log.warning("failed to write the tombstone of classic group %s: %s", group_id, exc)
        group = self.groups.pop(group_id, None)
        if group is not None:
            group.transition_to(GroupState.DEAD)

    # ------------------------------------------------------------------ lifecycle
    def load(self, values: dict[str, object]) -> None:
        """The groups of ``__consumer_offsets``: ``values`` holds each group's last metadata
        record (None: a tombstone). Groups that had members are loaded Stable with their last
        generation and assignment (as Kafka loads them); each member gets a fresh session
        timeout to send its next heartbeat, or is expired."""
        for group_id, value in values.items():
            if value is None:
                self.groups.pop(group_id, None)
                continue
            group = self.groups[group_id] = classic_group_from_value(group_id, value)
            for m in group.members.values():
                self.rebalance.reschedule_heartbeat(group, m)

    def close(self) -> None:
        """Answer every parked JoinGroup/SyncGroup (the broker is going away)."""
        for g in self.groups.values():
            self._answer_parked(g, Errors.COORDINATOR_NOT_AVAILABLE)

    @staticmethod
    def _answer_parked(group: ClassicGroup, error: Errors) -> None:
        for m in group.members.values():
            if m.join_waiter is not None:
                m.join_waiter.complete(JoinResult(error, m.member_id))
            if m.sync_waiter is not None:
                m.sync_waiter.complete(SyncResult(error))

    def unload(self, group_id: str) -> None:
        """This broker no longer coordinates the group (its ``__consumer_offsets`` partition
        moved): parked requests get NOT_COORDINATOR, so the members find the new coordinator,
        which loaded the group from the log; its timers stop here."""
        group = self.groups.pop(group_id, None)
        if group is None:
            return
        self._answer_parked(group, Errors.NOT_COORDINATOR)
        self.rebalance.cancel_group_timers(group)

    # ------------------------------------------------------------------ JoinGroup
    async def join_group(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                         client_id: str | None, client_host: str, session_timeout_ms: int,
                         rebalance_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]],
                         require_known_member_id: bool, supports_skip_assignment: bool) -> JoinResult:
        """Handle one JoinGroup; returns when the member's join phase ends (possibly after the
        rebalance completes)."""
        if not group_id_valid(group_id):
            return JoinResult(Errors.INVALID_GROUP_ID, member_id)
        if not self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms:
            return JoinResult(Errors.INVALID_SESSION_TIMEOUT, member_id)
        waiter = Waiter()
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        group = self.groups.get(group_id)
        is_new_group = group is None
        if group is None:
            if not is_unknown:
                return JoinResult(Errors.UNKNOWN_MEMBER_ID, member_id)
            group = self.groups[group_id] = ClassicGroup(group_id)
        args = dict(group_instance_id=group_instance_id, client_id=client_id, client_host=client_host,
                    session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=rebalance_timeout_ms,
                    protocol_type=protocol_type, protocols=protocols)
        if not self._accept_joining_member(group, member_id):
            m = group.members.get(member_id)
            if m is not None:
                self.rebalance.complete_join_waiter(group, m,
                                                    JoinResult(Errors.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID))
                self.rebalance.cancel_heartbeat(group_id, member_id)
            group.remove(member_id)
            return JoinResult(Errors.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID)
        if is_unknown:
            self._join_new_member(group, waiter, require_known_member_id, supports_skip_assignment, **args)
        else:
            self._join_existing_member(group, member_id, waiter, **args)
        if is_new_group:
            # Kafka commits a newly created group with an empty metadata record.
            try:
                value = new_group_metadata_value(protocol_type="", generation=0, protocol=None, leader=None,
                                                 current_state_timestamp=group.state_timestamp or -1, members=[])
                self.store.append(group_id, [(group_metadata_key(group_id), group_metadata_value(value))])
            except KafkaError as exc:
                log.warning("failed to write empty metadata for group %s: %s", group_id, exc)
        return await waiter.wait()

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        limit = self.max_group_size
        if group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_in(GroupState.PREPARING_REBALANCE):
            m = group.members.get(member_id)
            return (m is not None and m.awaiting_join) or group.num_awaiting_join < limit
        return member_id in group.members or len(group.members) < limit

    def _join_new_member(self, group: ClassicGroup, waiter: Waiter, require_known_member_id: bool,
                         supports_skip_assignment: bool, **a) -> None:
        if group.is_in(GroupState.DEAD):
            waiter.complete(JoinResult(Errors.COORDINATOR_NOT_AVAILABLE, UNKNOWN_MEMBER_ID))
            return
        if not group.supports_protocols(a["protocol_type"], [n for n, _ in a["protocols"]]):
            waiter.complete(JoinResult(Errors.INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID))
            return
        instance_id = a["group_instance_id"]
        new_id = group.generate_member_id(a["client_id"], instance_id)
        if instance_id is not None:
            existing = group.static_member_id(instance_id)
            if existing is not None:
                self.rebalance.update_static_member(group, existing, new_id, waiter, supports_skip_assignment, **a)
            else:
                self.rebalance.add_member_and_rebalance(group, new_id, waiter, **a)
            return
        if require_known_member_id:
            # v4+: hand the id out first; the member joins again with it (KIP-394).
            group.pending_join_members.add(new_id)
            self.rebalance.schedule_heartbeat_expiry(group.group_id, new_id, a["session_timeout_ms"])
            waiter.complete(JoinResult(Errors.MEMBER_ID_REQUIRED, new_id))
            return
        self.rebalance.add_member_and_rebalance(group, new_id, waiter, **a)

    def _join_existing_member(self, group: ClassicGroup, member_id: str, waiter: Waiter, **a) -> None:
        if group.is_in(GroupState.DEAD):
            waiter.complete(JoinResult(Errors.COORDINATOR_NOT_AVAILABLE, member_id))
            return
        if not group.supports_protocols(a["protocol_type"], [n for n, _ in a["protocols"]]):
            waiter.complete(JoinResult(Errors.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if group.is_pending_member(member_id):
            if a["group_instance_id"] is not None:
                waiter.complete(JoinResult(Errors.UNKNOWN_MEMBER_ID, member_id))
                return
            self.rebalance.add_member_and_rebalance(group, member_id, waiter, **a)
            return
        try:
            group.validate_member(member_id, a["group_instance_id"])
        except KafkaError as exc:
            waiter.complete(JoinResult(exc.error, member_id))
            return
        member = group.members[member_id]
        protocols = a["protocols"]
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self.rebalance.update_member_and_rebalance(group, member, waiter, **a)
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.matches(protocols):
                # The member lost its JoinGroup response: answer again for this generation.
                waiter.complete(self.rebalance.join_result(group, member_id,
                                                           include_members=group.is_leader(member_id)))
            else:
                self.rebalance.update_member_and_rebalance(group, member, waiter, **a)
        elif group.is_in(GroupState.STABLE):
            if group.is_leader(member_id) or not member.matches(protocols):
                # A leader's JoinGroup forces a rebalance (it may have seen metadata change).
                self.rebalance.update_member_and_rebalance(group, member, waiter, **a)
            else:
                waiter.complete(self.rebalance.join_result(group, member_id, include_members=False))
        else:
            waiter.complete(JoinResult(Errors.UNKNOWN_MEMBER_ID, member_id))

    # ------------------------------------------------------------------ SyncGroup
    async def sync_group(self, *, group_id: str, generation_id: int, member_id: str,
                         group_instance_id: str | None, protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes]) -> SyncResult:
        if not group_id_valid(group_id):
            return SyncResult(Errors.INVALID_GROUP_ID)
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.EMPTY):
            return SyncResult(Errors.UNKNOWN_MEMBER_ID)
        if group.is_in(GroupState.DEAD):
            return SyncResult(Errors.COORDINATOR_NOT_AVAILABLE)
        try:
            group.validate_member(member_id, group_instance_id)
        except KafkaError as exc:
            return SyncResult(exc.error)
        if generation_id != group.generation_id:
            return SyncResult(Errors.ILLEGAL_GENERATION)
        if ((protocol_type is not None and group.protocol_type is not None and protocol_type != group.protocol_type)
                or (protocol_name is not None and group.protocol_name is not None
                    and protocol_name != group.protocol_name)):
            return SyncResult(Errors.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return SyncResult(Errors.REBALANCE_IN_PROGRESS)
        member = group.members[member_id]
        if group.is_in(GroupState.STABLE):
            self.rebalance.remove_pending_sync_member(group, member_id)
            return SyncResult(Errors.NONE, member.assignment, group.protocol_type, group.protocol_name)
        # CompletingRebalance: park until the leader's assignment is stored.
        waiter = Waiter()
        if member.sync_waiter is not None:
            member.sync_waiter.complete(SyncResult(Errors.REBALANCE_IN_PROGRESS))
        member.sync_waiter = waiter
        self.rebalance.remove_pending_sync_member(group, member_id)
        if group.is_leader(member_id):
            full = {mid: assignments.get(mid, b"") for mid in group.members}
            try:
                self.rebalance.store_group(group, full)
            except KafkaError as exc:
                if group.is_in(GroupState.COMPLETING_REBALANCE) and group.generation_id == generation_id:
                    self.rebalance.reset_and_propagate_assignment_error(group, exc.error)
                    self.rebalance.maybe_prepare_rebalance_or_complete_join(group)
            else:
                if group.is_in(GroupState.COMPLETING_REBALANCE) and group.generation_id == generation_id:
                    self.rebalance.set_and_propagate_assignment(group, full)
                    group.transition_to(GroupState.STABLE)
        return await waiter.wait()

    # ------------------------------------------------------------------ Heartbeat
    def heartbeat(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> Errors:
        if not group_id_valid(group_id):
            return Errors.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None:
            return Errors.UNKNOWN_MEMBER_ID
        if group.is_in(GroupState.DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE
        try:
            group.validate_member(member_id, group_instance_id)
        except KafkaError as exc:
            return exc.error
        if generation_id != group.generation_id:
            return Errors.ILLEGAL_GENERATION
        if group.is_in(GroupState.EMPTY):
            return Errors.UNKNOWN_MEMBER_ID
        self.rebalance.reschedule_heartbeat(group, group.members[member_id])
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return Errors.REBALANCE_IN_PROGRESS   # the member must rejoin
        return Errors.NONE

    # ------------------------------------------------------------------ LeaveGroup
    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[Errors, list[Errors]]:
        """``members`` are ``(member_id, group_instance_id)``; returns the top-level error and
        one error per member."""
        if not group_id_valid(group_id):
            return Errors.INVALID_GROUP_ID, []
        group = self.groups.get(group_id)
        if group is None:  # Kafka 4.3.1 (measured): no group-level error, every member unknown
            return Errors.NONE, [Errors.UNKNOWN_MEMBER_ID] * len(members)
        if group.is_in(GroupState.DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE, []
        errors: list[Errors] = []
        left = False
        for member_id, instance_id in members:
            if member_id == UNKNOWN_MEMBER_ID:
                # Administrative removal of a static member by its instance id.
                existing = group.static_member_id(instance_id)
                if existing is not None:
                    self._remove_current_member(group, existing)
                    errors.append(Errors.NONE)
                    left = True
                else:
                    errors.append(Errors.UNKNOWN_MEMBER_ID)
            elif group.is_pending_member(member_id):
                group.remove(member_id)
                self.rebalance.cancel_heartbeat(group_id, member_id)
                errors.append(Errors.NONE)
                left = True
            else:
                try:
                    group.validate_member(member_id, instance_id)
                except KafkaError as exc:
                    errors.append(exc.error)
                    continue
                self._remove_current_member(group, member_id)
                errors.append(Errors.NONE)
                left = True
        if left:
            if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self.rebalance.maybe_prepare_rebalance_or_complete_join(group)
            elif group.is_in(GroupState.PREPARING_REBALANCE):
                self.rebalance.maybe_complete_join_phase(group)
        return Errors.NONE, errors

    def _remove_current_member(self, group: ClassicGroup, member_id: str) -> None:
        log.info("member %s left group %s", member_id, group.group_id)
        self.rebalance.remove_member(group, group.members[member_id])

    # ------------------------------------------------------------------ Describe / List
    def describe_group(self, group_id: str, api_version: int) -> DescribedGroup:
        if not group_id_valid(group_id):
            return DescribedGroup(group_id, Errors.INVALID_GROUP_ID, "", "", "", [])
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            if api_version >= 6:   # KIP-1043
                what = "is not a classic group" if group_id in self.consumer_groups else "not found"
                return DescribedGroup(group_id, Errors.GROUP_ID_NOT_FOUND, GroupState.DEAD.value, "", "", [],
                                      f"Group {group_id} {what}.")
            return DescribedGroup(group_id, Errors.NONE, GroupState.DEAD.value, "", "", [])
        stable = group.is_in(GroupState.STABLE)
        members = [DescribedMember(m.member_id, m.group_instance_id, m.client_id or "", m.client_host,
                                   m.metadata(group.protocol_name) if stable else b"",
                                   m.assignment if stable else b"")
                   for m in group.members.values()]
        return DescribedGroup(group_id, Errors.NONE, group.state.value, group.protocol_type or "",
                              group.protocol_name or "" if stable else "", members)

    def list_groups(self, states_filter: list[str] | None = None,
                    types_filter: list[str] | None = None) -> list[tuple[str, str, str, str]]:
        """``(group_id, protocol_type, state, type)`` of every group passing the filters
        (case-insensitive, as Kafka compares them)."""
        states = {s.lower() for s in states_filter or ()}
        types = {t.lower() for t in types_filter or ()}
        out = []
        for gid, g in self.groups.items():
            if g.is_in(GroupState.DEAD):
                continue
            if states and g.state.value.lower() not in states:
                continue
            if types and "classic" not in types:
                continue
            out.append((gid, g.protocol_type or "", g.state.value, "classic"))
        return out


    # ------------------------------------------------------------------ DeleteGroups, expiry
    def validate_delete_group(self, group_id: str) -> Errors:
        """Kafka's ``validateDeleteGroup``: only an Empty group (or one with just offsets) can go."""
        if not group_id_valid(group_id):
            return Errors.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return Errors.GROUP_ID_NOT_FOUND
        if not group.is_in(GroupState.EMPTY):
            return Errors.NON_EMPTY_GROUP
        return Errors.NONE

    @staticmethod
    def tombstone(group_id: str) -> tuple[bytes, None]:
        """The group metadata tombstone of ``group_id``."""
        return group_metadata_key(group_id), None

    def remove_group(self, group_id: str) -> None:
        """Forget a deleted group (its tombstone is written): it goes Dead."""
        group = self.groups.pop(group_id)
        group.transition_to(GroupState.DEAD)
        for m in list(group.pending_join_members):
            self.rebalance.cancel_heartbeat(group_id, m)

    def maybe_delete_group(self, group_id: str) -> None:
        """An Empty group without members, whose offsets are all gone, is deleted (Kafka's
        ``maybeDeleteGroup`` during offset expiration)."""
        group = self.groups.get(group_id)
        if group is None or not group.is_in(GroupState.EMPTY) or group.members:
            return
        try:
            self.store.append(group_id, [self.tombstone(group_id)])
        except KafkaError as exc:
            log.warning("failed to delete group %s: %s", group_id, exc)
            return
        group.transition_to(GroupState.DEAD)
        del self.groups[group_id]
