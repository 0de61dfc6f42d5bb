"""Kafka's TransactionMetadata / TxnTransitMetadata / TransactionState, as Kafka 4.3 has them.

Why a two-step transition: the coordinator first *prepares* a transition (the result is a
:class:`TxnTransitMetadata` and ``pending_state`` is set, which makes every other request for
the same transactional id answer CONCURRENT_TRANSACTIONS), appends it to ``__transaction_state``
and only when that append is durable *completes* it (:meth:`complete_transition_to`). A crash in
between leaves the log, not memory, as the truth — which is what the recovery after a restart
reads back.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..protocol.errors import Errors, KafkaError

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 32767

# TransactionVersion feature levels (org.apache.kafka.server.common.TransactionVersion)
TV_0 = 0
TV_1 = 1
TV_2 = 2


def supports_epoch_bump(tv: int) -> bool:
    """TV2 (KIP-890 part 2): every EndTxn bumps the producer epoch."""
    return tv >= TV_2


class TransactionState(enum.Enum):
    # value: (id in the log, name on the wire, expiration allowed)
    EMPTY = (0, "Empty", True)
    ONGOING = (1, "Ongoing", False)
    PREPARE_COMMIT = (2, "PrepareCommit", False)
    PREPARE_ABORT = (3, "PrepareAbort", False)
    COMPLETE_COMMIT = (4, "CompleteCommit", True)
    COMPLETE_ABORT = (5, "CompleteAbort", True)
    DEAD = (6, "Dead", False)
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence", False)

    @property
    def id(self) -> int:
        return self.value[0]

    @property
    def state_name(self) -> str:
        return self.value[1]

    @property
    def expiration_allowed(self) -> bool:
        return self.value[2]

    @property
    def valid_previous_states(self) -> frozenset["TransactionState"]:
        return _PREVIOUS[self]

    @classmethod
    def from_id(cls, i: int) -> "TransactionState":
        for s in cls:
            if s.id == i:
                return s
        raise ValueError(f"unknown transaction state id {i}")

    @classmethod
    def from_name(cls, name: str) -> "TransactionState | None":
        for s in cls:
            if s.state_name == name:
                return s
        return None

    def __str__(self) -> str:
        return self.state_name


S = TransactionState
# Kafka 4.3: PrepareAbort may also follow Empty/CompleteCommit/CompleteAbort (a TV2 abort of a
# transaction that added no partition).
_PREVIOUS = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT,
                                S.COMPLETE_ABORT}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}

TopicPartition = tuple  # (topic, partition)


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps Short.MaxValue in reserve so a fence can always bump once more."""
    return epoch >= SHORT_MAX - 1


@dataclass
class TxnTransitMetadata:
    """The state a prepared transition leads to; what gets written to the txn log."""

    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    txn_state: TransactionState
    topic_partitions: set
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: int


class TransactionMetadata:
    def __init__(self, transactional_id: str, producer_id: int, prev_producer_id: int = NO_PRODUCER_ID,
                 next_producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                 last_producer_epoch: int = NO_PRODUCER_EPOCH, txn_timeout_ms: int = 60000,
                 state: TransactionState = S.EMPTY, topic_partitions: set | None = None,
                 txn_start_timestamp: int = -1, txn_last_update_timestamp: int = -1,
                 client_transaction_version: int = TV_0):
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.prev_producer_id = prev_producer_id
        self.next_producer_id = next_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.topic_partitions: set = set(topic_partitions or ())
        self.txn_start_timestamp = txn_start_timestamp
        self.txn_last_update_timestamp = txn_last_update_timestamp
        self.client_transaction_version = client_transaction_version
        self.pending_state: TransactionState | None = None
        self.has_failed_epoch_fence = False

    # ------------------------------------------------------------------ queries
    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def _has_pending_transaction(self) -> bool:
        return self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT)

    def remove_partition(self, tp) -> None:
        if self.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise RuntimeError(f"{self}: removing a partition whose marker was written in state {self.state}")
        self.topic_partitions.discard(tp)

    # ------------------------------------------------------------------ prepare
    def _transit(self, state: TransactionState, **changes) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise RuntimeError(f"preparing transition to {state} while {self.pending_state} is pending")
        data = dict(producer_id=self.producer_id, prev_producer_id=self.producer_id,
                    next_producer_id=self.next_producer_id, producer_epoch=self.producer_epoch,
                    last_producer_epoch=self.last_producer_epoch, txn_timeout_ms=self.txn_timeout_ms,
                    txn_state=state, topic_partitions=set(self.topic_partitions),
                    txn_start_timestamp=self.txn_start_timestamp,
                    txn_last_update_timestamp=self.txn_last_update_timestamp,
                    client_transaction_version=self.client_transaction_version)
        data.update(changes)
        if data["producer_id"] < 0:
            raise ValueError(f"illegal new producer id {data['producer_id']}")
        if state is not S.DEAD and data["producer_epoch"] < 0:
            raise ValueError(f"illegal new producer epoch {data['producer_epoch']}")
        if self.state not in state.valid_previous_states:
            raise RuntimeError(f"{self.transactional_id}: {state} cannot follow {self.state}")
        self.pending_state = state
        return TxnTransitMetadata(**data)

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Ongoing -> PrepareEpochFence with epoch+1 (not again after a failed fence write, never
        past Short.MaxValue)."""
        bumped = self.producer_epoch if (self.has_failed_epoch_fence or self.producer_epoch == SHORT_MAX) \
            else self.producer_epoch + 1
        return self._transit(S.PREPARE_EPOCH_FENCE, producer_epoch=bumped)

    def prepare_increment_producer_epoch(self, new_timeout_ms: int, expected_epoch: int | None,
                                         now: int) -> TxnTransitMetadata:
        if self.is_producer_epoch_exhausted:
            raise RuntimeError(f"cannot allocate any more producer epochs for {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            # a retry of a successful KIP-360 bump: answer the current epoch again
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            raise KafkaError(Errors.PRODUCER_FENCED)
        return self._transit(S.EMPTY, producer_epoch=epoch, last_producer_epoch=last,
                             txn_timeout_ms=new_timeout_ms, topic_partitions=set(),
                             txn_start_timestamp=-1, txn_last_update_timestamp=now)

    def prepare_producer_id_rotation(self, new_producer_id: int, new_timeout_ms: int, now: int,
                                     record_last_epoch: bool) -> TxnTransitMetadata:
        if self._has_pending_transaction():
            raise RuntimeError("cannot rotate producer ids while a transaction is pending")
        return self._transit(S.EMPTY, producer_id=new_producer_id, producer_epoch=0,
                             last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                             txn_timeout_ms=new_timeout_ms, topic_partitions=set(),
                             txn_start_timestamp=-1, txn_last_update_timestamp=now)

    def prepare_add_partitions(self, partitions: set, now: int, client_tv: int) -> TxnTransitMetadata:
        start = now if self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT) else self.txn_start_timestamp
        return self._transit(S.ONGOING, topic_partitions=self.topic_partitions | partitions,
                             txn_start_timestamp=start, txn_last_update_timestamp=now,
                             client_transaction_version=client_tv)

    def prepare_abort_or_commit(self, new_state: TransactionState, client_tv: int, next_producer_id: int,
                                now: int, no_partition_added: bool) -> TxnTransitMetadata:
        if supports_epoch_bump(client_tv):
            if self.producer_epoch == SHORT_MAX and new_state is S.PREPARE_ABORT:
                epoch = self.producer_epoch  # already broken: let the abort through without overflow
            else:
                epoch = self.producer_epoch + 1
            last = self.producer_epoch
        else:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        return self._transit(new_state, producer_epoch=epoch, last_producer_epoch=last,
                             txn_start_timestamp=now if no_partition_added else self.txn_start_timestamp,
                             next_producer_id=next_producer_id, txn_last_update_timestamp=now,
                             client_transaction_version=client_tv)

    def prepare_complete(self, now: int) -> TxnTransitMetadata:
        self.has_failed_epoch_fence = False
        state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        if supports_epoch_bump(self.client_transaction_version) and self.next_producer_id != NO_PRODUCER_ID:
            pid, epoch = self.next_producer_id, 0   # TV2 epoch overflow: the next producer id
        else:
            pid, epoch = self.producer_id, self.producer_epoch
        return self._transit(state, producer_id=pid, producer_epoch=epoch, next_producer_id=NO_PRODUCER_ID,
                             topic_partitions=set(), txn_last_update_timestamp=now)

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._transit(S.DEAD, topic_partitions=set())

    # ------------------------------------------------------------------ complete
    def complete_transition_to(self, t: TxnTransitMetadata) -> None:
        """Apply a prepared transition once its log append is durable (with Kafka's sanity
        checks: a violation means a coordinator bug, never a client error)."""
        to = self.pending_state
        if to is None or to is not t.txn_state:
            raise RuntimeError(f"{self.transactional_id}: completing {t.txn_state} while pending {to}")
        ok = True
        if to is S.EMPTY:
            ok = ((self.producer_epoch == t.producer_epoch or self._valid_epoch_bump(t))
                  and not t.topic_partitions and t.txn_start_timestamp == -1)
        elif to is S.ONGOING:
            ok = self._valid_epoch(t) and t.topic_partitions >= self.topic_partitions \
                and self.txn_timeout_ms == t.txn_timeout_ms
        elif to in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            empty_abort = (to is S.PREPARE_ABORT and supports_epoch_bump(t.client_transaction_version)
                           and self.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT))
            ok = (self._valid_epoch(t) and self.topic_partitions == t.topic_partitions
                  and self.txn_timeout_ms == t.txn_timeout_ms
                  and (self.txn_start_timestamp == t.txn_start_timestamp or empty_abort))
        elif to in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT):
            ok = self._valid_epoch(t) and self.txn_timeout_ms == t.txn_timeout_ms \
                and t.txn_start_timestamp != -1
        elif to in (S.PREPARE_EPOCH_FENCE, S.DEAD):
            ok = False
        if not ok:
            raise RuntimeError(f"{self} failed transition to {t}")
        self.producer_id = t.producer_id
        self.prev_producer_id = t.prev_producer_id
        self.next_producer_id = t.next_producer_id
        self.producer_epoch = t.producer_epoch
        self.last_producer_epoch = t.last_producer_epoch
        self.txn_timeout_ms = t.txn_timeout_ms
        self.topic_partitions = set(t.topic_partitions)
        self.txn_start_timestamp = t.txn_start_timestamp
        self.txn_last_update_timestamp = t.txn_last_update_timestamp
        self.client_transaction_version = t.client_transaction_version
        self.pending_state = None
        self.state = to

    def _valid_epoch(self, t: TxnTransitMetadata) -> bool:
        v2 = supports_epoch_bump(t.client_transaction_version)
        if v2 and t.txn_state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and t.producer_epoch == 0:
            return t.last_producer_epoch == self.last_producer_epoch and t.prev_producer_id == self.producer_id
        if v2 and t.txn_state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return t.last_producer_epoch == self.producer_epoch and t.producer_id == self.producer_id
        return t.producer_epoch == self.producer_epoch and t.producer_id == self.producer_id

    def _valid_epoch_bump(self, t: TxnTransitMetadata) -> bool:
        return t.producer_epoch == self.producer_epoch + 1 or (t.producer_epoch == 0 and t.producer_id != self.producer_id)

    def __repr__(self) -> str:
        return (f"TransactionMetadata({self.transactional_id!r}, pid={self.producer_id}, "
                f"epoch={self.producer_epoch}, last_epoch={self.last_producer_epoch}, state={self.state}, "
                f"pending={self.pending_state}, partitions={sorted(self.topic_partitions)}, "
                f"tv={self.client_transaction_version})")
