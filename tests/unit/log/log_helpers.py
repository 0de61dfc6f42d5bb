"""Helpers shared by tests/unit/log: batches built by kafka-python (an independent
encoder) and by our own builder."""

from __future__ import annotations

import time

from kafka.record.default_records import DefaultRecordBatchBuilder

from broker_impl.log import records as rec
from broker_impl.log.producer_state import AppendOrigin


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




def append_marker(log, commit: bool, *, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                  transaction_version: int = 0, now_ms: int | None = None):
    """A COMMIT/ABORT marker appended to ``log`` as WriteTxnMarkers has the leader append it (the
    coordinator's origin); raises INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    batch = rec.build_control_batch(rec.COMMIT if commit else rec.ABORT, producer_id=producer_id,
                                    producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch,
                                    timestamp_ms=now)
    return log.append(batch, origin=AppendOrigin.COORDINATOR, transaction_version=transaction_version, now_ms=now)
