"""One topic-partition on this broker (Kafka's kafka.cluster.Partition and Replica).

Every partition of every topic has one, so Metadata can answer for it; ``log`` is set only where
this broker is a replica. The leader's side of replication lives here:

- the high watermark is the smallest log end offset of the "maximal" ISR (the committed ISR
  plus a replica whose addition is in flight, KIP-497), also waiting for a caught-up replica
  that may join; it never moves while the ISR is smaller than ``min.insync.replicas``
  (KIP-966) -- so acks=all cannot be acknowledged below min ISR, and neither can acks=1 data
  become readable;
- acks=all: ``append_records_to_leader`` refuses with NOT_ENOUGH_REPLICAS when the ISR is
  already below min ISR, and ``wait_for_replication`` answers once the HW passed the append --
  NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below min ISR meanwhile, REQUEST_TIMED_OUT
  when the time is up, NOT_LEADER_OR_FOLLOWER when the leadership went;
- a follower's fetch offset is its log end offset: ``update_follower_fetch_state`` records it and
  when it was last caught up (Replica.updateFetchStateOrThrow), which adds it back to the ISR
  once it reached the HW within the current leader epoch; ``maybe_shrink_isr`` (every
  ``replica.lag.time.max.ms`` / 2) drops followers not caught up for that long. Both only
  *propose* the ISR (AlterPartition to the controller, one in flight at a time); the committed
  ISR changes when the controller's answer or a newer image says so.

A partition nobody replicates -- the one-node broker, which is its own controller -- keeps its
log's high watermark at the log end offset and never waits: exactly the single-node behaviour.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

import trio

from ..log import records as rec
from ..log.errors import UnexpectedAppendOffsetError
from ..log.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from ..protocol.errors import Errors, KafkaError
from .metadata_image import NO_LEADER, PartitionRegistration

UNKNOWN_OFFSET = -1
_log = logging.getLogger("kconform.broker.replicas")


def now_ms() -> int:
    return int(time.time() * 1000)


class ReplicaState:
    """A follower as its leader sees it (Kafka's Replica / ReplicaState)."""

    __slots__ = ("broker_id", "log_end_offset", "log_start_offset", "last_caught_up_ms", "last_fetch_leader_leo",
                 "last_fetch_ms")

    def __init__(self, broker_id: int):
        self.broker_id = broker_id
        self.log_end_offset = UNKNOWN_OFFSET
        self.log_start_offset = UNKNOWN_OFFSET   # as its fetches report it (for DeleteRecords' low watermark)
        self.last_caught_up_ms = 0
        self.last_fetch_leader_leo = UNKNOWN_OFFSET
        self.last_fetch_ms = 0

    def reset(self, now: int, leader_end_offset: int, is_new_leader: bool, in_sync: bool) -> None:
        """Replica.resetReplicaState when this broker starts a new leader epoch."""
        if is_new_leader:
            self.log_end_offset = UNKNOWN_OFFSET
            self.last_fetch_leader_leo = UNKNOWN_OFFSET
            self.last_fetch_ms = 0
        else:
            self.last_fetch_leader_leo = leader_end_offset
            self.last_fetch_ms = now
        self.last_caught_up_ms = now if in_sync else 0

    def update_fetch_state(self, fetch_offset: int, now: int, leader_leo: int) -> None:
        if fetch_offset >= leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now)
        elif fetch_offset >= self.last_fetch_leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_leo = leader_leo
        self.last_fetch_ms = now

    def is_caught_up(self, leader_leo: int, now: int, max_lag_ms: int) -> bool:
        return self.log_end_offset == leader_leo or now - self.last_caught_up_ms <= max_lag_ms


class Partition:
    def __init__(self, topic: str, index: int, log=None, local_id: int = -1, *, replicated: bool = False,
                 min_insync_replicas: int = 1, replica_lag_time_max_ms: int = 30000,
                 broker_alive: Callable[[int], bool] = lambda _id: True,
                 on_append: Callable[[], None] = lambda: None):
        self.topic = topic
        self.index = index
        self.log = log                  # broker_impl.log.PartitionLog where this broker is a replica
        self.local_id = local_id
        #: False: this broker is the whole cluster (HW == log end, nothing waits)
        self.replicated = replicated
        self.min_insync_replicas = min_insync_replicas
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.broker_alive = broker_alive
        #: called after each append as the leader: wakes the fetches in long poll (followers
        #: copy at once, so an acks=all append is replicated in a round trip, not a poll)
        self.on_append = on_append
        # what the controller decided (the image); a one-node broker leads everything, at epoch 0
        # until it restarts (lead_again_after_restart)
        self.replicas: list[int] = [] if replicated else [local_id]
        self.isr: list[int] = list(self.replicas)
        self.leader = NO_LEADER if replicated else local_id
        self.leader_epoch = -1 if replicated else 0
        self.partition_epoch = -1 if replicated else 0
        # the leader's own state
        self.remote: dict[int, ReplicaState] = {}
        self.pending_isr: list[int] | None = None
        self.leader_epoch_start_offset: int | None = 0 if not replicated else None
        self._changed = trio.Event()

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.index}, leader={self.leader}, epoch={self.leader_epoch}, "
                f"isr={self.isr}, replicas={self.replicas})")

    def fence_after_restart(self, last_epoch: int) -> None:
        """A one-node broker starting over the log it left, whose partition was led at
        ``last_epoch``: Kafka's controller fenced that broker when it came back with a new
        incarnation, so until it is unfenced the partition has no leader, at epoch + 1
        (Metadata: LEADER_NOT_AVAILABLE, Produce: NOT_LEADER_OR_FOLLOWER). A broker of a cluster
        learns its epochs from the controller instead."""
        if self.replicated or self.log is None:
            return
        cached = self.log.leader_epoch_cache.latest_epoch
        self.leader = NO_LEADER
        self.leader_epoch = max(last_epoch, cached if cached is not None else 0) + 1
        self._signal()

    def lead_again_after_restart(self) -> None:
        """Unfenced: the controller elects this broker again, at the epoch after the fenced one,
        and the new leader records where its epoch starts (Partition.makeLeader). Measured on
        Apache Kafka 4.3.1, one node: every kill -9 or clean stop and restart moves a partition's
        leader epoch by 2, so clients holding the old one are answered FENCED_LEADER_EPOCH and
        refresh their metadata."""
        if self.replicated or self.log is None or self.leader == self.local_id:
            return
        epoch = self.leader_epoch + 1
        self.leader = self.local_id
        self.leader_epoch = self.log.leader_epoch = epoch
        self.leader_epoch_start_offset = self.log.log_end_offset
        self.log.leader_epoch_cache.assign(epoch, self.log.log_end_offset)
        self._signal()

    def resign_for_shutdown(self) -> None:
        """A one-node broker's controlled shutdown: its controller moves the leadership away
        and, with no other replica, leaves the partition leaderless at the next epoch (what
        Kafka 4.3.1 answers while a single node stops: Metadata LEADER_NOT_AVAILABLE with leader
        -1, Produce NOT_LEADER_OR_FOLLOWER). Nothing is recorded: the next start fences and
        elects from the epoch it led at, two epochs on, as after kill -9."""
        if self.replicated or not self.is_leader:
            return
        self.leader = NO_LEADER
        self.leader_epoch += 1
        self._signal()

    # ================================================================== questions
    @property
    def is_leader(self) -> bool:
        return self.leader == self.local_id and self.log is not None

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def check_current_leader_epoch(self, current: int):
        """Kafka's Partition.checkCurrentLeaderEpoch: a request naming the leader epoch it
        expects (-1: any) gets FENCED_LEADER_EPOCH when that epoch is older than ours and
        UNKNOWN_LEADER_EPOCH when newer; None when it may go on."""
        if current == -1 or current == self.leader_epoch:
            return None
        return Errors.FENCED_LEADER_EPOCH if current < self.leader_epoch else Errors.UNKNOWN_LEADER_EPOCH

    def leader_error(self, current_leader_epoch: int = -1, require_leader: bool = True):
        """Why a client request for this partition cannot be served here (None: it can), in
        Kafka's order (Partition.getLocalLog): NOT_LEADER_OR_FOLLOWER where this broker holds no
        replica, then the epoch check -- a follower knowing a newer epoch answers
        FENCED_LEADER_EPOCH, not NOT_LEADER_OR_FOLLOWER (measured in workloads on three nodes:
        Kafka 4.3.1 55 FENCED_LEADER_EPOCH and 8 UNKNOWN_LEADER_EPOCH on Fetch, no
        NOT_LEADER_OR_FOLLOWER) -- then, where the request must reach the leader
        (``require_leader``), NOT_LEADER_OR_FOLLOWER on any other replica."""
        if self.log is None:
            return Errors.NOT_LEADER_OR_FOLLOWER
        err = self.check_current_leader_epoch(current_leader_epoch)
        if err is not None:
            return err
        return None if self.is_leader or not require_leader else Errors.NOT_LEADER_OR_FOLLOWER

    def effective_min_isr(self) -> int:
        return min(self.min_insync_replicas, len(self.replicas))

    def maximal_isr(self) -> set[int]:
        return set(self.isr) | set(self.pending_isr or ())

    def is_under_min_isr(self) -> bool:
        return self.is_leader and len(self.isr) < self.effective_min_isr()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch (LeaderEpochFileCache.endOffsetFor)."""
        if self.log is None:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        cache = self.log.leader_epoch_cache
        if not self.replicated and cache.latest_epoch is None:
            # A one-node broker leads at epoch 0 from the start; its cache is written with the
            # first batch (not at creation: a topic of many partitions is created in a request).
            return (0, self.log.log_end_offset) if epoch == 0 else (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        return cache.end_offset_for(epoch, self.log.log_end_offset)

    # ================================================================== waiting
    def _signal(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for_change(self) -> None:
        await self._changed.wait()

    # ================================================================== role changes (the image)
    def update_registration(self, reg: PartitionRegistration) -> None:
        """The controller's view of the partition, as Metadata answers it."""
        self.replicas = list(reg.replicas)
        self.isr = list(reg.isr)
        self.leader = reg.leader
        self.leader_epoch = reg.leader_epoch
        self.partition_epoch = reg.partition_epoch

    def make_leader(self, reg: PartitionRegistration, now: int | None = None) -> bool:
        """Partition.makeLeader: take the leadership at ``reg``'s epoch; a new epoch starts at
        the log end offset (epoch cache) and resets what the leader knows of its followers.
        Returns whether this is a new leader epoch."""
        now = now_ms() if now is None else now
        was_leader = self.is_leader
        new_epoch = reg.leader_epoch > self.leader_epoch or not was_leader
        if reg.partition_epoch < self.partition_epoch and was_leader:
            return False
        self.update_registration(reg)
        self.pending_isr = None
        log = self.log
        if self.replicated and log._hw is None:
            log.update_high_watermark(log.log_start_offset)
        followers = [r for r in reg.replicas if r != self.local_id]
        self.remote = {r: self.remote.get(r) or ReplicaState(r) for r in followers}
        if new_epoch:
            start = log.log_end_offset
            log.leader_epoch_cache.assign(reg.leader_epoch, start)
            for r, st in self.remote.items():
                st.reset(now, start, not was_leader, r in reg.isr)
            self.leader_epoch_start_offset = start
        log.leader_epoch = reg.leader_epoch
        self.maybe_increment_hw(now)
        self._signal()
        return new_epoch

    def make_follower(self, reg: PartitionRegistration) -> bool:
        """Partition.makeFollower: follow ``reg.leader``. Returns whether the fetcher must
        (re)start -- a new leader or leader epoch (it then truncates first)."""
        restart = self.is_leader or reg.leader != self.leader or reg.leader_epoch != self.leader_epoch
        self.update_registration(reg)
        self.remote = {}
        self.pending_isr = None
        self.leader_epoch_start_offset = None
        if self.log is not None and self.log._hw is None:
            self.log.update_high_watermark(self.log.log_start_offset)
        self._signal()
        return restart

    def stop_leading(self) -> None:
        """The partition went away from this broker (deleted, or no longer a replica)."""
        self.leader = NO_LEADER
        self.remote = {}
        self.pending_isr = None
        self._signal()

    # ================================================================== the leader's data path
    def append_records_to_leader(self, records, *, origin, required_acks: int, api_version: int = 9,
                                 transaction_version: int = 0, now: int | None = None):
        """Append as the leader (Partition.appendRecordsToLeader): NOT_LEADER_OR_FOLLOWER here
        where this broker does not lead, NOT_ENOUGH_REPLICAS for acks=all below min ISR; the
        log's own refusals (log/errors) as they come."""
        if not self.is_leader:
            raise KafkaError(Errors.NOT_LEADER_OR_FOLLOWER)
        if required_acks == -1 and len(self.isr) < self.effective_min_isr():
            raise KafkaError(Errors.NOT_ENOUGH_REPLICAS,
                             f"The size of the current ISR {sorted(self.isr)} is insufficient to satisfy the min.isr "
                             f"requirement of {self.effective_min_isr()} for partition {self.topic}-{self.index}")
        info = self.log.append(records, origin=origin, api_version=api_version,
                               transaction_version=transaction_version, now_ms=now)
        self.maybe_increment_hw(now)
        if not info.duplicate:
            self.on_append()
        return info

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, Errors]:
        """Partition.checkEnoughReplicasReachOffset for a waiting acks=all append."""
        if not self.is_leader:
            return False, Errors.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark >= required_offset:
            if self.effective_min_isr() <= len(self.maximal_isr()):
                return True, Errors.NONE
            return True, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return False, Errors.NONE

    async def wait_for_replication(self, required_offset: int, timeout_ms: int) -> Errors:
        """DelayedProduce for one partition: wait until the HW reaches ``required_offset`` (the
        offset after the append). NONE, NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER
        or REQUEST_TIMED_OUT."""
        with trio.move_on_after(max(timeout_ms, 0) / 1000.0):
            while True:
                done, err = self.check_enough_replicas_reach_offset(required_offset)
                if done or err != Errors.NONE:
                    return err
                await self._changed.wait()
        done, err = self.check_enough_replicas_reach_offset(required_offset)
        return err if done or err != Errors.NONE else Errors.REQUEST_TIMED_OUT

    # ================================================================== DeleteRecords
    def delete_records_on_leader(self, offset: int) -> int:
        """Partition.deleteRecordsOnLeader: move the leader's log start to ``offset`` (-1: the high
        watermark) and return the offset asked for. NOT_LEADER_OR_FOLLOWER off the leader,
        OFFSET_OUT_OF_RANGE below 0 or above the high watermark (as KafkaErrors)."""
        if not self.is_leader:
            raise KafkaError(Errors.NOT_LEADER_OR_FOLLOWER,
                             f"Leader not local for partition {self.topic}-{self.index}")
        log = self.log
        wanted = log.high_watermark if offset == -1 else offset
        if wanted < 0:
            raise KafkaError(Errors.OFFSET_OUT_OF_RANGE,
                             f"The offset {wanted} for partition {self.topic}-{self.index} is not valid")
        log.maybe_increment_log_start_offset(wanted)
        return wanted

    def low_watermark(self) -> int:
        """Partition.lowWatermarkIfLeader: the lowest log start offset of this replica and of
        every replica on an alive broker -- what a DeleteRecords has made true everywhere."""
        low = self.log.log_start_offset
        for r, st in self.remote.items():
            if self.broker_alive(r) and st.log_start_offset < low:
                low = st.log_start_offset
        return low

    async def wait_for_low_watermark(self, offset: int, timeout_ms: int) -> tuple[Errors, int]:
        """DelayedDeleteRecords for one partition: NONE and the low watermark once it reaches
        ``offset``; REQUEST_TIMED_OUT when it does not in time; NOT_LEADER_OR_FOLLOWER if this
        replica stops leading meanwhile."""
        with trio.move_on_after(max(timeout_ms, 0) / 1000.0):
            while True:
                if not self.is_leader:
                    return Errors.NOT_LEADER_OR_FOLLOWER, -1
                low = self.low_watermark()
                if low >= offset:
                    return Errors.NONE, low
                await self._changed.wait()
        return Errors.REQUEST_TIMED_OUT, self.log.log_start_offset

    def maybe_increment_hw(self, now: int | None = None) -> bool:
        """Partition.maybeIncrementLeaderHW (module doc). True when the HW moved."""
        if not self.replicated or not self.is_leader or self.is_under_min_isr():
            return False
        now = now_ms() if now is None else now
        log = self.log
        leo = log.log_end_offset
        new_hw = leo
        maximal = self.maximal_isr()
        for r, st in self.remote.items():
            if st.log_end_offset < new_hw and (
                    r in maximal or (st.is_caught_up(leo, now, self.replica_lag_time_max_ms) and self.broker_alive(r))):
                new_hw = st.log_end_offset
        if new_hw > log.high_watermark:
            log.update_high_watermark(new_hw)
            self._signal()
            return True
        return False

    # ================================================================== followers, seen by the leader
    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int, now: int | None = None,
                                    log_start_offset: int = UNKNOWN_OFFSET) -> list[int] | None:
        """A follower fetched from ``fetch_offset`` (its log end offset), its log starting at
        ``log_start_offset``. Returns an ISR to propose (AlterPartition) when it may join the ISR,
        else None."""
        st = self.remote.get(replica_id)
        if st is None:
            raise KafkaError(Errors.NOT_LEADER_OR_FOLLOWER,
                             f"Replica {replica_id} is not a replica of {self.topic}-{self.index}")
        now = now_ms() if now is None else now
        leo = self.log.log_end_offset
        moved = st.log_end_offset != fetch_offset
        st.update_fetch_state(fetch_offset, now, leo)
        if log_start_offset != st.log_start_offset:
            st.log_start_offset = log_start_offset
            self._signal()   # a DeleteRecords may be waiting for this follower
        proposal = self._maybe_expand_isr(replica_id)
        if moved:
            self.maybe_increment_hw(now)
        return proposal

    def _maybe_expand_isr(self, replica_id: int) -> list[int] | None:
        if self.pending_isr is not None or replica_id in self.isr or not self.broker_alive(replica_id):
            return None
        st = self.remote[replica_id]
        start = self.leader_epoch_start_offset
        if st.log_end_offset >= self.log.high_watermark and start is not None and st.log_end_offset >= start:
            self.pending_isr = [r for r in self.replicas if r in self.isr or r == replica_id]
            return self.pending_isr
        return None

    def maybe_shrink_isr(self, now: int | None = None) -> list[int] | None:
        """The ISR without the followers that have not caught up for replica.lag.time.max.ms
        (None when nothing to change or a change is in flight)."""
        if not self.replicated or not self.is_leader or self.pending_isr is not None:
            return None
        now = now_ms() if now is None else now
        leo = self.log.log_end_offset
        out = [r for r in self.isr if r != self.local_id
               and not (r in self.remote and self.remote[r].is_caught_up(leo, now, self.replica_lag_time_max_ms))]
        if not out:
            return None
        self.pending_isr = [r for r in self.isr if r not in out]
        return self.pending_isr

    def on_alter_partition_response(self, error: Errors, reg: PartitionRegistration | None) -> None:
        """The controller's answer to our proposal: the committed ISR (and partition epoch)
        when accepted; otherwise the proposal is dropped and the next image tells the truth."""
        self.pending_isr = None
        if error == Errors.NONE and reg is not None and reg.partition_epoch >= self.partition_epoch \
                and reg.leader_epoch == self.leader_epoch:
            self.isr = list(reg.isr)
            self.partition_epoch = reg.partition_epoch
        self.maybe_increment_hw()
        self._signal()

    # ================================================================== the follower's data path
    def append_as_follower(self, records):
        """Append the leader's batches; an empty log whose start falls inside the first batch
        (the leader's DeleteRecords offset was not at a batch boundary, and this replica restarted
        its log there) starts again at that batch's base offset and takes it whole, as Kafka's
        Partition.appendRecordsToFollowerOrFutureReplica does on UnexpectedAppendOffsetException;
        the leader's log start, taken from the fetch response, then moves its start back up."""
        log = self.log
        try:
            return log.append_as_follower(records)
        except UnexpectedAppendOffsetError:
            headers = rec.iter_batch_headers(records, verify_crc=False)
            leo = log.log_end_offset
            if not headers or leo != log.log_start_offset or not headers[0].base_offset < leo <= headers[0].last_offset:
                raise
            _log.info("%s-%d: the first batch fetched (%d-%d) holds this empty log's start %d: starting the log "
                      "at %d", self.topic, self.index, headers[0].base_offset, headers[0].last_offset, leo,
                      headers[0].base_offset)
            log.truncate_fully_and_start_at(headers[0].base_offset)
            return log.append_as_follower(records)

    def update_follower_high_watermark(self, leader_hw: int, leader_log_start: int = -1) -> None:
        """The high watermark and log start offset a leader's fetch response gave (Kafka's
        ReplicaFetcherThread.processPartitionData): the start follows a DeleteRecords on the
        leader, up to what this replica holds below its high watermark."""
        log = self.log
        if min(leader_hw, log.log_end_offset) != log.high_watermark:
            log.update_high_watermark(leader_hw)
            self._signal()
        if leader_log_start > log.log_start_offset:
            log.maybe_increment_log_start_offset(min(leader_log_start, log.high_watermark))
