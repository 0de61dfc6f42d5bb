"""Fetch sessions (KIP-227): the FetchSessionCache and the four fetch contexts, as Kafka's FetchManager.

Why it matters to a conformance harness: a client that keeps a session sends only what changed
(incremental fetches: new partitions, new offsets, forgotten topics) and the broker answers only the
partitions that have something to say, so a client's session bookkeeping -- epochs, forgotten
partitions, a session the broker evicted or lost in a restart (FETCH_SESSION_ID_NOT_FOUND), a
request version whose use of topic ids differs from the session's (FETCH_SESSION_TOPIC_ID_ERROR:
the Java client drops to Fetch v12 when a topic's id is missing from its metadata) -- is only
exercised by a broker that keeps sessions. A broker answering every request sessionless is legal
(Kafka does so when its cache is full) but never takes a client down those paths.

How Kafka decides (FetchManager.newContext), and so this module:
- epoch 0 (INITIAL) or -1 (FINAL) is a *full* fetch: a session id named with it is closed first;
  with epoch 0 a new session is made once the response is known (if the cache has room, or can
  evict), with -1 none (*sessionless*);
- any other epoch is *incremental*: the session must exist (FETCH_SESSION_ID_NOT_FOUND), the epoch
  must be the session's (INVALID_FETCH_SESSION_EPOCH), the request version must use topic ids as
  the session does (v13+, FETCH_SESSION_TOPIC_ID_ERROR); the request's partitions are added or
  updated, the forgotten ones removed (none left: the session is closed and the fetch answered
  sessionless), the session's epoch moves on, and the fetch reads every partition of the session;
- an incremental response holds only the partitions with records, a changed high watermark or
  log start offset, an error, a diverging epoch or a preferred read replica (not a changed last
  stable offset: Kafka does not look at it); a partition that returned records moves to the end
  of the session, so the next fetch reads the others first.
- The cache is 8 shards of `max.incremental.fetch.session.cache.slots / 8` sessions each; a
  session id lies in its shard's range, and a session id past the last shard's range makes Kafka
  throw while finding the shard (the request is answered UNKNOWN_SERVER_ERROR: measured on 4.3.1
  for session id 2^31-1). A new session may evict a stale one (unused for 120 s), else the least
  valuable evictable one: sessions older than 120 s (any session, for a follower's new one) rank by
  (privileged, number of partitions, id) and the newcomer must rank at least as high.

Sans-IO: times are milliseconds passed in; the Fetch handler reads the partitions.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..protocol.errors import Errors, KafkaError

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_INT32 = 0x7FFFFFFF
#: BrokerServer's NumFetchSessionCacheShards, and each shard's share of the session ids.
SHARDS = 8
SESSION_ID_RANGE = MAX_INT32 // SHARDS
#: KafkaBroker.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS.
EVICTION_MS = 120_000

Key = tuple[Any, bytes, int]


def key_of(topic: str | None, topic_id: bytes, partition: int) -> Key:
    """A partition's identity in a request and a session, as Kafka's CachedPartition compares them:
    by topic id from v13 (where requests name no topic: `topic` is None), by name before (the id
    is zero). One key for every context: a v13+ request's partitions of different topics with the
    same number are different partitions."""
    return (topic, topic_id, partition)


def next_epoch(epoch: int) -> int:
    """FetchMetadata.nextEpoch: -1 stays -1, the last int wraps to 1 (0 is never a next epoch)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == MAX_INT32 else epoch + 1


@dataclass
class FetchTarget:
    """One partition a fetch reads: its topic as the request (or the session) names it."""

    topic: str | None          # None: an unknown topic id (v13+)
    topic_id: bytes
    #: What the request (or the session's CachedPartition) says of it: partition, fetch_offset,
    #: log_start_offset, partition_max_bytes, current_leader_epoch, last_fetched_epoch.
    fp: Any


@dataclass(eq=False)
class CachedPartition:
    """A session's partition: the last request parameters, and what the fetcher was last told
    (high watermark, log start offset) -- the incremental response leaves it out while those
    stay and nothing else has to be said."""

    topic: str | None
    topic_id: bytes
    partition: int
    fetch_offset: int
    log_start_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int
    high_watermark: int = -1
    local_log_start_offset: int = -1

    @classmethod
    def of(cls, t: FetchTarget) -> "CachedPartition":
        fp = t.fp
        return cls(t.topic, t.topic_id, fp.partition, fp.fetch_offset, fp.log_start_offset, fp.partition_max_bytes,
                   fp.current_leader_epoch, fp.last_fetched_epoch)

    def update_request(self, fp: Any) -> None:
        self.fetch_offset, self.log_start_offset = fp.fetch_offset, fp.log_start_offset
        self.partition_max_bytes, self.current_leader_epoch = fp.partition_max_bytes, fp.current_leader_epoch
        self.last_fetched_epoch = fp.last_fetched_epoch

    def must_respond(self, pr: Any, update: bool) -> bool:
        """Whether the incremental response carries this partition (CachedPartition.
        maybeUpdateResponseData); with `update`, remember what it is told."""
        respond = bool(pr.records)
        if self.high_watermark != pr.high_watermark:
            respond = True
            if update:
                self.high_watermark = pr.high_watermark
        if self.local_log_start_offset != pr.log_start_offset:
            respond = True
            if update:
                self.local_log_start_offset = pr.log_start_offset
        if getattr(pr, "preferred_read_replica", -1) >= 0:
            respond = True
        if pr.error_code != 0:
            # an error always goes out, and the next answer after it too
            if update:
                self.high_watermark = -1
            respond = True
        diverging = getattr(pr, "diverging_epoch", None)
        if diverging is not None and diverging.epoch >= 0:
            respond = True
        return respond


@dataclass(eq=False)
class FetchSession:
    id: int
    privileged: bool
    partitions: dict[Key, CachedPartition]
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int
    #: The size the cache last saw (-1: not in the cache); and, as of the last touch, whether any
    #: new session (or only a privileged one) may evict it.
    cached_size: int = -1
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False

    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, self.cached_size, self.id)

    def update(self, wanted: dict[Key, FetchTarget], forget: Iterable[Key]) -> None:
        """The request's partitions added (or their parameters updated), the forgotten removed."""
        for key, t in wanted.items():
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = CachedPartition.of(t)
            else:
                cached.update_request(t.fp)
        for key in forget:
            self.partitions.pop(key, None)


class FetchSessionCacheShard:
    def __init__(self, max_entries: int, eviction_ms: int, shard: int, rng: random.Random) -> None:
        self.max_entries, self.eviction_ms, self.shard, self.rng = max_entries, eviction_ms, shard, rng
        self.sessions: dict[int, FetchSession] = {}

    def _new_session_id(self) -> int:
        low, high = max(1, self.shard * SESSION_ID_RANGE), (self.shard + 1) * SESSION_ID_RANGE
        while True:
            sid = self.rng.randrange(low, high)
            if sid not in self.sessions and sid != INVALID_SESSION_ID:
                return sid

    def maybe_create(self, now: int, privileged: bool, size: int, uses_topic_ids: bool,
                     partitions: dict[Key, CachedPartition]) -> int:
        """A new session's id, or INVALID_SESSION_ID when there is no room and nothing to evict."""
        if len(self.sessions) >= self.max_entries and not self._try_evict(privileged, (privileged, size, 0), now):
            return INVALID_SESSION_ID
        session = FetchSession(self._new_session_id(), privileged, partitions, uses_topic_ids, now, now,
                               next_epoch(INITIAL_EPOCH))
        self.sessions[session.id] = session
        self.touch(session, now)
        return session.id

    def _try_evict(self, privileged: bool, key: tuple[bool, int, int], now: int) -> bool:
        if not self.sessions:
            return False
        stale = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - stale.last_used_ms > self.eviction_ms:
            self.remove(stale.id)
            return True
        pool = [s for s in self.sessions.values() if (s.evictable_by_privileged if privileged else s.evictable_by_all)]
        if not pool:
            return False
        least = min(pool, key=FetchSession.evictable_key)
        if key < least.evictable_key():
            return False
        self.remove(least.id)
        return True

    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)

    def touch(self, session: FetchSession, now: int) -> None:
        session.last_used_ms = now
        session.cached_size = len(session.partitions)
        old = now - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = not session.privileged or old
        session.evictable_by_all = old


class FetchSessionCache:
    def __init__(self, slots: int, eviction_ms: int = EVICTION_MS, seed: int | None = None) -> None:
        rng = random.Random(seed)
        self.shards = [FetchSessionCacheShard(slots // SHARDS, eviction_ms, n, rng) for n in range(SHARDS)]
        self._next = 0

    def shard_of(self, session_id: int) -> FetchSessionCacheShard:
        """The shard a session id belongs to; an id past every shard's range is what Kafka fails
        on (an index out of bounds: UNKNOWN_SERVER_ERROR)."""
        n = int(session_id / SESSION_ID_RANGE)    # Java's int division truncates toward zero
        if not 0 <= n < len(self.shards):
            raise KafkaError(Errors.UNKNOWN_SERVER_ERROR, f"no fetch session cache shard for session id {session_id}")
        return self.shards[n]

    def next_shard(self) -> FetchSessionCacheShard:
        shard = self.shards[self._next % len(self.shards)]
        self._next += 1
        return shard

    def __len__(self) -> int:
        return sum(len(s.sessions) for s in self.shards)

    def new_context(self, version: int, session_id: int, epoch: int, follower: bool,
                    wanted: list[FetchTarget], forget: list[tuple[str | None, bytes, int]], now: int) -> "FetchContext":
        """FetchManager.newContext for one Fetch request (v7+; older requests are sessionless).
        Raises KafkaError(UNKNOWN_SERVER_ERROR) where Kafka throws."""
        uses_ids = version >= 13
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.shard_of(session_id).remove(session_id)
            if epoch == FINAL_EPOCH:
                return FetchContext(self, "sessionless", wanted)
            return FetchContext(self, "full", wanted, uses_ids=uses_ids, follower=follower)
        shard = self.shard_of(session_id)
        session = shard.sessions.get(session_id)
        if session is None:
            return FetchContext(self, "error", [], error=Errors.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext(self, "error", [], error=Errors.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_ids:
            return FetchContext(self, "error", [], error=Errors.FETCH_SESSION_TOPIC_ID_ERROR)
        by_key = {key_of(t.topic, t.topic_id, t.fp.partition): t for t in wanted}
        session.update(by_key, [key_of(topic, tid, p) for topic, tid, p in forget])
        if not session.partitions:
            shard.remove(session.id)
            return FetchContext(self, "sessionless", wanted)
        shard.touch(session, now)
        session.epoch = next_epoch(session.epoch)
        return FetchContext(self, "incremental", [], session=session, expected_epoch=next_epoch(epoch))


@dataclass
class FetchContext:
    """What one Fetch request reads and how its answer is made (Kafka's FetchContext kinds:
    error, sessionless, full, incremental)."""

    cache: FetchSessionCache
    kind: str
    wanted: list[FetchTarget]
    error: Errors = Errors.NONE
    uses_ids: bool = False
    follower: bool = False
    session: FetchSession | None = None
    expected_epoch: int = 0
    targets: list[FetchTarget] = field(init=False)

    def __post_init__(self) -> None:
        if self.session is not None:
            self.targets = [FetchTarget(c.topic, c.topic_id, c) for c in self.session.partitions.values()]
        else:
            unique: dict[Key, FetchTarget] = {}
            for t in self.wanted:    # a partition named twice is read once, where first named
                k = key_of(t.topic, t.topic_id, t.fp.partition)
                if k in unique:
                    unique[k].fp = t.fp
                else:
                    unique[k] = FetchTarget(t.topic, t.topic_id, t.fp)
            self.targets = list(unique.values()) if self.kind != "error" else []

    def respond(self, answers: list[tuple[FetchTarget, Any]], now: int) -> tuple[Errors, int, list[tuple[FetchTarget, Any]]]:
        """(top-level error, session id, the partitions to answer) once every target was read,
        `answers` in the order of `targets`."""
        if self.kind == "error":
            return self.error, INVALID_SESSION_ID, []
        if self.kind == "sessionless":
            return Errors.NONE, INVALID_SESSION_ID, answers
        if self.kind == "full":
            partitions: dict[Key, CachedPartition] = {}
            for t, pr in answers:
                cached = CachedPartition.of(t)
                cached.high_watermark, cached.local_log_start_offset = pr.high_watermark, pr.log_start_offset
                partitions[key_of(t.topic, t.topic_id, t.fp.partition)] = cached
            sid = self.cache.next_shard().maybe_create(now, self.follower, len(answers), self.uses_ids, partitions)
            return Errors.NONE, sid, answers
        session = self.session
        assert session is not None
        if session.epoch != self.expected_epoch:
            # another request of the same session went first (a duplicate request)
            return Errors.INVALID_FETCH_SESSION_EPOCH, session.id, []
        kept = []
        for t, pr in answers:
            key = key_of(t.topic, t.topic_id, t.fp.partition)
            cached = session.partitions.get(key)
            if cached is None or not cached.must_respond(pr, update=True):
                continue
            kept.append((t, pr))
            if pr.records:
                session.partitions[key] = session.partitions.pop(key)
        return Errors.NONE, session.id, kept
