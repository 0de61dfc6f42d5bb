"""A follower's fetcher for the partitions one leader leads (Kafka's ReplicaFetcherThread /
AbstractFetcherThread), as a trio task, with Kafka's truncation on fetch (IBP 2.7+, every KRaft
release: no OffsetForLeaderEpoch between brokers -- Kafka 4.3.1's followers send none, measured
on the workloads' transcripts).

- A partition that starts following a leader (or a new leader epoch) fetches at once from its
  log end offset when its log has leader epochs -- Kafka's initialFetchOffset; a log with records
  but no epochs is first cut back to its high watermark, as Kafka's truncateToHighWatermark.
- Fetch (replica id, the partition's current leader epoch, the log end offset as fetch offset,
  the latest epoch of its log as ``last_fetched_epoch``, long poll ``replica.fetch.wait.max.ms``):
  the leader answers either records, appended exactly as they came
  (PartitionLog.append_as_follower) with the leader's high watermark taken, or a
  ``diverging_epoch`` -- where the follower's last epoch ends in the leader's log -- and the
  follower truncates there (Kafka's getOffsetTruncationState) and fetches again; a follower
  that does not know the epoch the leader names truncates to the end of its own largest epoch
  below it and the next fetch goes on from there. The leader learns this replica's log end
  offset from the next fetch offset.
- OFFSET_OUT_OF_RANGE (Kafka's fetchOffsetAndTruncate): ListOffsets for the leader's log end;
  above it (an unclean election) the follower truncates to it; below the leader's log start it
  restarts its log there.
- Errors, per partition: an epoch or leadership error waits for the next metadata image (which
  moves the partition to the right fetcher). A request that fails altogether backs off
  ``replica.fetch.backoff.ms``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import trio

from ..log.errors import LogError
from ..log.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from ..protocol.errors import Errors
from ..protocol.messages import API
from ..cluster.network_client import InterBrokerClient, NetworkError

log = logging.getLogger("kconform.broker.fetcher")

FETCH_VERSION = 12                  # replica_id at the top, topics by name (as Kafka 3.x followers)
LIST_OFFSETS_VERSION = 10           # Kafka's MetadataVersion.listOffsetRequestVersion from 4.0-IV3
EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1
_RETRY_ERRORS = frozenset({Errors.NOT_LEADER_OR_FOLLOWER, Errors.FENCED_LEADER_EPOCH, Errors.UNKNOWN_LEADER_EPOCH,
                           Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.UNKNOWN_TOPIC_ID, Errors.KAFKA_STORAGE_ERROR,
                           Errors.NOT_ENOUGH_REPLICAS})


@dataclass
class FetchState:
    partition: object         # cluster.partition.Partition
    leader_epoch: int
    #: set: the next round asks the leader where its log starts and ends first (out of range)
    out_of_range: bool = False
    delayed_until: float = 0.0


class ReplicaFetcher:
    def __init__(self, broker, leader_id: int, fetcher_index: int = 0):
        self.broker = broker
        self.leader_id = leader_id
        cfg = broker.config
        self.wait_ms = cfg.int("replica.fetch.wait.max.ms")
        self.min_bytes = cfg.int("replica.fetch.min.bytes")
        self.max_bytes = cfg.int("replica.fetch.max.bytes")
        self.backoff_s = cfg.int("replica.fetch.backoff.ms") / 1000.0
        self.socket_timeout_s = cfg.int("replica.socket.timeout.ms") / 1000.0
        self.client = InterBrokerClient(broker.replica_manager.inter_broker_endpoint,
                                        f"broker-{broker.node_id}-fetcher-{fetcher_index}")
        self.partitions: dict[tuple[str, int], FetchState] = {}
        self._wake = trio.Event()
        self.cancel_scope: trio.CancelScope | None = None

    # ------------------------------------------------------------------ membership
    def add(self, partition, leader_epoch: int) -> None:
        """Fetch ``partition`` from this leader from now on (Kafka's initialFetchOffset: the log
        end offset of a log with epochs, else its high watermark)."""
        plog = partition.log
        if plog.leader_epoch_cache.latest_epoch is None and plog.high_watermark < plog.log_end_offset:
            log.info("%s-%d: no leader epochs: truncating from %d to the high watermark %d", partition.topic,
                     partition.index, plog.log_end_offset, plog.high_watermark)
            plog.truncate_to(plog.high_watermark)
        self.partitions[(partition.topic, partition.index)] = FetchState(partition, leader_epoch)
        self._wake.set()

    def remove(self, topic: str, index: int) -> None:
        self.partitions.pop((topic, index), None)

    # ------------------------------------------------------------------ the loop
    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        with trio.CancelScope() as scope:
            self.cancel_scope = scope
            task_status.started()
            try:
                while True:
                    await self._round()
            finally:
                await self.client.close()

    def stop(self) -> None:
        if self.cancel_scope is not None:
            self.cancel_scope.cancel()

    async def _round(self) -> None:
        now = trio.current_time()
        ready = {tp: st for tp, st in self.partitions.items() if st.delayed_until <= now}
        if not ready:
            self._wake = trio.Event()
            wake_at = min((st.delayed_until for st in self.partitions.values()), default=now + 1.0)
            with trio.move_on_at(wake_at):
                await self._wake.wait()
            return
        try:
            resetting = {tp: st for tp, st in ready.items() if st.out_of_range}
            if resetting:
                await self._reset_out_of_range(resetting)
            fetching = {tp: st for tp, st in ready.items() if not st.out_of_range and tp in self.partitions}
            if fetching:
                await self._fetch(fetching)
        except NetworkError as exc:
            log.debug("fetch from broker %d failed: %s", self.leader_id, exc)
            await trio.sleep(self.backoff_s)

    def _delay(self, st: FetchState) -> None:
        st.delayed_until = trio.current_time() + self.backoff_s

    # ------------------------------------------------------------------ truncation
    def _truncate_to_diverging(self, topic: str, st: FetchState, epoch: int, end_offset: int) -> None:
        """The leader's last ``epoch`` at or below this replica's last fetched epoch ends at
        ``end_offset`` in its log: cut this replica's log where the two agree (the next fetch
        carries on, or names the next divergence)."""
        plog = st.partition.log
        leo = plog.log_end_offset
        target = diverging_truncation_offset(plog, epoch, end_offset)
        if target < leo:
            log.info("%s-%d: diverging at epoch %d: truncating from %d to %d (leader %d epoch %d)", topic,
                     st.partition.index, epoch, leo, target, self.leader_id, st.leader_epoch)
        # also at the end: the epoch cache forgets an epoch this replica led without appending
        plog.truncate_to(target)

    async def _reset_out_of_range(self, states: dict[tuple[str, int], FetchState]) -> None:
        """Kafka's fetchOffsetAndTruncate: the leader's log end (ListOffsets latest, as a
        replica) below this replica's truncates it there; else a leader's log start above this
        replica's end restarts its log there; else fetching resumes where it was."""
        ends = await self._list_offsets(states, LATEST_TIMESTAMP)
        behind = {}
        for tp, st in states.items():
            if self.partitions.get(tp) is not st or tp not in ends:
                continue
            plog = st.partition.log
            if ends[tp] < plog.log_end_offset:
                log.warning("%s-%d: leader %d's log ends at %d, below this replica's %d: truncating there",
                            tp[0], tp[1], self.leader_id, ends[tp], plog.log_end_offset)
                plog.truncate_to(ends[tp])
                st.out_of_range = False
            else:
                behind[tp] = st
        if not behind:
            return
        starts = await self._list_offsets(behind, EARLIEST_TIMESTAMP)
        for tp, st in behind.items():
            if self.partitions.get(tp) is not st or tp not in starts:
                continue
            plog = st.partition.log
            if starts[tp] > plog.log_end_offset:
                log.info("%s-%d: behind the leader's log start %d: restarting the log there", tp[0], tp[1],
                         starts[tp])
                plog.truncate_fully_and_start_at(starts[tp])
            st.out_of_range = False

    async def _list_offsets(self, states: dict[tuple[str, int], FetchState], timestamp: int) -> dict:
        """{(topic, partition): offset} from the leader, for the partitions it answered; the
        others back off."""
        R = API["ListOffsets"].Request
        T = R.ListOffsetsTopic
        by_topic: dict[str, list] = {}
        for (topic, index), st in states.items():
            by_topic.setdefault(topic, []).append(T.ListOffsetsPartition(
                partition_index=index, current_leader_epoch=st.leader_epoch, timestamp=timestamp, max_num_offsets=1))
        req = R(replica_id=self.broker.node_id, isolation_level=0,
                topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()],
                timeout_ms=int(self.socket_timeout_s * 1000))
        resp = await self.client.send(self.leader_id, "ListOffsets", LIST_OFFSETS_VERSION, req,
                                      self.socket_timeout_s)
        out = {}
        for t in resp.topics:
            for p in t.partitions:
                st = states.get((t.name, p.partition_index))
                if st is None:
                    continue
                if p.error_code != Errors.NONE:
                    self._delay(st)
                else:
                    out[(t.name, p.partition_index)] = p.offset
        return out

    # ------------------------------------------------------------------ fetching
    async def _fetch(self, states: dict[tuple[str, int], FetchState]) -> None:
        api = API["Fetch"]
        R = api.Request
        T = R.FetchTopic
        by_topic: dict[str, list] = {}
        for (topic, index), st in states.items():
            plog = st.partition.log
            by_topic.setdefault(topic, []).append(T.FetchPartition(
                partition=index, current_leader_epoch=st.leader_epoch, fetch_offset=plog.log_end_offset,
                last_fetched_epoch=_latest_epoch(plog), log_start_offset=plog.log_start_offset, partition_max_bytes=self.max_bytes))
        req = R(replica_id=self.broker.node_id, max_wait_ms=self.wait_ms, min_bytes=self.min_bytes,
                max_bytes=max(self.max_bytes * len(states), self.max_bytes), isolation_level=0, session_id=0,
                session_epoch=-1, topics=[T(topic=t, partitions=ps) for t, ps in by_topic.items()],
                forgotten_topics_data=[], rack_id="")
        resp = await self.client.send(self.leader_id, "Fetch", FETCH_VERSION, req,
                                      self.socket_timeout_s + self.wait_ms / 1000.0)
        if resp.error_code != Errors.NONE:
            for st in states.values():
                self._delay(st)
            return
        appended = False
        for t in resp.responses:
            for p in t.partitions:
                st = states.get((t.topic, p.partition_index))
                if st is None or self.partitions.get((t.topic, p.partition_index)) is not st:
                    continue           # moved away while the fetch was in flight
                appended |= self._process(t.topic, st, p)
        if appended:
            self.broker.notify_append()

    def _process(self, topic: str, st: FetchState, p) -> bool:
        part = st.partition
        plog = part.log
        err = p.error_code
        if err == Errors.NONE:
            diverging = getattr(p, "diverging_epoch", None)
            if diverging is not None and diverging.epoch >= 0:       # FetchResponse.isDivergingEpoch
                # no records come with it, and the watermarks wait for the next fetch (Kafka's
                # processFetchRequest: they must not move before the truncation)
                self._truncate_to_diverging(topic, st, diverging.epoch, diverging.end_offset)
                return False
            appended = False
            if p.records:
                try:
                    part.append_as_follower(p.records)
                    appended = True
                except LogError as exc:
                    log.warning("%s-%d: cannot append what leader %d sent: %s", topic, part.index,
                                self.leader_id, exc)
                    self._delay(st)
                    return False
            part.update_follower_high_watermark(p.high_watermark, p.log_start_offset)
            return appended
        if err == Errors.OFFSET_OUT_OF_RANGE:
            st.out_of_range = True
            return False
        if err not in _RETRY_ERRORS:
            log.warning("%s-%d: fetch from leader %d: %s", topic, part.index, self.leader_id, Errors(err).name)
        self._delay(st)
        return False


def _latest_epoch(plog) -> int:
    """The epoch of the last batch in the log, -1 with none (Kafka's latestEpoch)."""
    latest = plog.leader_epoch_cache.latest_epoch
    return -1 if latest is None else latest


def diverging_truncation_offset(plog, epoch: int, end_offset: int) -> int:
    """Where a follower's log ``plog`` is cut when the leader says its ``epoch`` (the largest at or
    below the follower's last) ends at ``end_offset`` (Kafka's getOffsetTruncationState): at
    the end of that epoch in both logs; where the follower never had that epoch, at the end of
    its own largest epoch below it (another round follows); with no epoch of its own at or
    below it, at the leader's end."""
    leo = plog.log_end_offset
    if end_offset == UNDEFINED_EPOCH_OFFSET:
        return plog.high_watermark
    own_epoch, own_end = plog.leader_epoch_cache.end_offset_for(epoch, leo)
    if own_epoch == UNDEFINED_EPOCH or own_end == UNDEFINED_EPOCH_OFFSET:
        return min(end_offset, leo)
    if own_epoch != epoch:
        return min(own_end, leo)
    return min(own_end, end_offset, leo)
