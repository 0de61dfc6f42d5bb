"""The group coordinator: Kafka's classic group protocol and committed offsets.

Reference: Kafka's group-coordinator module (``GroupMetadataManager`` for the
classic-group state machine, ``OffsetMetadataManager`` for offsets,
``ClassicGroup``). The rules, error codes and their order follow it; the
machinery is trio's:

- a parked JoinGroup/SyncGroup is a :class:`~.group_metadata.Waiter` its
  handler awaits (Kafka keeps the connection muted meanwhile; so do we, since a
  connection handles one request at a time);
- every deadline (heartbeat expiry per member, join and sync deadline per
  group, the initial rebalance delay, offset retention) is a key in one
  :class:`~.group_timer.CoordinatorTimer` task, so a heartbeat costs a dict
  write and a heap push;
- durable state is written synchronously to ``__consumer_offsets`` before a
  request is answered (:mod:`.group_store`), and replayed at start-up.

State-changing methods are synchronous: on one trio thread nothing can run
between their steps, which is what Kafka's per-partition coordinator thread
guarantees too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..cluster.topics import by_topic
from ..log import records as rec
from ..protocol.errors import Errors, KafkaError
from .group_metadata import (
    UNKNOWN_MEMBER_ID, ClassicGroup, ClassicGroupMember, GroupState, JoinResult,
    SyncResult, Waiter, now_ms,
)
from .group_records import (
    MemberMetadata, OffsetAndMetadata, OffsetRecord, UnknownRecord, decode_record,
    group_metadata_key, group_metadata_value, new_group_metadata_value, offset_commit_key,
    offset_commit_value,
)
from .group_store import OffsetsTopic, append_error_to_response, offset_append_error_to_response
from .group_timer import CoordinatorTimer

log = logging.getLogger("kconform.broker.group")

#: Kafka's ``group.classic.new.member.join.timeout`` (an internal constant there): a new
#: member parked in JoinGroup is dropped after this long if the rebalance still waits.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
INVALID_OFFSET = -1


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


def _group_id_valid(group_id: str | None) -> bool:
    return group_id is not None and group_id != ""


class GroupCoordinator:
    def __init__(self, broker):
        self.broker = broker
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = {}
        # Transactional offsets written but not yet committed/aborted (TxnOffsetCommit):
        # producer id -> group -> (topic, partition) -> offset.
        self.pending_txn_offsets: dict[int, dict[str, dict[tuple[str, int], OffsetAndMetadata]]] = {}
        self.timer = CoordinatorTimer()
        self.store = OffsetsTopic(broker)
        self._nursery = None
        self.loaded = False

    # ------------------------------------------------------------------ configuration
    def _cfg(self, name: str) -> int:
        # Read on every use: a test (or an operator) may change a setting on a running broker.
        return self.broker.config.int(name)

    @property
    def min_session_timeout_ms(self) -> int:
        return self._cfg("group.min.session.timeout.ms")

    @property
    def max_session_timeout_ms(self) -> int:
        return self._cfg("group.max.session.timeout.ms")

    @property
    def initial_rebalance_delay_ms(self) -> int:
        return self._cfg("group.initial.rebalance.delay.ms")

    @property
    def max_group_size(self) -> int:
        return self._cfg("group.max.size")

    @property
    def offsets_retention_ms(self) -> int:
        return self._cfg("offsets.retention.minutes") * 60 * 1000

    # ------------------------------------------------------------------ lifecycle
    async def start(self, nursery) -> None:
        """Replay ``__consumer_offsets``, then run the timer task in ``nursery``."""
        self._nursery = nursery
        self.load()
        nursery.start_soon(self.timer.run)
        self._schedule_offset_expiration()

    def close(self) -> None:
        self.timer.clear()
        for g in self.groups.values():
            for m in g.members.values():
                if m.join_waiter is not None:
                    m.join_waiter.complete(JoinResult(Errors.COORDINATOR_NOT_AVAILABLE, m.member_id))
                if m.sync_waiter is not None:
                    m.sync_waiter.complete(SyncResult(Errors.COORDINATOR_NOT_AVAILABLE))

    def load(self) -> None:
        """Rebuild groups and committed offsets from ``__consumer_offsets``.

        Groups that had members are loaded Stable with their last generation and
        assignment (as Kafka loads them); each member gets a fresh session timeout
        to send its next heartbeat, or is expired. Transactional offsets follow
        their markers: data batches are pending until the COMMIT/ABORT control batch.
        """
        pending: dict[int, list[OffsetRecord]] = {}
        group_values: dict[str, object] = {}
        n = 0
        for _partition, h, records in self.store.replay():
            if h.is_control:
                marker = None
                if records and records[0].key is not None and len(records[0].key) >= 4:
                    marker = int.from_bytes(records[0].key[2:4], "big", signed=True)
                staged = pending.pop(h.producer_id, [])
                if marker == rec.COMMIT:
                    for r in staged:
                        self._apply_offset_record(r)
                continue
            for r in records:
                if r.key is None:
                    continue
                try:
                    parsed = decode_record(r.key, r.value)
                except UnknownRecord:
                    continue
                except Exception:
                    log.warning("skipping unreadable %s record at offset %d", self.store.topic.name, r.offset)
                    continue
                n += 1
                if isinstance(parsed, OffsetRecord):
                    if h.is_transactional:
                        pending.setdefault(h.producer_id, []).append(parsed)
                    else:
                        self._apply_offset_record(parsed)
                else:
                    group_values[parsed.group] = parsed.value
        for pid, staged in pending.items():
            for r in staged:
                if r.value is not None:
                    self.pending_txn_offsets.setdefault(pid, {}).setdefault(r.group, {})[(r.topic, r.partition)] = r.value
        for group_id, value in group_values.items():
            if value is None:
                self.groups.pop(group_id, None)
                continue
            self.groups[group_id] = self._group_from_record(group_id, value)
        for group_id in self.offsets:
            if group_id not in self.groups:
                # Offsets without group metadata: a "simple" group (standalone commits).
                self.groups[group_id] = ClassicGroup(group_id)
        self.loaded = True
        if n:
            log.info("loaded %d records: %d groups, %d groups with offsets", n, len(self.groups), len(self.offsets))

    def _apply_offset_record(self, r: OffsetRecord) -> None:
        if r.value is None:
            g = self.offsets.get(r.group)
            if g is not None:
                g.pop((r.topic, r.partition), None)
                if not g:
                    del self.offsets[r.group]
        else:
            self.offsets.setdefault(r.group, {})[(r.topic, r.partition)] = r.value

    def _group_from_record(self, group_id: str, v) -> ClassicGroup:
        members = v.members or []
        g = ClassicGroup(group_id, GroupState.STABLE if members else GroupState.EMPTY)
        g.generation_id = v.generation
        g.protocol_type = v.protocol_type or None
        g.protocol_name = v.protocol
        g.leader_id = v.leader
        if v.current_state_timestamp >= 0:
            g.state_timestamp = v.current_state_timestamp
        for mm in members:
            m = ClassicGroupMember(mm.member_id, mm.group_instance_id, mm.client_id, mm.client_host,
                                   mm.rebalance_timeout if mm.rebalance_timeout > 0 else mm.session_timeout,
                                   mm.session_timeout, v.protocol_type, [(v.protocol or "", bytes(mm.subscription))],
                                   bytes(mm.assignment))
            g.add(m)
            self._reschedule_heartbeat(g, m)
        if members:
            g.subscribed_topics = g.compute_subscribed_topics()
        if g.leader_id not in g.members:
            g.leader_id = next(iter(g.members), None)
        return g

    # ------------------------------------------------------------------ persistence
    def _group_record_value(self, group: ClassicGroup, assignment: dict[str, bytes]):
        members = []
        for m in group.members.values():
            members.append(MemberMetadata(
                member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id or "",
                client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms, subscription=m.metadata(group.protocol_name),
                assignment=assignment.get(m.member_id, b"")))
        return new_group_metadata_value(
            protocol_type=group.protocol_type or "", generation=group.generation_id,
            protocol=group.protocol_name, leader=group.leader_id if members else None,
            current_state_timestamp=group.state_timestamp if group.state_timestamp is not None else -1,
            members=members)

    def _store_group(self, group: ClassicGroup, assignment: dict[str, bytes]) -> None:
        """Append the group's metadata record; raises KafkaError (already mapped for clients)."""
        value = group_metadata_value(self._group_record_value(group, assignment))
        try:
            self.store.append(group.group_id, [(group_metadata_key(group.group_id), value)])
        except KafkaError as exc:
            raise KafkaError(append_error_to_response(exc.code), exc.message) from None

    def _store_group_best_effort(self, group: ClassicGroup) -> None:
        try:
            self._store_group(group, group.assignment())
        except KafkaError as exc:
            log.warning("failed to write metadata of group %s: %s", group.group_id, exc)

    # ------------------------------------------------------------------ timers
    def _hb_key(self, group_id: str, member_id: str):
        return ("heartbeat", group_id, member_id)

    def _reschedule_heartbeat(self, group: ClassicGroup, member: ClassicGroupMember,
                              timeout_ms: int | None = None) -> None:
        gid, mid = group.group_id, member.member_id
        self.timer.schedule(self._hb_key(gid, mid),
                            member.session_timeout_ms if timeout_ms is None else timeout_ms,
                            lambda: self._expire_heartbeat(gid, mid))

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return
        if group.is_pending_member(member_id):
            log.info("pending member %s of group %s expired", member_id, group_id)
            group.remove(member_id)
            if group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
                self._complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None:
            return
        if not member.has_satisfied_heartbeat():
            log.info("member %s of group %s failed (session timeout), removing it", member_id, group_id)
            self._remove_member_and_update_group(group, member)

    # ------------------------------------------------------------------ JoinGroup
    async def join_group(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                         client_id: str | None, client_host: str, session_timeout_ms: int,
                         rebalance_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]],
                         require_known_member_id: bool, supports_skip_assignment: bool) -> JoinResult:
        """Handle one JoinGroup; returns when the member's join phase ends (possibly after the
        rebalance completes)."""
        if not _group_id_valid(group_id):
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
                self._complete_join_waiter(group, m, JoinResult(Errors.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID))
                self.timer.cancel(self._hb_key(group_id, member_id))
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
                self._update_static_member(group, existing, new_id, waiter, supports_skip_assignment, **a)
            else:
                self._add_member_and_rebalance(group, new_id, waiter, **a)
            return
        if require_known_member_id:
            # v4+: hand the id out first; the member joins again with it (KIP-394).
            group.pending_join_members.add(new_id)
            gid = group.group_id
            self.timer.schedule(self._hb_key(gid, new_id), a["session_timeout_ms"],
                                lambda: self._expire_heartbeat(gid, new_id))
            waiter.complete(JoinResult(Errors.MEMBER_ID_REQUIRED, new_id))
            return
        self._add_member_and_rebalance(group, new_id, waiter, **a)

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
            self._add_member_and_rebalance(group, member_id, waiter, **a)
            return
        try:
            group.validate_member(member_id, a["group_instance_id"])
        except KafkaError as exc:
            waiter.complete(JoinResult(exc.error, member_id))
            return
        member = group.members[member_id]
        protocols = a["protocols"]
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, waiter, **a)
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.matches(protocols):
                # The member lost its JoinGroup response: answer again for this generation.
                waiter.complete(self._join_result(group, member_id, include_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, waiter, **a)
        elif group.is_in(GroupState.STABLE):
            if group.is_leader(member_id) or not member.matches(protocols):
                # A leader's JoinGroup forces a rebalance (it may have seen metadata change).
                self._update_member_and_rebalance(group, member, waiter, **a)
            else:
                waiter.complete(self._join_result(group, member_id, include_members=False))
        else:
            waiter.complete(JoinResult(Errors.UNKNOWN_MEMBER_ID, member_id))

    def _join_result(self, group: ClassicGroup, member_id: str, include_members: bool,
                     skip_assignment: bool = False) -> JoinResult:
        return JoinResult(Errors.NONE, member_id, group.generation_id, group.protocol_type, group.protocol_name,
                          group.leader_id or "", skip_assignment,
                          group.current_member_metadata() if include_members else [])

    def _add_member_and_rebalance(self, group: ClassicGroup, member_id: str, waiter: Waiter, **a) -> None:
        member = ClassicGroupMember(member_id, a["group_instance_id"], a["client_id"], a["client_host"],
                                    a["rebalance_timeout_ms"], a["session_timeout_ms"], a["protocol_type"],
                                    list(a["protocols"]))
        member.is_new = True
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.previous_state is GroupState.EMPTY:
            group.new_member_added = True
        group.add(member, waiter)
        # A new member cannot heartbeat while parked: bound its wait instead.
        self._reschedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance_or_complete_join(group)

    def _update_member_and_rebalance(self, group: ClassicGroup, member: ClassicGroupMember, waiter: Waiter,
                                     **a) -> None:
        group.update_member(member, list(a["protocols"]), a["rebalance_timeout_ms"], a["session_timeout_ms"], waiter)
        self._maybe_prepare_rebalance_or_complete_join(group)

    def _update_static_member(self, group: ClassicGroup, old_id: str, new_id: str, waiter: Waiter,
                              supports_skip_assignment: bool, **a) -> None:
        """A known group.instance.id joined with an unknown member id (a restarted static member)."""
        instance_id = a["group_instance_id"]
        current_leader = group.leader_id
        new = group.replace_static_member(instance_id, old_id, new_id)
        self.timer.cancel(self._hb_key(group.group_id, old_id))
        self._reschedule_heartbeat(group, new)
        old_protocols = list(new.protocols)
        old_rebalance, old_session = new.rebalance_timeout_ms, new.session_timeout_ms
        group.update_member(new, list(a["protocols"]), a["rebalance_timeout_ms"], a["session_timeout_ms"], waiter)
        if group.is_in(GroupState.STABLE):
            if group.protocol_name == group.select_protocol():
                # Same protocol: no rebalance, persist the new member id and hand back the
                # current generation (the leader skips the assignment from v9 on).
                try:
                    self._store_group(group, group.assignment())
                except KafkaError as exc:
                    group.update_member(new, old_protocols, old_rebalance, old_session, None)
                    old = group.replace_static_member(instance_id, new_id, old_id)
                    self._reschedule_heartbeat(group, old)
                    waiter.complete(JoinResult(exc.error, UNKNOWN_MEMBER_ID, group.generation_id,
                                               group.protocol_type, group.protocol_name, current_leader or ""))
                    return
                if supports_skip_assignment:
                    is_leader = group.is_leader(new_id)
                    result = self._join_result(group, new_id, include_members=is_leader, skip_assignment=is_leader)
                else:
                    result = JoinResult(Errors.NONE, new_id, group.generation_id, group.protocol_type,
                                        group.protocol_name, current_leader or "")
                self._complete_join_waiter(group, new, result)
            else:
                self._maybe_prepare_rebalance_or_complete_join(group)
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group)
        else:
            self._maybe_complete_join_phase(group)

    def _complete_join_waiter(self, group: ClassicGroup, member: ClassicGroupMember, result: JoinResult) -> bool:
        if member.join_waiter is None:
            return False
        member.join_waiter.complete(result)
        member.join_waiter = None
        group.num_awaiting_join -= 1
        return True

    # ------------------------------------------------------------------ rebalance
    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group)
        else:
            self._maybe_complete_join_phase(group)

    def _prepare_rebalance(self, group: ClassicGroup) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, Errors.REBALANCE_IN_PROGRESS)
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
                self._complete_join(group)
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
            self._complete_join(group)

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        if not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        if group.previous_state is GroupState.EMPTY:
            return  # the initial rebalance completes on its delay
        if group.has_all_members_joined():
            self._complete_join(group)

    def _complete_join_by_id(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and group.is_in(GroupState.PREPARING_REBALANCE):
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        gid = group.group_id
        self.timer.cancel(("join", gid))
        for m in [m for m in group.not_yet_rejoined() if not m.is_static]:
            log.info("member %s of group %s did not rejoin in time, removing it", m.member_id, gid)
            group.remove(m.member_id)
            self.timer.cancel(self._hb_key(gid, m.member_id))
        if group.is_in(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait for session timeouts to clear the group.
            self.timer.schedule(("join", gid), group.rebalance_timeout_ms(), lambda: self._complete_join_by_id(gid))
            return
        group.init_next_generation()
        if group.is_in(GroupState.EMPTY):
            log.info("group %s with generation %d is now empty", gid, group.generation_id)
            self._store_group_best_effort(group)
            return
        log.info("stabilized group %s generation %d (%s) with %d members", gid, group.generation_id,
                 group.protocol_name, len(group.members))
        for m in list(group.members.values()):
            result = self._join_result(group, m.member_id, include_members=group.is_leader(m.member_id))
            self._complete_join_waiter(group, m, result)
            self._reschedule_heartbeat(group, m)
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
                self.timer.cancel(self._hb_key(group_id, mid))
            self._prepare_rebalance(group)

    def _remove_member(self, group: ClassicGroup, member: ClassicGroupMember) -> None:
        """Drop ``member`` and its heartbeat deadline. A parked JoinGroup/SyncGroup of the
        member gets UNKNOWN_MEMBER_ID, so that a live client simply joins again."""
        self._complete_join_waiter(group, member, JoinResult(Errors.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID))
        if member.sync_waiter is not None:
            member.sync_waiter.complete(SyncResult(Errors.UNKNOWN_MEMBER_ID))
            member.sync_waiter = None
        self.timer.cancel(self._hb_key(group.group_id, member.member_id))
        group.remove(member.member_id)

    def _remove_member_and_update_group(self, group: ClassicGroup, member: ClassicGroupMember) -> None:
        self._remove_member(group, member)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group)
        elif group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
            self._complete_join(group)

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup, error: Errors) -> None:
        for m in group.members.values():
            m.assignment = b""
        self._propagate_assignment(group, error)

    def _set_and_propagate_assignment(self, group: ClassicGroup, assignment: dict[str, bytes]) -> None:
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
                self._reschedule_heartbeat(group, m)

    # ------------------------------------------------------------------ SyncGroup
    async def sync_group(self, *, group_id: str, generation_id: int, member_id: str,
                         group_instance_id: str | None, protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes]) -> SyncResult:
        if not _group_id_valid(group_id):
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
            self._remove_pending_sync_member(group, member_id)
            return SyncResult(Errors.NONE, member.assignment, group.protocol_type, group.protocol_name)
        # CompletingRebalance: park until the leader's assignment is stored.
        waiter = Waiter()
        if member.sync_waiter is not None:
            member.sync_waiter.complete(SyncResult(Errors.REBALANCE_IN_PROGRESS))
        member.sync_waiter = waiter
        self._remove_pending_sync_member(group, member_id)
        if group.is_leader(member_id):
            full = {mid: assignments.get(mid, b"") for mid in group.members}
            try:
                self._store_group(group, full)
            except KafkaError as exc:
                if group.is_in(GroupState.COMPLETING_REBALANCE) and group.generation_id == generation_id:
                    self._reset_and_propagate_assignment_error(group, exc.error)
                    self._maybe_prepare_rebalance_or_complete_join(group)
            else:
                if group.is_in(GroupState.COMPLETING_REBALANCE) and group.generation_id == generation_id:
                    self._set_and_propagate_assignment(group, full)
                    group.transition_to(GroupState.STABLE)
        return await waiter.wait()

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE) or not group.pending_sync_members:
            self.timer.cancel(("sync", group.group_id))

    # ------------------------------------------------------------------ Heartbeat
    def heartbeat(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> Errors:
        if not _group_id_valid(group_id):
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
        self._reschedule_heartbeat(group, group.members[member_id])
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return Errors.REBALANCE_IN_PROGRESS   # the member must rejoin
        return Errors.NONE

    # ------------------------------------------------------------------ LeaveGroup
    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[Errors, list[Errors]]:
        """``members`` are ``(member_id, group_instance_id)``; returns the top-level error and
        one error per member."""
        if not _group_id_valid(group_id):
            return Errors.INVALID_GROUP_ID, []
        group = self.groups.get(group_id)
        if group is None:
            return Errors.UNKNOWN_MEMBER_ID, []
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
                self.timer.cancel(self._hb_key(group_id, member_id))
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
                self._maybe_prepare_rebalance_or_complete_join(group)
            elif group.is_in(GroupState.PREPARING_REBALANCE):
                self._maybe_complete_join_phase(group)
        return Errors.NONE, errors

    def _remove_current_member(self, group: ClassicGroup, member_id: str) -> None:
        log.info("member %s left group %s", member_id, group.group_id)
        self._remove_member(group, group.members[member_id])

    # ------------------------------------------------------------------ Describe / List
    def describe_group(self, group_id: str, api_version: int) -> DescribedGroup:
        if not _group_id_valid(group_id):
            return DescribedGroup(group_id, Errors.INVALID_GROUP_ID, "", "", "", [])
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            if api_version >= 6:   # KIP-1043
                return DescribedGroup(group_id, Errors.GROUP_ID_NOT_FOUND, GroupState.DEAD.value, "", "", [],
                                      f"Group {group_id} not found.")
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

    # ------------------------------------------------------------------ OffsetCommit
    def commit_offsets(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                       generation_id: int, retention_time_ms: int,
                       offsets: list[tuple[str, int, int, int, str | None]],
                       api_version: int) -> dict[tuple[str, int], Errors]:
        """Commit ``(topic, partition, offset, leader_epoch, metadata)`` entries; returns the
        error per partition. The entries are durable in ``__consumer_offsets`` before this
        returns NONE for them."""
        keys = [(t, p) for t, p, *_ in offsets]

        def all_(e: Errors) -> dict:
            return {k: e for k in keys}

        if not _group_id_valid(group_id):
            return all_(Errors.INVALID_GROUP_ID)
        group = self.groups.get(group_id)
        created = False
        if group is None:
            if generation_id < 0:
                # Offsets of a "simple" group (no group management): accepted.
                group = ClassicGroup(group_id)
                created = True
            else:
                return all_(Errors.GROUP_ID_NOT_FOUND if api_version >= 9 else Errors.ILLEGAL_GENERATION)
        try:
            self._validate_offset_commit(group, member_id, group_instance_id, generation_id, transactional=False)
        except KafkaError as exc:
            return all_(exc.error)
        if group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE) and member_id in group.members:
            # With the classic protocol a commit also keeps the member's session alive.
            self._reschedule_heartbeat(group, group.members[member_id])
        result: dict[tuple[str, int], Errors] = {}
        to_write: list[tuple[str, int, OffsetAndMetadata]] = []
        now = now_ms()
        max_md = self._cfg("offset.metadata.max.bytes")
        expire = now + retention_time_ms if retention_time_ms != -1 else None
        for topic, partition, offset, leader_epoch, metadata in offsets:
            if metadata is not None and len(metadata) > max_md:
                result[(topic, partition)] = Errors.OFFSET_METADATA_TOO_LARGE
                continue
            to_write.append((topic, partition, OffsetAndMetadata(offset, leader_epoch, metadata or "", now, expire)))
        if to_write:
            records = [(offset_commit_key(group_id, t, p), offset_commit_value(om)) for t, p, om in to_write]
            try:
                self.store.append(group_id, records)
            except KafkaError as exc:
                err = offset_append_error_to_response(exc.code)
                for t, p, _ in to_write:
                    result[(t, p)] = err
                return result
            if created:
                self.groups[group_id] = group
            cache = self.offsets.setdefault(group_id, {})
            for t, p, om in to_write:
                cache[(t, p)] = om
                result[(t, p)] = Errors.NONE
        elif created and not result:
            self.groups[group_id] = group
        return result

    def _validate_offset_commit(self, group: ClassicGroup, member_id: str, instance_id: str | None,
                                generation_id: int, *, transactional: bool) -> None:
        """Kafka's ``ClassicGroup.validateOffsetCommit``."""
        if group.is_in(GroupState.DEAD):
            raise KafkaError(Errors.COORDINATOR_NOT_AVAILABLE)
        if generation_id < 0 and group.is_in(GroupState.EMPTY):
            return
        if generation_id >= 0 or member_id or instance_id is not None:
            group.validate_member(member_id, instance_id)
            if generation_id != group.generation_id:
                raise KafkaError(Errors.ILLEGAL_GENERATION)
        elif not transactional and not group.is_in(GroupState.EMPTY):
            raise KafkaError(Errors.UNKNOWN_MEMBER_ID)
        if not transactional and group.is_in(GroupState.COMPLETING_REBALANCE):
            raise KafkaError(Errors.REBALANCE_IN_PROGRESS)

    # ------------------------------------------------------------------ OffsetFetch
    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None,
                      require_stable: bool) -> tuple[Errors, list[tuple[str, list[tuple[int, int, int, str, Errors]]]]]:
        """Committed offsets of ``group_id``: ``topics`` None means every committed partition.
        Returns ``(group error, [(topic, [(partition, offset, leader_epoch, metadata, error)])])``;
        an unknown partition reads offset -1 without error, as in Kafka."""
        if not _group_id_valid(group_id):
            return Errors.INVALID_GROUP_ID, []
        group = self.groups.get(group_id)
        cache = self.offsets.get(group_id, {}) if group is not None and not group.is_in(GroupState.DEAD) else {}
        out = []
        if topics is None:
            topics = list(by_topic(sorted(cache)).items())
        for topic, partitions in topics:
            parts = []
            for p in partitions:
                if require_stable and self.has_pending_txn_offsets(group_id, topic, p):
                    parts.append((p, INVALID_OFFSET, -1, "", Errors.UNSTABLE_OFFSET_COMMIT))
                    continue
                om = cache.get((topic, p))
                if om is None:
                    parts.append((p, INVALID_OFFSET, -1, "", Errors.NONE))
                else:
                    parts.append((p, om.offset, om.leader_epoch, om.metadata, Errors.NONE))
            out.append((topic, parts))
        return Errors.NONE, out

    # ------------------------------------------------------------------ deletions
    def delete_group(self, group_id: str) -> Errors:
        """DeleteGroups for one group: only an Empty group (or one with just offsets) can go;
        its offsets and metadata get tombstones (Kafka's ``validateDeleteGroup``)."""
        if not _group_id_valid(group_id):
            return Errors.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return Errors.GROUP_ID_NOT_FOUND
        if not group.is_in(GroupState.EMPTY):
            return Errors.NON_EMPTY_GROUP
        keys = list(self.offsets.get(group_id, {}))
        records = [(offset_commit_key(group_id, t, p), None) for t, p in keys]
        records.append((group_metadata_key(group_id), None))
        try:
            self.store.append(group_id, records)
        except KafkaError as exc:
            return append_error_to_response(exc.code)
        self.offsets.pop(group_id, None)
        group.transition_to(GroupState.DEAD)
        del self.groups[group_id]
        for m in list(group.pending_join_members):
            self.timer.cancel(self._hb_key(group_id, m))
        return Errors.NONE

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> tuple[Errors, dict]:
        """OffsetDelete: ``(group error, {(topic, partition): error})``. A consumer group that is
        not Empty keeps the offsets of topics it subscribes to (GROUP_SUBSCRIBED_TO_TOPIC); any
        other non-empty group refuses (NON_EMPTY_GROUP)."""
        if not _group_id_valid(group_id):
            return Errors.INVALID_GROUP_ID, {}
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return Errors.GROUP_ID_NOT_FOUND, {}
        if not group.is_in(GroupState.EMPTY) and group.protocol_type != "consumer":
            return Errors.NON_EMPTY_GROUP, {}
        result = {}
        cache = self.offsets.get(group_id, {})
        gone = []
        for t, p in partitions:
            if not group.is_in(GroupState.EMPTY) and group.is_subscribed_to(t):
                result[(t, p)] = Errors.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            result[(t, p)] = Errors.NONE
            if (t, p) in cache:
                gone.append((t, p))
        if gone:
            try:
                self.store.append(group_id, [(offset_commit_key(group_id, t, p), None) for t, p in gone])
            except KafkaError as exc:
                return append_error_to_response(exc.code), {}
            for k in gone:
                cache.pop(k, None)
            if not cache:
                self.offsets.pop(group_id, None)
        return Errors.NONE, result

    def on_topics_deleted(self, topics: set[str]) -> None:
        """Drop (with tombstones) every committed offset of deleted topics, as Kafka's
        ``GroupCoordinator.onPartitionsDeleted`` does; call it from DeleteTopics."""
        for group_id in list(self.offsets):
            cache = self.offsets[group_id]
            gone = [k for k in cache if k[0] in topics]
            if not gone:
                continue
            try:
                self.store.append(group_id, [(offset_commit_key(group_id, t, p), None) for t, p in gone])
            except KafkaError as exc:
                log.warning("failed to delete offsets of deleted topics for group %s: %s", group_id, exc)
                continue
            for k in gone:
                cache.pop(k, None)
            if not cache:
                del self.offsets[group_id]

    # ------------------------------------------------------------------ transactional offsets
    def has_pending_txn_offsets(self, group_id: str, topic: str, partition: int) -> bool:
        """Does an open transaction hold an offset of this partition for this group?
        (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT then.)"""
        key = (topic, partition)
        for by_group in self.pending_txn_offsets.values():
            g = by_group.get(group_id)
            if g is not None and key in g:
                return True
        return False

    def validate_txn_offset_commit(self, group_id: str, member_id: str | None, generation_id: int,
                                   group_instance_id: str | None = None) -> Errors:
        """Group checks of a TxnOffsetCommit (Kafka's ``validateTransactionalOffsetCommit``):
        a missing group is fine with generation -1 (it is created), ILLEGAL_GENERATION otherwise;
        then the member/generation rules of OffsetCommit, without the group-state ones."""
        if not _group_id_valid(group_id):
            return Errors.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None:
            return Errors.NONE if generation_id < 0 else Errors.ILLEGAL_GENERATION
        try:
            self._validate_offset_commit(group, member_id or "", group_instance_id, generation_id, transactional=True)
        except KafkaError as exc:
            return exc.error
        return Errors.NONE

    def stage_txn_offsets(self, group_id: str, producer_id: int, offsets: dict, *,
                          producer_epoch: int | None = None) -> Errors:
        """Write transactional offset commits (TxnOffsetCommit) and keep them pending.

        ``offsets`` maps ``(topic, partition)`` to an :class:`OffsetAndMetadata` or a dict with
        ``offset``, ``leader_epoch``, ``metadata``. They are appended as a transactional batch of
        the producer to the group's ``__consumer_offsets`` partition (so that a restart replays
        them against the markers) and become committed offsets only when
        :meth:`complete_txn_offsets` sees the COMMIT. Returns NONE or the error for every
        partition. ``producer_epoch`` should be the request's; without it the epoch the
        partition last saw for the producer is used (no zombie fencing then)."""
        if not offsets:
            return Errors.NONE
        now = now_ms()
        staged: dict[tuple[str, int], OffsetAndMetadata] = {}
        max_md = self._cfg("offset.metadata.max.bytes")
        for tp, o in offsets.items():
            if not isinstance(o, OffsetAndMetadata):
                o = OffsetAndMetadata(o["offset"], o.get("leader_epoch", -1), o.get("metadata") or "", now)
            elif o.commit_timestamp < 0:
                o = OffsetAndMetadata(o.offset, o.leader_epoch, o.metadata, now, o.expire_timestamp)
            if o.metadata is not None and len(o.metadata) > max_md:
                return Errors.OFFSET_METADATA_TOO_LARGE
            staged[tuple(tp)] = o
        if producer_epoch is None:
            producer_epoch = self.store.producer_epoch(group_id, producer_id)
        records = [(offset_commit_key(group_id, t, p), offset_commit_value(om)) for (t, p), om in staged.items()]
        try:
            self.store.append(group_id, records, producer_id=producer_id, producer_epoch=producer_epoch,
                              transactional=True)
        except KafkaError as exc:
            return offset_append_error_to_response(exc.code)
        if group_id not in self.groups:
            self.groups[group_id] = ClassicGroup(group_id)
        self.pending_txn_offsets.setdefault(producer_id, {}).setdefault(group_id, {}).update(staged)
        return Errors.NONE

    def complete_txn_offsets(self, producer_id: int, commit: bool) -> None:
        """The transaction's marker reached ``__consumer_offsets``: on COMMIT its offsets become
        the committed ones, on ABORT they are dropped. (The caller writes the marker itself,
        with ``PartitionLog.append_control_marker``, on the groups' partitions.)"""
        staged = self.pending_txn_offsets.pop(producer_id, None)
        if not staged or not commit:
            return
        for group_id, offs in staged.items():
            self.offsets.setdefault(group_id, {}).update(offs)

    # ------------------------------------------------------------------ offset retention
    @staticmethod
    def _expiration_base(group: ClassicGroup | None):
        """Kafka's ``ClassicGroup.offsetExpirationCondition``: from which timestamp the
        retention of an offset counts, or None when the group's offsets do not expire now."""
        if group is None or group.protocol_type is None:
            return lambda om: om.commit_timestamp          # simple group
        if group.is_in(GroupState.EMPTY):
            ts = group.state_timestamp
            return lambda om: ts if ts is not None else om.commit_timestamp
        if group.protocol_type == "consumer" and group.subscribed_topics is not None \
                and group.is_in(GroupState.STABLE):
            return lambda om: om.commit_timestamp
        return None

    def _schedule_offset_expiration(self) -> None:
        self.timer.schedule(("offsets-expiration",), self._cfg("offsets.retention.check.interval.ms"),
                            self._expire_offsets)

    def _expire_offsets(self) -> None:
        """Delete offsets past ``offsets.retention.minutes`` (Kafka's rules: an Empty group's
        offsets expire that long after it became empty; a Stable consumer group's offsets of
        topics it no longer subscribes to, that long after their commit; a simple group's
        that long after their commit; an explicit v2-v4 retention wins), then drop Empty
        groups left without offsets (group tombstone)."""
        try:
            self.expire_offsets_now(now_ms())
        finally:
            self._schedule_offset_expiration()

    def expire_offsets_now(self, now: int) -> int:
        retention = self.offsets_retention_ms
        removed = 0
        for group_id in list(self.offsets):
            group = self.groups.get(group_id)
            cache = self.offsets[group_id]
            base = self._expiration_base(group)
            if base is None:
                continue
            expired = []
            for (t, p), om in cache.items():
                if group is not None and group.is_subscribed_to(t):
                    continue
                if self.has_pending_txn_offsets(group_id, t, p):
                    continue
                if om.expire_timestamp is not None:
                    if now >= om.expire_timestamp:
                        expired.append((t, p))
                elif now - base(om) >= retention:
                    expired.append((t, p))
            if not expired:
                continue
            try:
                self.store.append(group_id, [(offset_commit_key(group_id, t, p), None) for t, p in expired])
            except KafkaError as exc:
                log.warning("failed to expire offsets of group %s: %s", group_id, exc)
                continue
            for k in expired:
                cache.pop(k, None)
            removed += len(expired)
            if not cache:
                del self.offsets[group_id]
        for group_id, group in list(self.groups.items()):
            if group.is_in(GroupState.EMPTY) and group_id not in self.offsets and not group.members \
                    and not any(group_id in g for g in self.pending_txn_offsets.values()):
                try:
                    self.store.append(group_id, [(group_metadata_key(group_id), None)])
                except KafkaError as exc:
                    log.warning("failed to delete group %s: %s", group_id, exc)
                    continue
                group.transition_to(GroupState.DEAD)
                del self.groups[group_id]
        return removed
