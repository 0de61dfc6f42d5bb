"""How a classic group moves between generations: the mechanics behind the group requests.

:class:`~.group_metadata_manager.GroupMetadataManager` answers JoinGroup, SyncGroup,
Heartbeat and LeaveGroup; what those requests set in motion lives here, apart, because it is
also driven by time alone: each member's session deadline, the join phase completing (when
everyone rejoined, or at the rebalance timeout, or after ``group.initial.rebalance.delay.ms``
for a new group), the sync phase deadline, the leader's assignment reaching the parked
members, members dropped, and the group's metadata record written to ``__consumer_offsets``.
In Kafka these are private methods of ``GroupMetadataManager``
(``prepareRebalance``, ``completeClassicGroupJoin``, ``expirePendingSync``, ...); they are one
module here so that the request side stays a size a reader can hold.

Every deadline is a key in the coordinator's one :class:`~.group_timer.CoordinatorTimer`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..protocol.errors import Errors, KafkaError
from .group_metadata import (
    UNKNOWN_MEMBER_ID, ClassicGroup, ClassicGroupMember, GroupState, JoinResult, SyncResult, Waiter,
)
from .group_records import classic_group_value, group_metadata_key, group_metadata_value
from .group_store import OffsetsTopic, append_error_to_response
from .group_timer import CoordinatorTimer

if TYPE_CHECKING:
    from ..config import BrokerConfig

log = logging.getLogger("kconform.broker.group")

#: Kafka's ``group.classic.new.member.join.timeout`` (an internal constant there): a new
#: member parked in JoinGroup is dropped after this long if the rebalance still waits.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


def _heartbeat_key(group_id: str, member_id: str):
    return ("heartbeat", group_id, member_id)


class ClassicRebalance:
    def __init__(self, config: BrokerConfig, store: OffsetsTopic, timer: CoordinatorTimer,
                 groups: dict[str, ClassicGroup]):
        self.config = config
        self.store = store
        self.timer = timer
        self.groups = groups          # the GroupMetadataManager's: deadlines find their group by id

    @property
    def initial_rebalance_delay_ms(self) -> int:
        # Read on every use: a test (or an operator) may change a setting on a running broker.
        return self.config.int("group.initial.rebalance.delay.ms")

    # ------------------------------------------------------------------ persistence
    def store_group(self, group: ClassicGroup, assignment: dict[str, bytes]) -> None:
        """Append the group's metadata record; raises KafkaError (already mapped for clients)."""
        value = group_metadata_value(classic_group_value(group, assignment))
        try:
            self.store.append(group.group_id, [(group_metadata_key(group.group_id), value)])
        except KafkaError as exc:
            raise KafkaError(append_error_to_response(exc.error), exc.message) from None

    def store_group_best_effort(self, group: ClassicGroup) -> None:
        try:
            self.store_group(group, group.assignment())
        except KafkaError as exc:
            log.warning("failed to write metadata of group %s: %s", group.group_id, exc)

    # ------------------------------------------------------------------ session deadlines
    def schedule_heartbeat_expiry(self, group_id: str, member_id: str, timeout_ms: int) -> None:
        """Expire the member (or pending member) unless it heartbeats within ``timeout_ms``."""
        self.timer.schedule(_heartbeat_key(group_id, member_id), timeout_ms,
                            lambda: self.expire_heartbeat(group_id, member_id))

    def reschedule_heartbeat(self, group: ClassicGroup, member: ClassicGroupMember,
                             timeout_ms: int | None = None) -> None:
        self.schedule_heartbeat_expiry(group.group_id, member.member_id,
                                       member.session_timeout_ms if timeout_ms is None else timeout_ms)

    def cancel_group_timers(self, group: ClassicGroup) -> None:
        """Every timer of the group: its members' sessions, its join and sync deadlines."""
        for member_id in list(group.members) + list(group.pending_join_members):
            self.cancel_heartbeat(group.group_id, member_id)
        self.timer.cancel(("join", group.group_id))
        self.timer.cancel(("sync", group.group_id))

    def cancel_heartbeat(self, group_id: str, member_id: str) -> None:
        self.timer.cancel(_heartbeat_key(group_id, member_id))

    def expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return
        if group.is_pending_member(member_id):
            log.info("pending member %s of group %s expired", member_id, group_id)
            group.remove(member_id)
            if group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
                self.complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None:
            return
        if not member.has_satisfied_heartbeat():
            log.info("member %s of group %s failed (session timeout), removing it", member_id, group_id)
            self.remove_member_and_update_group(group, member)

    # ------------------------------------------------------------------ members joining
    def join_result(self, group: ClassicGroup, member_id: str, include_members: bool,
                    skip_assignment: bool = False) -> JoinResult:
        return JoinResult(Errors.NONE, member_id, group.generation_id, group.protocol_type, group.protocol_name,
                          group.leader_id or "", skip_assignment,
                          group.current_member_metadata() if include_members else [])

    def add_member_and_rebalance(self, group: ClassicGroup, member_id: str, waiter: Waiter, **a) -> None:
        member = ClassicGroupMember(member_id, a["group_instance_id"], a["client_id"], a["client_host"],
                                    a["rebalance_timeout_ms"], a["session_timeout_ms"], a["protocol_type"],
                                    list(a["protocols"]))
        member.is_new = True
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.previous_state is GroupState.EMPTY:
            group.new_member_added = True
        group.add(member, waiter)
        # A new member cannot heartbeat while parked: bound its wait instead.
        self.reschedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self.maybe_prepare_rebalance_or_complete_join(group)

    def update_member_and_rebalance(self, group: ClassicGroup, member: ClassicGroupMember, waiter: Waiter,
                                     **a) -> None:
        group.update_member(member, list(a["protocols"]), a["rebalance_timeout_ms"], a["session_timeout_ms"], waiter)
        self.maybe_prepare_rebalance_or_complete_join(group)

    def update_static_member(self, group: ClassicGroup, old_id: str, new_id: str, waiter: Waiter,
                              supports_skip_assignment: bool, **a) -> None:
        """A known group.instance.id joined with an unknown member id (a restarted static member)."""
        instance_id = a["group_instance_id"]
        current_leader = group.leader_id
        new = group.replace_static_member(instance_id, old_id, new_id)
        self.cancel_heartbeat(group.group_id, old_id)
        self.reschedule_heartbeat(group, new)
        old_protocols = list(new.protocols)
        old_rebalance, old_session = new.rebalance_timeout_ms, new.session_timeout_ms
        group.update_member(new, list(a["protocols"]), a["rebalance_timeout_ms"], a["session_timeout_ms"], waiter)
        if group.is_in(GroupState.STABLE):
            if group.protocol_name == group.select_protocol():
                # Same protocol: no rebalance, persist the new member id and hand back the
                # current generation (the leader skips the assignment from v9 on).
                try:
                    self.store_group(group, group.assignment())
                except KafkaError as exc:
                    group.update_member(new, old_protocols, old_rebalance, old_session, None)
                    old = group.replace_static_member(instance_id, new_id, old_id)
                    self.reschedule_heartbeat(group, old)
                    waiter.complete(JoinResult(exc.error, UNKNOWN_MEMBER_ID, group.generation_id,
                                               group.protocol_type, group.protocol_name, current_leader or ""))
                    return
                if supports_skip_assignment:
                    is_leader = group.is_leader(new_id)
                    result = self.join_result(group, new_id, include_members=is_leader, skip_assignment=is_leader)
                else:
                    result = JoinResult(Errors.NONE, new_id, group.generation_id, group.protocol_type,
                                        group.protocol_name, current_leader or "")
                self.complete_join_waiter(group, new, result)
            else:
                self.maybe_prepare_rebalance_or_complete_join(group)
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            self.prepare_rebalance(group)
        else:
            self.maybe_complete_join_phase(group)

    def complete_join_waiter(self, group: ClassicGroup, member: ClassicGroupMember, result: JoinResult) -> bool:
        if member.join_waiter is None:
            return False
        member.join_waiter.complete(result)
        member.join_waiter = None
        group.num_awaiting_join -= 1
        return True

    # ------------------------------------------------------------------ rebalance
    def maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group)
        else:
            self.maybe_complete_join_phase(group)

    def prepare_rebalance(self, group: ClassicGroup) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self.reset_and_propagate_assignment_error(group, Errors.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        initial = group.is_in(GroupState.EMPTY)
        gid = group.group_id
        if initial:
            # group.initial.rebalance.delay.ms: let more members of a new group arrive.
            delay = self.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self.timer.schedule(("join", gid), delay,
                                lambda: self._try_complete_initial_rebalance(gid, delay, remaining))
        group.transition_to(GroupState.PREPARING_REBALANCE)
        log.info("preparing to rebalance group %s (generation %d)", gid, group.generation_id)
        if not initial:
            if group.has_all_members_joined():
                self.complete_join(group)
            else:
                self.timer.schedule(("join", gid), group.rebalance_timeout_ms(), lambda: self._complete_join_by_id(gid))

    def _try_complete_initial_rebalance(self, group_id: str, delay: int, remaining: int) -> None:
        group = self.groups.get(group_id)
        if group is None or not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            new_delay = min(self.initial_rebalance_delay_ms, remaining)
            new_remaining = max(remaining - delay, 0)
            self.timer.schedule(("join", group_id), new_delay,
                                lambda: self._try_complete_initial_rebalance(group_id, new_delay, new_remaining))
        else:
            self.complete_join(group)

    def maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        if not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        if group.previous_state is GroupState.EMPTY:
            return  # the initial rebalance completes on its delay
        if group.has_all_members_joined():
            self.complete_join(group)

    def _complete_join_by_id(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and group.is_in(GroupState.PREPARING_REBALANCE):
            self.complete_join(group)

    def complete_join(self, group: ClassicGroup) -> None:
        gid = group.group_id
        self.timer.cancel(("join", gid))
        for m in [m for m in group.not_yet_rejoined() if not m.is_static]:
            log.info("member %s of group %s did not rejoin in time, removing it", m.member_id, gid)
            group.remove(m.member_id)
            self.cancel_heartbeat(gid, m.member_id)
        if group.is_in(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait for session timeouts to clear the group.
            self.timer.schedule(("join", gid), group.rebalance_timeout_ms(), lambda: self._complete_join_by_id(gid))
            return
        group.init_next_generation()
        if group.is_in(GroupState.EMPTY):
            log.info("group %s with generation %d is now empty", gid, group.generation_id)
            self.store_group_best_effort(group)
            return
        log.info("stabilized group %s generation %d (%s) with %d members", gid, group.generation_id,
                 group.protocol_name, len(group.members))
        for m in list(group.members.values()):
            result = self.join_result(group, m.member_id, include_members=group.is_leader(m.member_id))
            self.complete_join_waiter(group, m, result)
            self.reschedule_heartbeat(group, m)
            m.is_new = False
            group.pending_sync_members.add(m.member_id)
        gen = group.generation_id
        self.timer.schedule(("sync", gid), group.rebalance_timeout_ms(), lambda: self._expire_pending_sync(gid, gen))

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self.timer.cancel(("sync", group.group_id))

    def _expire_pending_sync(self, group_id: str, generation_id: int) -> None:
        group = self.groups.get(group_id)
        if group is None or group.generation_id != generation_id:
            return
        if group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE) and group.pending_sync_members:
            missing = list(group.pending_sync_members)
            log.info("group %s: members %s did not send SyncGroup in time, removing them", group_id, missing)
            for mid in missing:
                m = group.members.get(mid)
                if m is not None and m.sync_waiter is not None:
                    m.sync_waiter.complete(SyncResult(Errors.UNKNOWN_MEMBER_ID))
                    m.sync_waiter = None
                group.remove(mid)
                self.cancel_heartbeat(group_id, mid)
            self.prepare_rebalance(group)

    def remove_member(self, group: ClassicGroup, member: ClassicGroupMember) -> None:
        """Drop ``member`` and its heartbeat deadline. A parked JoinGroup/SyncGroup of the
        member gets UNKNOWN_MEMBER_ID, so that a live client simply joins again."""
        self.complete_join_waiter(group, member, JoinResult(Errors.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID))
        if member.sync_waiter is not None:
            member.sync_waiter.complete(SyncResult(Errors.UNKNOWN_MEMBER_ID))
            member.sync_waiter = None
        self.cancel_heartbeat(group.group_id, member.member_id)
        group.remove(member.member_id)

    def remove_member_and_update_group(self, group: ClassicGroup, member: ClassicGroupMember) -> None:
        self.remove_member(group, member)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance_or_complete_join(group)
        elif group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
            self.complete_join(group)

    def reset_and_propagate_assignment_error(self, group: ClassicGroup, error: Errors) -> None:
        for m in group.members.values():
            m.assignment = b""
        self._propagate_assignment(group, error)

    def set_and_propagate_assignment(self, group: ClassicGroup, assignment: dict[str, bytes]) -> None:
        for mid, m in group.members.items():
            m.assignment = assignment.get(mid, b"")
        self._propagate_assignment(group, Errors.NONE)

    def _propagate_assignment(self, group: ClassicGroup, error: Errors) -> None:
        ok = error is Errors.NONE
        for m in group.members.values():
            if m.sync_waiter is not None:
                m.sync_waiter.complete(SyncResult(error, m.assignment if ok else b"",
                                                  group.protocol_type if ok else None,
                                                  group.protocol_name if ok else None))
                m.sync_waiter = None
                self.reschedule_heartbeat(group, m)

    def remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE) or not group.pending_sync_members:
            self.timer.cancel(("sync", group.group_id))
