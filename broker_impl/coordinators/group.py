"""The group coordinator: what the handlers call (Kafka's ``GroupCoordinatorShard``).

Kafka's group-coordinator module keeps, per ``__consumer_offsets`` partition, two managers
side by side and a thin shard in front of them; this broker has the same three parts:

- :class:`~.group_metadata_manager.GroupMetadataManager`: the classic groups (JoinGroup,
  SyncGroup, Heartbeat, LeaveGroup, DescribeGroups, ListGroups), whose mechanics between
  requests are in :mod:`.classic_rebalance`;
- :class:`~.offset_metadata_manager.OffsetMetadataManager`: the committed offsets (OffsetCommit,
  OffsetFetch, OffsetDelete, transactional offsets, retention, deleted topics);
- this facade, which routes each request to its manager and does what needs both, as the
  shard does in Kafka: reading ``__consumer_offsets`` back at start-up and handing each
  record to its manager (``replay``), DeleteGroups (the group's offsets and its metadata go
  in one batch), and the periodic clean-up (expire offsets, then delete the Empty groups
  left without any).

Both managers write through one :class:`~.group_store.OffsetsTopic` and schedule on one
:class:`~.group_timer.CoordinatorTimer`.

Which groups: a one-node broker coordinates every group. A broker of a cluster coordinates the
groups of the ``__consumer_offsets`` partitions it leads, and fails over as Kafka's does: when
it is elected leader of a partition it loads that partition's groups and offsets
(:meth:`on_elected`), when it loses it it forgets them and answers their parked requests
NOT_COORDINATOR (:meth:`on_resigned`); a request for a group of another partition gets
NOT_COORDINATOR, and the client asks FindCoordinator again. Writes are answered once replicated
(``await_replicated``).

An elected partition is read back off the event loop, as Kafka's CoordinatorRuntime loads a
coordinator in its LOADING state: until it is loaded every request for its groups reads
COORDINATOR_LOAD_IN_PROGRESS (retried by clients without a coordinator lookup; Heartbeat is
answered NONE, "blindly", as Kafka's is), ListGroups reads it as a whole, and a transaction
marker for the partition is refused NOT_LEADER_OR_FOLLOWER so the transaction coordinator sends
it again once the partition is loaded. A one-node broker's start-up load stays synchronous: it
serves no request before it.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

import trio

from ..log import records as rec
from ..protocol.errors import Errors, KafkaError
from .group_metadata import JoinResult, SyncResult, group_id_valid, now_ms
from .group_metadata_manager import DescribedGroup, GroupMetadataManager
from .consumer_group_records import ConsumerGroupRecord
from .consumer_group_manager import ConsumerGroupManager, HeartbeatRequest, HeartbeatResult
from .group_records import OffsetRecord, UnknownRecord, decode_record
from .group_store import OFFSETS_TOPIC, OffsetsTopic, append_error_to_response
from .group_timer import CoordinatorTimer
from .offset_metadata_manager import OffsetEntry, OffsetMetadataManager

if TYPE_CHECKING:
    from ..cluster.topics import TopicRegistry
    from ..config import BrokerConfig

log = logging.getLogger("kconform.broker.group")

_EXPIRATION_KEY = ("offsets-expiration",)


class _Loaded:
    """A ``__consumer_offsets`` partition read back, not yet applied."""

    def __init__(self):
        self.records = 0
        #: (OffsetRecord, producer id of a transactional batch or None) or (producer id, commit?)
        self.offsets: list[tuple] = []
        self.groups: dict[str, object] = {}
        self.consumer_groups: dict[str, dict[bytes, ConsumerGroupRecord]] = {}


class GroupCoordinator:
    def __init__(self, config: BrokerConfig, topics: TopicRegistry, replica_manager):
        self.store = OffsetsTopic(config, topics, replica_manager)
        self.timer = CoordinatorTimer()
        self.group_manager = GroupMetadataManager(config, self.store, self.timer)
        self.offset_manager = OffsetMetadataManager(config, self.store, self.group_manager)
        self.consumer_manager = ConsumerGroupManager(config, topics, self.timer, self.group_manager, self.store)
        self.group_manager.consumer_groups = self.consumer_manager.groups
        #: The __consumer_offsets partitions coordinated here; None: all of them (one node).
        self.owned: set[int] | None = None
        #: The partitions elected here and still being read back, with their leader epoch.
        self.loading: dict[int, int] = {}
        self._nursery: trio.Nursery | None = None
        #: Per __consumer_offsets partition, the transaction markers appended there whose
        #: transactional offsets are not settled yet (they settle once the marker is replicated).
        self._settling: dict[int, set[trio.Event]] = {}

    # ------------------------------------------------------------------ lifecycle
    async def start(self, nursery: trio.Nursery, owns_all: bool = True) -> None:
        """Run the timer task in ``nursery``; with ``owns_all`` it replays all of
        ``__consumer_offsets`` first, else it waits to be elected (a broker of a cluster, for
        each partition it leads; a one-node broker, for all of them, once unfenced)."""
        self._nursery = nursery
        if owns_all:
            self.load()
        else:
            self.owned = set()
        nursery.start_soon(self.timer.run)
        self._schedule_offset_expiration()

    def elect_all(self) -> None:
        """A one-node broker, unfenced: it leads every ``__consumer_offsets`` partition, so it
        replays all of them and coordinates every group."""
        self.load()
        self.owned = None

    def resign_all(self) -> None:
        """A one-node broker's controlled shutdown: no partition is led any more, so every
        group answers NOT_COORDINATOR until the broker stops."""
        self.owned = set()
        gone = set(self.group_manager.groups) | set(self.offset_manager.offsets) | set(self.consumer_manager.groups)
        for group_id in gone:
            self.group_manager.unload(group_id)
            self.consumer_manager.unload(group_id)
            self.offset_manager.unload(group_id)
        log.info("no longer coordinating any group (%d groups): shutting down", len(gone))

    def on_elected(self, partition: int, leader_epoch: int) -> None:
        """This broker now leads ``__consumer_offsets`` partition ``partition``: load it, off the
        event loop (its groups read COORDINATOR_LOAD_IN_PROGRESS meanwhile); the newest epoch's
        load is the one that counts. Elected at a new epoch while it coordinated the partition
        all along (the replica manager calls this only when the epoch changed, which happens only
        when the leader changed: so this broker missed the images between), it reads the
        partition again rather than trust a cache another leader may have outdated."""
        if self.owned is None:
            return
        if partition in self.owned:
            self.on_resigned(partition)
        self.loading[partition] = leader_epoch
        if self._nursery is None:       # not started: nothing is served yet
            self._finish_load(partition, leader_epoch, self._read({partition}))
            return
        self._nursery.start_soon(self._load_elected, partition, leader_epoch)

    async def _load_elected(self, partition: int, leader_epoch: int) -> None:
        # nothing appends to a partition while it loads: its coordinator writes and markers are
        # refused until then. Resigned meanwhile, a follower's truncation may change the log under
        # the read: then a failed read is nobody's concern.
        try:
            loaded = await trio.to_thread.run_sync(self._read, {partition})
        except Exception:
            if self.loading.get(partition) != leader_epoch:
                log.info("dropped the load of %s-%d (leader epoch %d): resigned meanwhile", OFFSETS_TOPIC,
                         partition, leader_epoch, exc_info=True)
                return
            raise
        self._finish_load(partition, leader_epoch, loaded)

    def _finish_load(self, partition: int, leader_epoch: int, loaded: _Loaded) -> None:
        if self.loading.get(partition) != leader_epoch:
            return      # resigned (or re-elected) meanwhile
        del self.loading[partition]
        self._apply(loaded)
        self.owned.add(partition)
        log.info("coordinating the groups of %s-%d (leader epoch %d)", OFFSETS_TOPIC, partition, leader_epoch)

    def on_resigned(self, partition: int) -> None:
        """Another broker leads the partition now: forget its groups and their offsets."""
        self.loading.pop(partition, None)
        if self.owned is None or partition not in self.owned:
            return
        self.owned.discard(partition)
        gone = [g for g in {*self.group_manager.groups, *self.consumer_manager.groups}
                if self.store.partition_for(g) == partition]
        for group_id in gone:
            self.group_manager.unload(group_id)
            self.consumer_manager.unload(group_id)
            self.offset_manager.unload(group_id)
        log.info("no longer coordinating the groups of %s-%d (%d groups)", OFFSETS_TOPIC, partition, len(gone))

    def coordinator_error(self, group_id: str) -> Errors | None:
        """NOT_COORDINATOR for a group of a partition this broker does not lead,
        COORDINATOR_LOAD_IN_PROGRESS while it loads (None: it coordinates the group, or the group
        id is invalid and the managers say so)."""
        if self.owned is None or not group_id_valid(group_id):
            return None
        return self.partition_error(self.store.partition_for(group_id))

    def partition_error(self, partition: int) -> Errors | None:
        """The same for a ``__consumer_offsets`` partition."""
        if self.owned is None or partition in self.owned:
            return None
        if partition in self.loading:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS
        return Errors.NOT_COORDINATOR

    async def await_replicated(self, group_id: str) -> Errors:
        """What the group's writes so far need before they are acknowledged (group_store)."""
        return await self.store.await_replicated(group_id)

    @contextmanager
    def settling_txn_offsets(self, partition: int) -> Iterator[None]:
        """A COMMIT/ABORT marker was appended to ``__consumer_offsets`` partition ``partition``;
        its producer's transactional offsets settle (complete_txn_offsets) within this block,
        once the marker is replicated. A require_stable OffsetFetch meanwhile waits for it."""
        done = trio.Event()
        self._settling.setdefault(partition, set()).add(done)
        try:
            yield
        finally:
            done.set()
            waiting = self._settling.get(partition)
            if waiting is not None:
                waiting.discard(done)
                if not waiting:
                    del self._settling[partition]

    async def await_stable(self, group_id: str) -> Errors:
        """Before a require_stable OffsetFetch reads the group's offsets: Kafka runs it as a write
        operation of the group's partition (GroupCoordinatorService.fetchOffsets, "to ensure that
        the response waits until the pending offsets are committed"), so it reads after every
        record appended before it -- a transaction marker included -- and answers once they are
        committed. Here: wait until what the partition holds now is replicated and the markers
        appended so far have settled their offsets; then only offsets whose marker has not come
        yet read UNSTABLE_OFFSET_COMMIT. A timeout or a lost leadership reads NOT_COORDINATOR
        (GroupCoordinatorService.handleOffsetFetchException)."""
        settling = list(self._settling.get(self.store.partition_for(group_id), ()))
        if await self.store.await_replicated(group_id) is not Errors.NONE:
            return Errors.NOT_COORDINATOR
        with trio.move_on_after(self.store.commit_timeout_ms / 1000.0):
            for done in settling:
                await done.wait()
            return Errors.NONE
        return Errors.NOT_COORDINATOR

    def close(self) -> None:
        self.timer.clear()
        self.group_manager.close()

    def load(self, partitions: set[int] | None = None) -> None:
        """Rebuild groups and committed offsets from ``__consumer_offsets`` (``partitions`` of
        it, default all), at once."""
        self._apply(self._read(partitions))

    def _read(self, partitions: set[int] | None) -> _Loaded:
        """Read ``partitions`` back (no state is touched: this runs in a worker thread for an
        elected partition): each group's last metadata record, the consumer groups' records by
        key, and the offset records with the markers, in log order."""
        loaded = _Loaded()
        for _partition, h, records in self.store.replay(partitions):
            if h.is_control:
                marker = None
                if records and records[0].key is not None and len(records[0].key) >= 4:
                    marker = int.from_bytes(records[0].key[2:4], "big", signed=True)
                loaded.offsets.append((h.producer_id, marker == rec.COMMIT))
                continue
            for r in records:
                if r.key is None:
                    continue
                try:
                    parsed = decode_record(r.key, r.value)
                except UnknownRecord:
                    continue
                except Exception:
                    log.warning("skipping unreadable %s record at offset %d", OFFSETS_TOPIC, r.offset)
                    continue
                loaded.records += 1
                if isinstance(parsed, OffsetRecord):
                    loaded.offsets.append((parsed, h.producer_id if h.is_transactional else None))
                elif isinstance(parsed, ConsumerGroupRecord):
                    by_key = loaded.consumer_groups.setdefault(parsed.group, {})
                    if parsed.value is None:
                        by_key.pop(parsed.key, None)
                    else:
                        by_key[parsed.key] = parsed
                else:
                    loaded.groups[parsed.group] = parsed.value
        return loaded

    def _apply(self, loaded: _Loaded) -> None:
        """Hand what was read back to the managers: offset records to the offsets side
        (transactional ones wait for their COMMIT/ABORT marker), each group's last metadata record
        to the group side; offsets without group metadata belong to a "simple" group (standalone
        commits), which is created."""
        for first, second in loaded.offsets:
            if isinstance(first, OffsetRecord):
                self.offset_manager.replay(first, second)
            else:
                self.offset_manager.replay_end_transaction_marker(first, second)
        self.offset_manager.on_loaded()
        self.group_manager.load(loaded.groups)
        self.consumer_manager.load(loaded.consumer_groups)
        for group_id in self.offset_manager.group_ids():
            if group_id not in self.consumer_manager.groups:
                self.group_manager.get_or_create_simple_group(group_id)
        if loaded.records:
            log.info("loaded %d records: %d groups, %d groups with offsets", loaded.records,
                     len(self.group_manager.groups), len(self.offset_manager.group_ids()))

    # ------------------------------------------------------------------ classic groups
    # A classic request for a KIP-848 consumer group: Kafka 4.3 lets classic members join a
    # consumer group (group.consumer.migration.policy); this broker does not (docs/groups.md), so
    # JoinGroup reads INCONSISTENT_GROUP_PROTOCOL and the member-bound requests UNKNOWN_MEMBER_ID.
    async def join_group(self, **request) -> JoinResult:
        """JoinGroup: see :meth:`GroupMetadataManager.join_group`."""
        if request["group_id"] in self.consumer_manager.groups:
            return JoinResult(Errors.INCONSISTENT_GROUP_PROTOCOL, request["member_id"])
        return await self.group_manager.join_group(**request)

    async def sync_group(self, **request) -> SyncResult:
        """SyncGroup: see :meth:`GroupMetadataManager.sync_group`."""
        if request["group_id"] in self.consumer_manager.groups:
            return SyncResult(Errors.UNKNOWN_MEMBER_ID)
        return await self.group_manager.sync_group(**request)

    def heartbeat(self, **request) -> Errors:
        """Heartbeat: see :meth:`GroupMetadataManager.heartbeat`."""
        if request["group_id"] in self.consumer_manager.groups:
            return Errors.UNKNOWN_MEMBER_ID
        return self.group_manager.heartbeat(**request)

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[Errors, list[Errors]]:
        if group_id in self.consumer_manager.groups:
            return Errors.NONE, [Errors.UNKNOWN_MEMBER_ID] * len(members)
        return self.group_manager.leave_group(group_id, members)

    def describe_group(self, group_id: str, api_version: int) -> DescribedGroup:
        return self.group_manager.describe_group(group_id, api_version)

    def list_groups(self, states_filter: list[str] | None = None,
                    types_filter: list[str] | None = None) -> list[tuple[str, str, str, str]]:
        """Classic and consumer groups, each with its type."""
        return self.group_manager.list_groups(states_filter, types_filter) + self.consumer_manager.list(
            {s.lower() for s in states_filter or ()}, {t.lower() for t in types_filter or ()})

    # ------------------------------------------------------------------ KIP-848 consumer groups
    def consumer_group_heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        """ConsumerGroupHeartbeat: see :meth:`ConsumerGroupManager.heartbeat`."""
        return self.consumer_manager.heartbeat(request)

    def consumer_group(self, group_id: str):
        """The consumer group of ``group_id`` for ConsumerGroupDescribe (KafkaError: GROUP_ID_NOT_FOUND)."""
        return self.consumer_manager.group(group_id)

    def delete_group(self, group_id: str) -> Errors:
        """DeleteGroups for one group: only an Empty group (or one with just offsets) can go;
        its offsets and metadata get tombstones, in one batch (Kafka's ``deleteGroups``)."""
        err = self.consumer_manager.delete(group_id)
        if err is not None:        # a consumer group: its records and offsets go in one batch
            if err is not Errors.NONE:
                return err
            try:
                self.store.append(group_id, self.offset_manager.tombstones(group_id)
                                  + self.consumer_manager.tombstones(group_id))
            except KafkaError as exc:
                return append_error_to_response(exc.error)
            self.offset_manager.forget_group(group_id)
            self.consumer_manager.remove(group_id)
            return Errors.NONE
        err = self.group_manager.validate_delete_group(group_id)
        if err is not Errors.NONE:
            return err
        records = self.offset_manager.tombstones(group_id) + [self.group_manager.tombstone(group_id)]
        try:
            self.store.append(group_id, records)
        except KafkaError as exc:
            return append_error_to_response(exc.error)
        self.offset_manager.forget_group(group_id)
        self.group_manager.remove_group(group_id)
        return Errors.NONE

    # ------------------------------------------------------------------ offsets
    def commit_offsets(self, **request) -> dict[tuple[str, int], Errors]:
        """OffsetCommit: see :meth:`OffsetMetadataManager.commit_offsets`."""
        return self.offset_manager.commit_offsets(**request)

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None, require_stable: bool,
                      member_id: str | None = None, member_epoch: int = -1):
        return self.offset_manager.fetch_offsets(group_id, topics, require_stable, member_id, member_epoch)

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> tuple[Errors, dict]:
        return self.offset_manager.delete_offsets(group_id, partitions)

    def on_topics_deleted(self, topics: set[str]) -> None:
        self.offset_manager.on_topics_deleted(topics)

    def validate_txn_offset_commit(self, group_id: str, member_id: str | None, generation_id: int,
                                   group_instance_id: str | None) -> Errors:
        return self.offset_manager.validate_txn_offset_commit(group_id, member_id, generation_id,
                                                              group_instance_id)

    def stage_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                          offsets: list[OffsetEntry]) -> Errors:
        return self.offset_manager.stage_txn_offsets(group_id, producer_id, producer_epoch, offsets)

    def complete_txn_offsets(self, producer_id: int, commit: bool) -> None:
        self.offset_manager.complete_txn_offsets(producer_id, commit)

    # ------------------------------------------------------------------ clean-up
    def _schedule_offset_expiration(self) -> None:
        self.timer.schedule(_EXPIRATION_KEY, self.offset_manager.retention_check_interval_ms, self._expire_offsets)

    def _expire_offsets(self) -> None:
        try:
            self.expire_offsets_now(now_ms())
        finally:
            self._schedule_offset_expiration()

    def expire_offsets_now(self, now: int) -> int:
        """Kafka's ``cleanupGroupMetadata``: delete the offsets past retention
        (:meth:`OffsetMetadataManager.expire_offsets`), then every Empty group left without
        offsets, committed or pending in a transaction (group tombstone). Returns how many
        offsets were deleted."""
        removed = self.offset_manager.expire_offsets(now)
        for group_id in list(self.group_manager.groups):
            if not self.offset_manager.holds_offsets(group_id):
                self.group_manager.maybe_delete_group(group_id)
        return removed
