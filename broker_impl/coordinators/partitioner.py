"""Which partition of a coordinator topic owns a key: Kafka's
``Utils.abs(key.hashCode()) % partitions``, for group ids (``__consumer_offsets``) and
transactional ids (``__transaction_state``) alike.

Why Java's hash: FindCoordinator, the log layout and a Kafka tool reading the embedded broker's
internal topics must agree with real Kafka on where a group or a transaction lives. Why a cache:
the coordinators look the same few ids up several times per request (the EndTxn path alone does
it about seven times), and the hash is a Python loop over the id's UTF-16 code units.
"""

from __future__ import annotations

from functools import lru_cache

_INT_MIN = -(1 << 31)


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, 32-bit overflow)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@lru_cache(maxsize=4096)
def partition_for(key: str, num_partitions: int) -> int:
    """``Utils.abs(key.hashCode()) % num_partitions`` (``Utils.abs`` maps Integer.MIN_VALUE
    to 0)."""
    h = java_string_hash(key)
    return (0 if h == _INT_MIN else abs(h)) % num_partitions
