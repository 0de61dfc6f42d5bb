"""A follower's fetcher for the partitions one leader leads (Kafka's ReplicaFetcherThread /
AbstractFetcherThread), as a trio task.

- A partition starts *truncating* whenever it follows a new leader or leader epoch: the fetcher
  asks the leader, with OffsetForLeaderEpoch (replica id = this broker), where this replica's
  latest epoch ends in the leader's log, and truncates there -- or, when the leader does not
  know that epoch (this replica has an epoch the leader never had), where the leader's epoch
  ends in this replica's own log (KIP-279). A replica without epochs has nothing to truncate.
- Then it fetches: Fetch (replica id, the partition's current leader epoch, the log end offset
  as fetch offset, long poll ``replica.fetch.wait.max.ms``), appends what comes exactly as it
  came (PartitionLog.append_as_follower) and takes the leader's high watermark. The leader
  learns this replica's log end offset from the next fetch offset.
- Errors, per partition: an epoch or leadership error waits for the next metadata image (which
  moves the partition to the right fetcher); OFFSET_OUT_OF_RANGE truncates (this replica is
  ahead) or restarts the log at the leader's log start (it is behind it). A request that fails
  altogether backs off ``replica.fetch.backoff.ms``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import trio

from ..log.errors import LogError
from ..log.leader_epoch import UNDEFINED_EPOCH_OFFSET
from ..protocol.errors import Errors
from ..protocol.messages import API
from ..cluster.network_client import InterBrokerClient, NetworkError

log = logging.getLogger("kconform.broker.fetcher")

FETCH_VERSION = 12                  # replica_id at the top, topics by name (as Kafka 3.x followers)
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
_RETRY_ERRORS = frozenset({Errors.NOT_LEADER_OR_FOLLOWER, Errors.FENCED_LEADER_EPOCH, Errors.UNKNOWN_LEADER_EPOCH,
                           Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.UNKNOWN_TOPIC_ID, Errors.KAFKA_STORAGE_ERROR,
                           Errors.NOT_ENOUGH_REPLICAS})


@dataclass
class FetchState:
    partition: object         # cluster.partition.Partition
    leader_epoch: int
    truncating: bool = True
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
        self.client = InterBrokerClient(broker.replica_manager.endpoint,
                                        f"broker-{broker.node_id}-fetcher-{fetcher_index}")
        self.partitions: dict[tuple[str, int], FetchState] = {}
        self._wake = trio.Event()
        self.cancel_scope: trio.CancelScope | None = None

    # ------------------------------------------------------------------ membership
    def add(self, partition, leader_epoch: int) -> None:
        """Fetch ``partition`` from this leader from now on, truncating first."""
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
            truncating = {tp: st for tp, st in ready.items() if st.truncating}
            if truncating:
                await self._truncate(truncating)
            fetching = {tp: st for tp, st in ready.items() if not st.truncating and tp in self.partitions}
            if fetching:
                await self._fetch(fetching)
        except NetworkError as exc:
            log.debug("fetch from broker %d failed: %s", self.leader_id, exc)
            await trio.sleep(self.backoff_s)

    def _delay(self, st: FetchState) -> None:
        st.delayed_until = trio.current_time() + self.backoff_s

    # ------------------------------------------------------------------ truncation
    async def _truncate(self, states: dict[tuple[str, int], FetchState]) -> None:
        asking = {}
        for tp, st in states.items():
            latest = st.partition.log.leader_epoch_cache.latest_epoch
            if latest is None:
                st.truncating = False            # no epochs: nothing this replica could disagree on
            else:
                asking[tp] = (st, latest)
        if not asking:
            return
        api = API["OffsetForLeaderEpoch"]
        R = api.Request
        T = R.OffsetForLeaderTopic
        by_topic: dict[str, list] = {}
        for (topic, index), (st, latest) in asking.items():
            by_topic.setdefault(topic, []).append(T.OffsetForLeaderPartition(
                partition=index, current_leader_epoch=st.leader_epoch, leader_epoch=latest))
        req = R(replica_id=self.broker.node_id,
                topics=[T(topic=t, partitions=ps) for t, ps in by_topic.items()])
        resp = await self.client.send(self.leader_id, "OffsetForLeaderEpoch", OFFSET_FOR_LEADER_EPOCH_VERSION, req,
                                      self.socket_timeout_s)
        for t in resp.topics:
            for p in t.partitions:
                entry = asking.get((t.topic, p.partition))
                if entry is None or self.partitions.get((t.topic, p.partition)) is not entry[0]:
                    continue
                st, latest = entry
                if p.error_code != Errors.NONE:
                    self._delay(st)
                    continue
                plog = st.partition.log
                if p.end_offset == UNDEFINED_EPOCH_OFFSET:
                    target = plog.high_watermark
                elif p.leader_epoch < latest:
                    _, own_end = plog.leader_epoch_cache.end_offset_for(p.leader_epoch, plog.log_end_offset)
                    target = min(p.end_offset, own_end) if own_end >= 0 else p.end_offset
                else:
                    target = p.end_offset
                if target < plog.log_end_offset:
                    log.info("%s-%d: truncating from %d to %d (leader %d epoch %d)", t.topic, p.partition,
                             plog.log_end_offset, target, self.leader_id, st.leader_epoch)
                    plog.truncate_to(target)
                st.truncating = False

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
                last_fetched_epoch=-1, log_start_offset=plog.log_start_offset, partition_max_bytes=self.max_bytes))
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
            appended = False
            if p.records:
                try:
                    part.append_as_follower(p.records)
                    appended = True
                except LogError as exc:
                    log.warning("%s-%d: cannot append what leader %d sent: %s; truncating again", topic,
                                part.index, self.leader_id, exc)
                    st.truncating = True
                    return False
            part.update_follower_high_watermark(p.high_watermark, p.log_start_offset)
            return appended
        if err == Errors.OFFSET_OUT_OF_RANGE:
            if 0 <= plog.log_end_offset < p.log_start_offset:
                log.info("%s-%d: behind the leader's log start %d: restarting the log there", topic, part.index,
                         p.log_start_offset)
                plog.truncate_fully_and_start_at(p.log_start_offset)
            else:
                st.truncating = True
            return False
        if err not in _RETRY_ERRORS:
            log.warning("%s-%d: fetch from leader %d: %s", topic, part.index, self.leader_id, Errors(err).name)
        self._delay(st)
        return False
