"""Records of ``__transaction_state`` in Kafka's format (TransactionLog.scala).

Key: int16 version 0 + TransactionLogKey. Value: int16 version + TransactionLogValue, version 0
while ``transaction.version`` is 0 and version 1 (flexible, tagged fields) above, as Kafka's
``TransactionVersion.transactionLogValueVersion``. Null value: a tombstone (expired id).
Because the bytes are Kafka's, a Kafka tool (kafka-dump-log --transaction-log-decoder) could
read this broker's transaction log.
"""

from __future__ import annotations

import struct
from functools import lru_cache

from ..cluster.topics import by_topic
from ..protocol.messages import DATA
from .transaction_metadata import TransactionMetadata, TransactionState, TxnTransitMetadata

TRANSACTION_STATE_TOPIC = "__transaction_state"
_KEY = DATA["TransactionLogKey"]
_VALUE = DATA["TransactionLogValue"]
_H = struct.Struct(">h")


def value_version(transaction_version_level: int) -> int:
    return 1 if transaction_version_level >= 1 else 0


@lru_cache(maxsize=4096)
def key_bytes(transactional_id: str) -> bytes:
    """The record key of ``transactional_id`` (cached: every transition of an id writes the
    same key, three times per transaction)."""
    return _H.pack(0) + _KEY.encode(0, _KEY.cls(transactional_id=transactional_id))


def value_bytes(t: TxnTransitMetadata, transaction_version_level: int) -> bytes:
    if t.txn_state is TransactionState.EMPTY and t.topic_partitions:
        raise RuntimeError(f"state Empty with partitions {t.topic_partitions}")
    C = _VALUE.cls
    if t.txn_state is TransactionState.EMPTY:
        parts = None
    else:
        parts = [C.PartitionsSchema(topic=topic, partition_ids=ps)
                 for topic, ps in by_topic(sorted(t.topic_partitions)).items()]
    v = value_version(transaction_version_level)
    return _H.pack(v) + _VALUE.encode(v, C(
        producer_id=t.producer_id, previous_producer_id=t.prev_producer_id,
        next_producer_id=t.next_producer_id, producer_epoch=t.producer_epoch, next_producer_epoch=-1,
        transaction_timeout_ms=t.txn_timeout_ms, transaction_status=t.txn_state.id,
        transaction_partitions=parts, transaction_last_update_timestamp_ms=t.txn_last_update_timestamp,
        transaction_start_timestamp_ms=t.txn_start_timestamp,
        client_transaction_version=t.client_transaction_version))


def read_key(data: bytes) -> str | None:
    """The transactional id, or None for an unknown key version (Kafka skips those)."""
    (version,) = _H.unpack_from(data, 0)
    if version != 0:
        return None
    key, _ = _KEY.decode(0, bytes(data[2:]))
    return key.transactional_id


def read_value(transactional_id: str, data: bytes | None) -> TransactionMetadata | None:
    """The metadata a record holds, None for a tombstone."""
    if data is None:
        return None
    (version,) = _H.unpack_from(data, 0)
    if version not in (0, 1):
        raise ValueError(f"unknown transaction log value version {version}")
    v, _ = _VALUE.decode(version, bytes(data[2:]))
    state = TransactionState.from_id(v.transaction_status)
    parts = set()
    if state is not TransactionState.EMPTY and v.transaction_partitions:
        for ps in v.transaction_partitions:
            parts.update((ps.topic, p) for p in ps.partition_ids)
    return TransactionMetadata(
        transactional_id, v.producer_id, prev_producer_id=v.previous_producer_id,
        next_producer_id=v.next_producer_id, producer_epoch=v.producer_epoch,
        last_producer_epoch=-1, txn_timeout_ms=v.transaction_timeout_ms, state=state,
        topic_partitions=parts, txn_start_timestamp=v.transaction_start_timestamp_ms,
        txn_last_update_timestamp=v.transaction_last_update_timestamp_ms,
        client_transaction_version=v.client_transaction_version)
