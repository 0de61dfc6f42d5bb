"""KIP-848 consumer groups: ConsumerGroupHeartbeat and ConsumerGroupDescribe (Kafka's
``GroupMetadataManager.consumerGroupHeartbeat`` and its helpers).

One heartbeat does, in Kafka's order:

1. validate the request (``throwIfConsumerGroupHeartbeatRequestIsInvalid``: INVALID_REQUEST
   with Kafka's messages, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION);
2. epoch -1 / -2: the member leaves (fenced out, the group epoch goes up) or, static, leaves
   for now (epoch -2: its assignment stays for the instance's next member);
3. find or create the group (epoch 0 creates it; an Empty classic group -- offsets only -- is
   replaced; another group type reads GROUP_ID_NOT_FOUND) and the member (epoch 0 creates it;
   a static member takes over its instance's previous member, UNRELEASED_INSTANCE_ID while that
   one has not left; an unknown member reads UNKNOWN_MEMBER_ID, a wrong epoch
   FENCED_MEMBER_EPOCH);
4. update the member (subscription, assignor, rebalance timeout, rack); a change -- or a change
   of the subscribed topics' partitions -- bumps the group epoch;
5. if the group epoch is ahead of the target assignment's, run the assignor;
6. reconcile the member one step towards its target (:mod:`.consumer_group`), arming its
   rebalance timeout while it has partitions to revoke;
7. restart its session timeout and answer: member id, epoch, heartbeat interval, and the
   assignment when the request was a full one or the assignment changed.

Members whose session times out, or who do not revoke within their rebalance timeout, are
fenced as if they had left. Consumer groups live beside the classic ones (one group id space).
After each change the group's records (:mod:`.consumer_group_records`) that changed are
written to ``__consumer_offsets`` before the answer, and replayed at load (:meth:`load`).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from ..features import SUPPORTED_FEATURES
from ..protocol.errors import Errors, KafkaError
from .assignors import ASSIGNORS, MemberSpec
from . import consumer_group_records as records
from .consumer_group import (
    JOIN_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, ConsumerGroup,
    ConsumerGroupMember, MemberState, copy_assignment,
)
from .group_metadata import GroupState
from .group_store import OffsetsTopic, append_error_to_response
from .group_timer import CoordinatorTimer

if TYPE_CHECKING:
    from ..cluster.topics import TopicRegistry
    from ..config import BrokerConfig
    from .group_metadata_manager import GroupMetadataManager

log = logging.getLogger("kconform.broker.group.consumer")

#: KIP-848's feature: level 1 is the consumer protocol (Kafka 4.3.1 supports 0-1, finalizes 1).
SUPPORTED_FEATURES["group.version"] = (0, 1)


@dataclass(slots=True)
class HeartbeatResult:
    error: Errors = Errors.NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: dict[bytes, set[int]] | None = None


@dataclass(slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: list[str] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    owned: list[tuple[bytes, list[int]]] | None
    client_id: str
    client_host: str
    api_version: int


def _invalid(msg: str) -> KafkaError:
    return KafkaError(Errors.INVALID_REQUEST, msg)


class ConsumerGroupManager:
    def __init__(self, config: BrokerConfig, topics: TopicRegistry, timer: CoordinatorTimer,
                 classic: GroupMetadataManager, store: OffsetsTopic):
        self.config = config
        self.store = store
        self.topics = topics
        self.timer = timer
        self.classic = classic
        self.groups: dict[str, ConsumerGroup] = {}

    # ------------------------------------------------------------------ configuration
    @property
    def session_timeout_ms(self) -> int:
        return self.config.int("group.consumer.session.timeout.ms")

    @property
    def heartbeat_interval_ms(self) -> int:
        return self.config.int("group.consumer.heartbeat.interval.ms")

    @property
    def max_size(self) -> int:
        return self.config.int("group.consumer.max.size")

    @property
    def assignment_interval_ms(self) -> int:
        return self.config.int("group.consumer.assignment.interval.ms")

    @property
    def assignor_names(self) -> list[str]:
        return [n.strip() for n in self.config.str("group.consumer.assignors").split(",") if n.strip()]

    # ------------------------------------------------------------------ ConsumerGroupHeartbeat
    def heartbeat(self, r: HeartbeatRequest) -> HeartbeatResult:
        try:
            self._validate(r)
            if r.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                result = self._leave(r)
            else:
                result = self._heartbeat(r)
        except KafkaError as exc:
            created = self.groups.get(r.group_id)
            if created is not None and created.group_epoch == 0 and not created.members:
                del self.groups[r.group_id]       # the failed join created it: nothing of it stays
            return HeartbeatResult(exc.error, exc.message, member_epoch=0)
        group = self.groups.get(r.group_id)
        if group is not None:
            error = self._persist(group)
            if error is not Errors.NONE:
                return HeartbeatResult(error, member_epoch=0)
        return result

    # ------------------------------------------------------------------ records
    def _persist(self, group: ConsumerGroup) -> Errors:
        """Write the group's records that changed since the last write, tombstones for the keys
        gone (Kafka writes the records of each change in one batch before answering)."""
        now = records.group_snapshot(group)
        delta = [(k, v) for k, v in now.items() if group.persisted.get(k) != v]
        delta += [(k, None) for k in group.persisted if k not in now]
        if not delta:
            return Errors.NONE
        try:
            self.store.append(group.group_id, delta)
        except KafkaError as exc:
            log.warning("group %s: failed to write its records: %s", group.group_id, exc)
            return append_error_to_response(exc.error)
        group.persisted = now
        return Errors.NONE

    def load(self, by_group: dict[str, dict[bytes, records.ConsumerGroupRecord]]) -> None:
        """The consumer groups of ``__consumer_offsets`` (the last record of every key): each
        member gets a fresh session timeout (and its rebalance timeout if it was revoking)."""
        for gid, group in records.groups_from_records(by_group).items():
            self.groups[gid] = group
            group.subscription_metadata = self._subscription_metadata(group.members.values())
            for m in group.members.values():
                self._schedule_session_timeout(gid, m.member_id)
                if m.state is MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance_timeout(gid, m)



    def _validate(self, r: HeartbeatRequest) -> None:
        """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``, in its order (measured on
        4.3.1: the member id is checked before the group id; from v1 the client chooses its
        member id, KIP-1082, so it may be empty only in a v0 join)."""
        if r.api_version >= 1 or r.member_epoch > 0 or r.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if r.member_id == "":
                raise _invalid("MemberId can't be empty.")
        if r.group_id == "":
            raise _invalid("GroupId can't be empty.")
        if r.instance_id == "":
            raise _invalid("InstanceId can't be empty.")
        if r.rack_id == "":
            raise _invalid("RackId can't be empty.")
        if r.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            if r.rebalance_timeout_ms == -1:
                raise _invalid("RebalanceTimeoutMs must be provided in first request.")
            if r.owned is None or r.owned:
                raise _invalid("TopicPartitions must be empty when (re-)joining.")
            # An empty list is a subscription too (measured on 4.3.1: the member joins, unassigned).
            if r.subscribed_topic_names is None and r.subscribed_topic_regex is None:
                raise _invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if r.member_id == "":
                raise _invalid("MemberId can't be empty.")
            if r.instance_id is None:
                raise _invalid("InstanceId can't be null.")
        elif r.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise _invalid("MemberEpoch is invalid.")
        if r.server_assignor is not None and r.server_assignor not in self.assignor_names:
            raise KafkaError(Errors.UNSUPPORTED_ASSIGNOR,
                             f"ServerAssignor {r.server_assignor} is not supported. Supported assignors: "
                             f"{', '.join(self.assignor_names)}.")
        if r.subscribed_topic_regex:
            try:
                re.compile(r.subscribed_topic_regex)
            except re.error as exc:
                raise KafkaError(Errors.INVALID_REGULAR_EXPRESSION,
                                 f"SubscribedTopicRegex `{r.subscribed_topic_regex}` is not a valid regular "
                                 f"expression: {exc}.") from None

    def group(self, group_id: str) -> ConsumerGroup:
        """Kafka's ``consumerGroup(groupId)`` (ConsumerGroupDescribe, leaving)."""
        g = self.groups.get(group_id)
        if g is None:
            if self.classic.group(group_id) is not None:
                raise KafkaError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            raise KafkaError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        return g

    def _get_or_create_group(self, group_id: str, create: bool) -> ConsumerGroup:
        """Kafka's ``getOrMaybeCreateConsumerGroup`` (its own not-found message, measured)."""
        g = self.groups.get(group_id)
        if g is None and not create and self.classic.group(group_id) is None:
            raise KafkaError(Errors.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        if g is not None or not create:
            return self.group(group_id)
        classic = self.classic.group(group_id)
        if classic is not None:
            if classic.members or not classic.is_in(GroupState.EMPTY):
                raise KafkaError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            # An Empty classic group (offsets only) gives way to the consumer group, keeping its
            # offsets (Kafka's maybeDeleteEmptyClassicGroup).
            self.classic.forget_empty_group(group_id)
        g = self.groups[group_id] = ConsumerGroup(group_id)
        return g

    def _heartbeat(self, r: HeartbeatRequest) -> HeartbeatResult:
        joining = r.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        group = self._get_or_create_group(r.group_id, joining)
        member_id = r.member_id or str(uuid.uuid4())
        if len(group.members) >= self.max_size and member_id not in group.members:
            raise KafkaError(Errors.GROUP_MAX_SIZE_REACHED,
                             f"The consumer group has reached its maximum capacity of {self.max_size} members.")
        old = self._member_for(group, member_id, r, joining)
        member = dataclasses.replace(old, assigned=copy_assignment(old.assigned),
                                     pending_revocation=copy_assignment(old.pending_revocation),
                                     subscribed_topic_names=list(old.subscribed_topic_names))
        is_new = member.member_id not in group.members
        if r.instance_id is not None:
            member.instance_id = r.instance_id
        if r.rack_id is not None:
            member.rack_id = r.rack_id
        if r.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = r.rebalance_timeout_ms
        if r.server_assignor is not None:
            member.server_assignor = r.server_assignor
        if r.subscribed_topic_names is not None:
            member.subscribed_topic_names = list(r.subscribed_topic_names)
        if r.subscribed_topic_regex is not None:
            member.subscribed_topic_regex = r.subscribed_topic_regex or None
        member.client_id, member.client_host = r.client_id, r.client_host

        # Kafka's rule: a member's subscribed names or regex changing bumps the group epoch (a new
        # member counts as changing from nothing); its assignor or rack alone do not. A new group
        # first leaves epoch 0 on its own (measured on 4.3.1: its first member gets epoch 2 when
        # it subscribes to a topic, 1 when it subscribes to nothing).
        if group.group_epoch == 0:
            group.group_epoch = 1
        bump = (member.subscribed_topic_names, member.subscribed_topic_regex) != \
            (old.subscribed_topic_names, old.subscribed_topic_regex)
        members_after = {**group.members, member.member_id: member}
        metadata = self._subscription_metadata(members_after.values())
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bump = True
        if bump:
            group.group_epoch += 1
            log.info("group %s: epoch %d", group.group_id, group.group_epoch)
        group.update_member(old if not is_new else None, member)

        # Kafka 4.3 recomputes a group's target assignment at most once per
        # group.consumer.assignment.interval.ms (measured on 4.3.1: a member joining 0.1 s after
        # the last assignment is answered with the old target, the group reads Assigning, and the
        # next heartbeat a second later gets the new one); the first one is immediate.
        if group.group_epoch > group.assignment_epoch and (
                group.last_assignment_s is None
                or (trio.current_time() - group.last_assignment_s) * 1000 >= self.assignment_interval_ms):
            self._update_target_assignment(group)
        self._reconcile(group, member, r.owned)
        member = group.members[member.member_id]
        self._schedule_session_timeout(group.group_id, member.member_id)

        full = joining or (r.rebalance_timeout_ms != -1 and r.subscribed_topic_names is not None
                           and r.owned is not None)
        changed = member.assigned != old.assigned
        return HeartbeatResult(member_id=member.member_id, member_epoch=member.member_epoch,
                               heartbeat_interval_ms=self.heartbeat_interval_ms,
                               assignment=member.assigned if full or changed or is_new else None)

    def _member_for(self, group: ConsumerGroup, member_id: str, r: HeartbeatRequest,
                    joining: bool) -> ConsumerGroupMember:
        """The member the heartbeat is for (Kafka's getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember)."""
        if r.instance_id is None:
            existing = group.members.get(member_id)
            if existing is None:
                if not joining:
                    raise KafkaError(Errors.UNKNOWN_MEMBER_ID,
                                     f"Member {member_id} is not a member of group {group.group_id}.")
                return ConsumerGroupMember(member_id)
            if not joining:      # a known member joining again (epoch 0) goes on as it is (measured)
                self._check_epoch(existing, r.member_epoch, r.owned)
            return existing
        static = group.static_member(r.instance_id)
        if joining:
            if static is None:
                existing = group.members.get(member_id)
                return existing if existing is not None else ConsumerGroupMember(member_id, instance_id=r.instance_id)
            # even the instance's own member id, while it has not left (measured on 4.3.1)
            if static.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise KafkaError(Errors.UNRELEASED_INSTANCE_ID,
                                 f"Static member {member_id} with instance id {r.instance_id} cannot join the "
                                 f"group because the instance id is owned by {static.member_id} member.")
            # The instance's new member takes over its previous member and its assignment.
            taken = dataclasses.replace(static, member_id=member_id, member_epoch=0, previous_member_epoch=0,
                                        assigned=copy_assignment(static.assigned), pending_revocation={},
                                        state=MemberState.STABLE)
            target = group.target.pop(static.member_id, None)
            group.remove_member(static.member_id)
            self._cancel_timers(group.group_id, static.member_id)
            if target is not None:
                group.target[member_id] = target
            group.update_member(None, taken)
            return taken
        static = self._static_member(group, r.instance_id, member_id)
        self._check_epoch(static, r.member_epoch, r.owned)
        return static

    @staticmethod
    def _static_member(group: ConsumerGroup, instance_id: str, member_id: str) -> ConsumerGroupMember:
        """The instance's member, which must be ``member_id`` (Kafka's throwIfStaticMemberIsUnknown
        and throwIfInstanceIdIsFenced; the fenced message measured on 4.3.1)."""
        static = group.static_member(instance_id)
        if static is None:
            raise KafkaError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if static.member_id != member_id:
            raise KafkaError(Errors.FENCED_INSTANCE_ID,
                             f"Static member {member_id} with instance id {instance_id} was fenced by member "
                             f"{static.member_id}.")
        return static

    @staticmethod
    def _check_epoch(member: ConsumerGroupMember, epoch: int, owned) -> None:
        """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``: the previous epoch is accepted
        with a subset of the current partitions (the answer bumping it may have been lost)."""
        if epoch > member.member_epoch:
            raise KafkaError(Errors.FENCED_MEMBER_EPOCH,
                             f"The consumer group member has a greater member epoch ({epoch}) than the one known "
                             f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")
        if epoch < member.member_epoch:
            subset = owned is not None and all(p in member.assigned.get(t, ()) for t, ps in owned for p in ps)
            if epoch != member.previous_member_epoch or not subset:
                raise KafkaError(Errors.FENCED_MEMBER_EPOCH,
                                 f"The consumer group member has a smaller member epoch ({epoch}) than the one "
                                 f"known by the group coordinator ({member.member_epoch}). The member must "
                                 "abandon all its partitions and rejoin.")

    def _subscribed_topics(self, member: ConsumerGroupMember) -> set[str]:
        names = {n for n in member.subscribed_topic_names if n in self.topics.topics}
        if member.subscribed_topic_regex:
            pattern = re.compile(member.subscribed_topic_regex)
            names.update(n for n, t in self.topics.topics.items() if not t.internal and pattern.fullmatch(n))
        return names

    def _subscription_metadata(self, members) -> dict[str, tuple[bytes, int]]:
        out = {}
        for m in members:
            for name in self._subscribed_topics(m):
                t = self.topics.topics[name]
                out[name] = (t.topic_id, len(t.partitions))
        return out

    def preferred_assignor(self, group: ConsumerGroup) -> str:
        """The assignor most members asked for (Kafka's ``computePreferredServerAssignor``),
        else the first configured one."""
        counts: dict[str, int] = {}
        for m in group.members.values():
            if m.server_assignor:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if counts:
            return max(counts, key=lambda n: (counts[n], n))
        return self.assignor_names[0]

    def _update_target_assignment(self, group: ConsumerGroup) -> None:
        name = self.preferred_assignor(group)
        ids = {tid: n for tid, n in group.subscription_metadata.values()}
        specs = {}
        for mid, m in group.members.items():
            specs[mid] = MemberSpec({self.topics.topics[n].topic_id for n in self._subscribed_topics(m)},
                                    group.target.get(mid, {}))
        group.target = ASSIGNORS[name].assign(specs, ids)
        group.assignment_epoch = group.group_epoch
        if ids:
            # Only an assignment of some topics starts the interval (measured on 4.3.1: a member
            # subscribing to a topic just after the group's empty first assignment is assigned at once).
            group.last_assignment_s = trio.current_time()
        log.info("group %s: target assignment of epoch %d computed by %s", group.group_id, group.group_epoch, name)

    def _reconcile(self, group: ConsumerGroup, member: ConsumerGroupMember, owned) -> None:
        if member.is_reconciled_to(group.assignment_epoch):
            return
        updated = dataclasses.replace(member, assigned=copy_assignment(member.assigned),
                                      pending_revocation=copy_assignment(member.pending_revocation))
        updated.reconcile(group.assignment_epoch, group.target.get(member.member_id, {}), group.partition_epoch, owned)
        if (updated.state, updated.member_epoch, updated.assigned, updated.pending_revocation) == \
                (member.state, member.member_epoch, member.assigned, member.pending_revocation):
            return
        group.update_member(member, updated)
        if updated.state is MemberState.UNREVOKED_PARTITIONS:
            self._schedule_rebalance_timeout(group.group_id, updated)
        else:
            self.timer.cancel(("consumer-rebalance", group.group_id, member.member_id))

    def _schedule_rebalance_timeout(self, group_id: str, member: ConsumerGroupMember) -> None:
        member_id, epoch = member.member_id, member.member_epoch
        self.timer.schedule(("consumer-rebalance", group_id, member_id), member.rebalance_timeout_ms,
                            lambda: self._rebalance_timeout(group_id, member_id, epoch))

    # ------------------------------------------------------------------ leaving, fencing, timers
    def _leave(self, r: HeartbeatRequest) -> HeartbeatResult:
        group = self.group(r.group_id)
        if r.instance_id is None:
            member = group.member(r.member_id)
        else:
            member = self._static_member(group, r.instance_id, r.member_id)
            if r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # The instance leaves for now: its next member takes the assignment over.
                left = dataclasses.replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                                           previous_member_epoch=member.member_epoch,
                                           assigned=copy_assignment(member.assigned), pending_revocation={})
                group.update_member(member, left)
                self.timer.cancel(("consumer-rebalance", group.group_id, member.member_id))
                log.info("group %s: static member %s (%s) left for now", group.group_id, member.member_id,
                         r.instance_id)
                return HeartbeatResult(member_id=member.member_id, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                                       heartbeat_interval_ms=0)
        log.info("group %s: member %s left", group.group_id, member.member_id)
        self._fence(group, member.member_id)
        return HeartbeatResult(member_id=r.member_id, member_epoch=r.member_epoch, heartbeat_interval_ms=0)

    def _fence(self, group: ConsumerGroup, member_id: str) -> None:
        """Kafka's ``consumerGroupFenceMember``: the member goes, the group epoch goes up."""
        group.remove_member(member_id)
        group.subscription_metadata = self._subscription_metadata(group.members.values())
        group.group_epoch += 1
        self._cancel_timers(group.group_id, member_id)

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        self.timer.cancel(("consumer-session", group_id, member_id))
        self.timer.cancel(("consumer-rebalance", group_id, member_id))

    def _schedule_session_timeout(self, group_id: str, member_id: str) -> None:
        self.timer.schedule(("consumer-session", group_id, member_id), self.session_timeout_ms,
                            lambda: self._session_timeout(group_id, member_id))

    def _session_timeout(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and member_id in group.members:
            log.info("group %s: member %s fenced: the member session expired", group_id, member_id)
            self._fence(group, member_id)
            self._persist(group)

    def _rebalance_timeout(self, group_id: str, member_id: str, epoch: int) -> None:
        group = self.groups.get(group_id)
        m = group.members.get(member_id) if group is not None else None
        if m is not None and m.member_epoch == epoch and m.state is MemberState.UNREVOKED_PARTITIONS:
            log.info("group %s: member %s fenced: it did not revoke its partitions within the rebalance timeout",
                     group_id, member_id)
            self._fence(group, member_id)
            self._persist(group)

    # ------------------------------------------------------------------ what other APIs ask
    def list(self, states: set[str], types: set[str]) -> list[tuple[str, str, str, str]]:
        if types and "consumer" not in types:
            return []
        return [(gid, "consumer", g.state.value, "consumer") for gid, g in self.groups.items()
                if not states or g.state.value.lower() in states]

    def delete(self, group_id: str) -> Errors | None:
        """DeleteGroups for a consumer group (None: not one): only an Empty one can go."""
        g = self.groups.get(group_id)
        if g is None:
            return None
        if g.members:
            return Errors.NON_EMPTY_GROUP
        return Errors.NONE

    def tombstones(self, group_id: str) -> list[tuple[bytes, None]]:
        """The tombstones of every record of the group (DeleteGroups writes them with the
        offsets' in one batch)."""
        g = self.groups.get(group_id)
        return [(k, None) for k in g.persisted] if g is not None else []

    def remove(self, group_id: str) -> None:
        """The group's tombstones are written: it is gone."""
        g = self.groups.pop(group_id, None)
        if g is not None:
            g.dead = True

    def unload(self, group_id: str) -> None:
        g = self.groups.pop(group_id, None)
        if g is not None:
            for mid in g.members:
                self._cancel_timers(group_id, mid)

    def topic_name(self, topic_id: bytes) -> str:
        t = self.topics.by_id.get(topic_id)
        return t.name if t is not None else ""

