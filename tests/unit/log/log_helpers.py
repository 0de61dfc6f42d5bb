"""Helpers shared by tests/unit/log: batches built by kafka-python (an independent
encoder) and by our own builder."""

from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatchBuilder


NOW = 1_700_000_000_000


def kp_batch(n: int = 3, *, codec: int = 0, pid: int = -1, epoch: int = -1, seq: int = -1,
             transactional: bool = False, ts: int = NOW, value: bytes = b"v" * 20) -> bytes:
    """A batch encoded by kafka-python's DefaultRecordBatchBuilder."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec,
                                  is_transactional=transactional, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 22)
    for i in range(n):
        b.append(i, ts + i, b"k%d" % i, value, [("h", b"x")])
    return bytes(b.build())


