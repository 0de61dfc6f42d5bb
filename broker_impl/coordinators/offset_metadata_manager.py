"""Committed offsets of the group coordinator (Kafka's ``OffsetMetadataManager``).

Kafka's group-coordinator module splits a ``__consumer_offsets`` partition's state in two:
``GroupMetadataManager`` runs the groups (who is a member, which generation), and
``OffsetMetadataManager`` keeps what the groups committed. The split is along the records:
offset commits (key versions 0/1) are this module's, group metadata (key version 2) the
group side's. This module owns:

- OffsetCommit / OffsetFetch / OffsetDelete and the offset-commit rules (member, generation
  and group state, as Kafka's ``ClassicGroup.validateOffsetCommit``);
- transactional offsets (TxnOffsetCommit): staged per producer, materialised or dropped by
  the transaction's marker, and the pending check behind RequireStable;
- offset retention, and the tombstones of deleted topics;
- replaying offset records (and the markers that settle transactional ones) at load.

It asks the group side only what :class:`GroupLookup` names: the group of an id, creating
the "simple" group a standalone commit implies, and keeping a committing member alive.
Everything that involves both sides (DeleteGroups, expiring a group once its offsets are
gone, loading) is the facade's, :class:`~.group.GroupCoordinator`, as in Kafka's
``GroupCoordinatorShard``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable, Iterable, Protocol

from ..cluster.topics import by_topic
from ..log import records as rec
from ..protocol.errors import Errors, KafkaError
from .consumer_group import ConsumerGroup
from .group_metadata import ClassicGroup, ClassicGroupMember, GroupState, group_id_valid, now_ms
from .group_records import OffsetAndMetadata, OffsetRecord, offset_commit_key, offset_commit_value
from .group_store import OffsetsTopic, append_error_to_response, offset_append_error_to_response

if TYPE_CHECKING:
    from ..config import BrokerConfig

log = logging.getLogger("kconform.broker.group.offsets")

INVALID_OFFSET = -1

#: One offset to commit, as the OffsetCommit and TxnOffsetCommit handlers pass it:
#: ``(topic, partition, offset, leader_epoch, metadata)``.
OffsetEntry = tuple[str, int, int, int, "str | None"]

TopicPartition = tuple[str, int]


class GroupLookup(Protocol):
    """What the offsets side asks of the group side (the calls Kafka's
    ``OffsetMetadataManager`` makes on ``GroupMetadataManager``)."""

    def group(self, group_id: str) -> ClassicGroup | None:
        """The live group of ``group_id``, None if there is none."""

    def get_or_create_simple_group(self, group_id: str) -> ClassicGroup:
        """The group of ``group_id``; an Empty group without protocol (a "simple" group,
        which only commits offsets) is created if there is none."""

    def reschedule_heartbeat(self, group: ClassicGroup, member: ClassicGroupMember) -> None:
        """Restart the member's session timeout (a classic member's commit is a heartbeat)."""

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """The KIP-848 consumer group of ``group_id``, None if there is none."""


def _long(n: int) -> int:
    """``n`` as a Java long: two's complement, 64 bits."""
    return (n + 2**63) % 2**64 - 2**63


class OffsetMetadataManager:
    def __init__(self, config: BrokerConfig, store: OffsetsTopic, groups: GroupLookup):
        self.config = config
        self.store = store
        self.groups = groups
        #: group -> (topic, partition) -> committed offset
        self.offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        #: Transactional offsets written but not yet committed/aborted (TxnOffsetCommit):
        #: producer id -> group -> (topic, partition) -> offset.
        self.pending_txn_offsets: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = {}
        #: While loading: records of transactional batches not settled by a marker yet.
        self._replay_pending: dict[int, list[OffsetRecord]] = {}

    # ------------------------------------------------------------------ configuration
    @property
    def offsets_retention_ms(self) -> int:
        # Read on every use: a test (or an operator) may change a setting on a running broker.
        return self.config.int("offsets.retention.minutes") * 60 * 1000

    @property
    def retention_check_interval_ms(self) -> int:
        return self.config.int("offsets.retention.check.interval.ms")

    @property
    def metadata_max_bytes(self) -> int:
        return self.config.int("offset.metadata.max.bytes")

    def group_ids(self) -> list[str]:
        """Groups with committed offsets."""
        return list(self.offsets)

    def holds_offsets(self, group_id: str) -> bool:
        """Does the group have committed offsets, or offsets in an open transaction?"""
        return group_id in self.offsets or any(group_id in g for g in self.pending_txn_offsets.values())

    # ------------------------------------------------------------------ loading
    def replay(self, record: OffsetRecord, producer_id: int | None) -> None:
        """One offset record read back from ``__consumer_offsets``. ``producer_id`` is the
        producer of a transactional batch (its records wait for the batch's marker), None
        for a plain batch (applied now)."""
        if producer_id is None:
            self._apply_offset_record(record)
        else:
            self._replay_pending.setdefault(producer_id, []).append(record)

    def replay_end_transaction_marker(self, producer_id: int, commit: bool) -> None:
        """A COMMIT applies the producer's replayed transactional records, anything else drops them."""
        staged = self._replay_pending.pop(producer_id, [])
        if commit:
            for r in staged:
                self._apply_offset_record(r)

    def on_loaded(self) -> None:
        """Transactional records without a marker are still pending."""
        for pid, staged in self._replay_pending.items():
            for r in staged:
                if r.value is not None:
                    by_group = self.pending_txn_offsets.setdefault(pid, {})
                    by_group.setdefault(r.group, {})[(r.topic, r.partition)] = r.value
        self._replay_pending.clear()

    def _apply_offset_record(self, r: OffsetRecord) -> None:
        if r.value is None:
            g = self.offsets.get(r.group)
            if g is not None:
                g.pop((r.topic, r.partition), None)
                if not g:
                    del self.offsets[r.group]
        else:
            self.offsets.setdefault(r.group, {})[(r.topic, r.partition)] = r.value

    # ------------------------------------------------------------------ OffsetCommit
    def commit_offsets(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                       generation_id: int, retention_time_ms: int, offsets: list[OffsetEntry],
                       api_version: int) -> dict[TopicPartition, Errors]:
        """Commit ``offsets``; returns the error per partition. The entries are durable in
        ``__consumer_offsets`` before this returns NONE for them."""
        keys = [(t, p) for t, p, *_ in offsets]

        def all_(e: Errors) -> dict:
            return {k: e for k in keys}

        if group_id is None:  # Kafka 4.3.1 (measured): "" is a group like any other here
            return all_(Errors.INVALID_GROUP_ID)
        group = self.groups.group(group_id)
        consumer_group = self.groups.consumer_group(group_id)
        accepts = None
        if consumer_group is not None:
            # A KIP-848 group: the member epoch stands where the generation was (Kafka's
            # ConsumerGroup.validateOffsetCommit).
            try:
                accepts = consumer_group.validate_offset_commit(member_id, group_instance_id, generation_id,
                                                                transactional=False, api_version=api_version)
            except KafkaError as exc:
                return all_(exc.error)
        elif group is None and generation_id >= 0:
            return all_(Errors.GROUP_ID_NOT_FOUND if api_version >= 9 else Errors.ILLEGAL_GENERATION)
        # No group and no generation: offsets of a "simple" group (no group management), which
        # is created once they are written (an Empty group passes every check below).
        if group is not None:
            try:
                self._validate_offset_commit(group, member_id, group_instance_id, generation_id,
                                             transactional=False)
            except KafkaError as exc:
                return all_(exc.error)
            if group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE) and member_id in group.members:
                # With the classic protocol a commit also keeps the member's session alive.
                self.groups.reschedule_heartbeat(group, group.members[member_id])
        now = now_ms()
        # Kafka adds the two as Java longs: a huge retention wraps around (the fuzzer sent one)
        expire = _long(now + retention_time_ms) if retention_time_ms != -1 else None
        result: dict[TopicPartition, Errors] = {}
        to_write: list[tuple[TopicPartition, OffsetAndMetadata]] = []   # one record per entry
        for topic, partition, offset, leader_epoch, metadata in offsets:
            if accepts is not None and not accepts(topic, partition):
                result[(topic, partition)] = Errors.STALE_MEMBER_EPOCH
            elif self._metadata_too_large(metadata):
                result[(topic, partition)] = Errors.OFFSET_METADATA_TOO_LARGE
            else:
                to_write.append(((topic, partition), OffsetAndMetadata(offset, leader_epoch, metadata or "", now,
                                                                      expire)))
        if to_write:
            try:
                self._append_offsets(group_id, to_write)
            except KafkaError as exc:
                result.update({tp: exc.error for tp, _ in to_write})
                return result
            self.offsets.setdefault(group_id, {}).update(to_write)
            result.update({tp: Errors.NONE for tp, _ in to_write})
        if group is None and consumer_group is None and (to_write or not result):
            self.groups.get_or_create_simple_group(group_id)
        return result

    def _metadata_too_large(self, metadata: str | None) -> bool:
        return metadata is not None and len(metadata) > self.metadata_max_bytes

    def _append_offsets(self, group_id: str, offsets: Iterable[tuple[TopicPartition, OffsetAndMetadata]],
                        producer: tuple[int, int] | None = None) -> None:
        """Write offset records in one batch, a transactional one of ``producer`` (id, epoch)
        when given; a failure raises KafkaError with the error a client sees."""
        records = [(offset_commit_key(group_id, t, p), offset_commit_value(om)) for (t, p), om in offsets]
        pid, epoch = producer if producer is not None else (rec.NO_PRODUCER_ID, rec.NO_PRODUCER_EPOCH)
        try:
            self.store.append(group_id, records, producer_id=pid, producer_epoch=epoch,
                              transactional=producer is not None)
        except KafkaError as exc:
            raise KafkaError(offset_append_error_to_response(exc.error), exc.message) from None

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
                      require_stable: bool, member_id: str | None = None, member_epoch: int = -1,
                      ) -> tuple[Errors, list[tuple[str, list[tuple[int, int, int, str, Errors]]]]]:
        """Committed offsets of ``group_id``: ``topics`` None means every committed partition.
        Returns ``(group error, [(topic, [(partition, offset, leader_epoch, metadata, error)])])``;
        an unknown partition reads offset -1 without error, as in Kafka. Only a null group id
        is refused: Kafka 4.3.1 answers an empty one with offsets -1 (measured)."""
        if group_id is None:
            return Errors.INVALID_GROUP_ID, []
        group = self.groups.group(group_id)
        consumer_group = self.groups.consumer_group(group_id)
        if consumer_group is not None:
            try:   # OffsetFetch v9+ names the member and its epoch (Kafka's validateOffsetFetch)
                consumer_group.validate_offset_fetch(member_id, member_epoch)
            except KafkaError as exc:
                return exc.error, []
            cache = self.offsets.get(group_id, {})
        else:
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
    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> tuple[Errors, dict]:
        """OffsetDelete: ``(group error, {(topic, partition): error})``. A consumer group that is
        not Empty keeps the offsets of topics it subscribes to (GROUP_SUBSCRIBED_TO_TOPIC); any
        other non-empty group refuses (NON_EMPTY_GROUP)."""
        if not group_id_valid(group_id):
            return Errors.INVALID_GROUP_ID, {}
        group = self.groups.group(group_id)
        consumer_group = self.groups.consumer_group(group_id)
        if consumer_group is not None:
            # Kafka's ConsumerGroup.validateOffsetDelete accepts every state; the topics the
            # members subscribe to keep their offsets.
            def subscribed(t: str) -> bool:
                return consumer_group.is_subscribed_to(t)
        elif group is None or group.is_in(GroupState.DEAD):
            return Errors.GROUP_ID_NOT_FOUND, {}
        elif not group.is_in(GroupState.EMPTY) and group.protocol_type != "consumer":
            return Errors.NON_EMPTY_GROUP, {}
        else:
            def subscribed(t: str) -> bool:
                return not group.is_in(GroupState.EMPTY) and group.is_subscribed_to(t)
        result = {}
        cache = self.offsets.get(group_id, {})
        gone = []
        for t, p in partitions:
            if subscribed(t):
                result[(t, p)] = Errors.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            result[(t, p)] = Errors.NONE
            if (t, p) in cache:
                gone.append((t, p))
        if gone:
            try:
                self._delete(group_id, gone)
            except KafkaError as exc:
                return append_error_to_response(exc.error), {}
        return Errors.NONE, result

    def tombstones(self, group_id: str, partitions=None) -> list[tuple[bytes, None]]:
        """Offset-commit tombstones of ``partitions`` of the group (default: every committed one)."""
        if partitions is None:
            partitions = list(self.offsets.get(group_id, {}))
        return [(offset_commit_key(group_id, t, p), None) for t, p in partitions]

    def _delete(self, group_id: str, partitions: list[TopicPartition]) -> None:
        """Write the tombstones of committed ``partitions``, then forget them; raises KafkaError
        (the log's error) when the write fails."""
        self.store.append(group_id, self.tombstones(group_id, partitions))
        cache = self.offsets[group_id]
        for k in partitions:
            cache.pop(k, None)
        if not cache:
            del self.offsets[group_id]

    def forget_group(self, group_id: str) -> None:
        """The group was deleted, its tombstones written by the caller (DeleteGroups)."""
        self.offsets.pop(group_id, None)

    def unload(self, group_id: str) -> None:
        """Another broker coordinates the group now: its offsets, committed and pending in
        transactions, live there (read back from the log)."""
        self.offsets.pop(group_id, None)
        for pid in list(self.pending_txn_offsets):
            by_group = self.pending_txn_offsets[pid]
            by_group.pop(group_id, None)
            if not by_group:
                del self.pending_txn_offsets[pid]

    def on_topics_deleted(self, topics: set[str]) -> None:
        """Drop (with tombstones) every committed offset of deleted topics, as Kafka's
        ``GroupCoordinator.onPartitionsDeleted`` does; call it from DeleteTopics."""
        for group_id in list(self.offsets):
            gone = [k for k in self.offsets[group_id] if k[0] in topics]
            if not gone:
                continue
            try:
                self._delete(group_id, gone)
            except KafkaError as exc:
                log.warning("failed to delete offsets of deleted topics for group %s: %s", group_id, exc)

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
        if not group_id_valid(group_id):
            return Errors.INVALID_GROUP_ID
        consumer_group = self.groups.consumer_group(group_id)
        if consumer_group is not None:
            try:
                consumer_group.validate_offset_commit(member_id or "", group_instance_id, generation_id,
                                                      transactional=True, api_version=-1)
            except KafkaError as exc:
                return exc.error
            return Errors.NONE
        group = self.groups.group(group_id)
        if group is None:
            return Errors.NONE if generation_id < 0 else Errors.ILLEGAL_GENERATION
        try:
            self._validate_offset_commit(group, member_id or "", group_instance_id, generation_id, transactional=True)
        except KafkaError as exc:
            return exc.error
        return Errors.NONE

    def stage_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                          offsets: list[OffsetEntry]) -> Errors:
        """Write transactional offset commits (TxnOffsetCommit) and keep them pending.

        ``offsets`` are the entries OffsetCommit takes too. They are appended as a
        transactional batch of the producer (with the request's epoch, so the partition fences
        a zombie) to the group's ``__consumer_offsets`` partition, so that a restart replays
        them against the markers, and become committed offsets only when
        :meth:`complete_txn_offsets` sees the COMMIT. Returns NONE or the error for every
        partition."""
        if not offsets:
            return Errors.NONE
        now = now_ms()
        staged: dict[TopicPartition, OffsetAndMetadata] = {}
        for topic, partition, offset, leader_epoch, metadata in offsets:
            if self._metadata_too_large(metadata):
                return Errors.OFFSET_METADATA_TOO_LARGE
            staged[(topic, partition)] = OffsetAndMetadata(offset, leader_epoch, metadata or "", now)
        try:
            self._append_offsets(group_id, staged.items(), (producer_id, producer_epoch))
        except KafkaError as exc:
            return exc.error
        if self.groups.consumer_group(group_id) is None:
            self.groups.get_or_create_simple_group(group_id)
        self.pending_txn_offsets.setdefault(producer_id, {}).setdefault(group_id, {}).update(staged)
        return Errors.NONE

    def complete_txn_offsets(self, producer_id: int, commit: bool) -> None:
        """The transaction's marker reached ``__consumer_offsets``: on COMMIT its offsets become
        the committed ones, on ABORT they are dropped. (WriteTxnMarkers wrote the marker on the
        groups' partitions, handlers/transactions.py, and calls this once the ISR has it.)"""
        staged = self.pending_txn_offsets.pop(producer_id, None)
        if not staged or not commit:
            return
        for group_id, offs in staged.items():
            self.offsets.setdefault(group_id, {}).update(offs)

    # ------------------------------------------------------------------ offset retention
    @staticmethod
    def _expiration_base(group: ClassicGroup | None) -> Callable[[OffsetAndMetadata], int] | None:
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

    def expire_offsets(self, now: int) -> int:
        """Delete offsets past ``offsets.retention.minutes`` (Kafka's rules: an Empty group's
        offsets expire that long after it became empty; a Stable consumer group's offsets of
        topics it no longer subscribes to, that long after their commit; a simple group's
        that long after their commit; an explicit v2-v4 retention wins; an offset an open
        transaction also holds stays). Returns how many were deleted."""
        retention = self.offsets_retention_ms
        removed = 0
        for group_id in list(self.offsets):
            group = self.groups.group(group_id) or self.groups.consumer_group(group_id)
            # A consumer group's offsets count from their commit (Kafka's
            # ConsumerGroup.offsetExpirationCondition); its subscribed topics' offsets stay.
            base = (self._expiration_base(group) if not isinstance(group, ConsumerGroup)
                    else lambda om: om.commit_timestamp)
            if base is None:
                continue
            expired = []
            for (t, p), om in self.offsets[group_id].items():
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
                self._delete(group_id, expired)
            except KafkaError as exc:
                log.warning("failed to expire offsets of group %s: %s", group_id, exc)
                continue
            removed += len(expired)
        return removed
