"""The record batches of a Produce request as the proxy saw it: one reader for every judge of the
transcript that needs producer ids, sequences or the records themselves."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from broker_impl.codec import ProtocolError, batch_headers, decode_records

#: The 12 bytes before a batch's `length` counts from (base offset and the length itself).
_LOG_OVERHEAD = 12


@dataclass(frozen=True)
class Batch:
    """One record batch of one Produce request, as the client sent it."""

    t: float
    partition: str          # topic-partition
    producer_id: int
    epoch: int
    base_sequence: int
    #: The records' values (decoded only when asked for: `values=True`).
    values: tuple[str, ...] = ()


def request_batches(fields: dict, *, t: float = 0.0, unmap: Callable[[str], str] = str,
                    values: bool = False) -> Iterable[Batch]:
    """Every v2 batch of a decoded Produce request's fields; a batch that cannot be read is
    skipped (a corrupted frame is part of some cases)."""
    for topic in fields.get("topic_data") or []:
        for p in topic.get("partition_data") or []:
            yield from _batches(p.get("records"), t, f"{unmap(str(topic.get('name')))}-{p.get('index')}", values)


def _batches(records: Any, t: float, partition: str, values: bool) -> Iterable[Batch]:
    if isinstance(records, str):
        try:
            records = bytes.fromhex(records)
        except ValueError:
            return
    if not isinstance(records, (bytes, bytearray)):
        return
    mv = memoryview(records)
    try:
        for h in batch_headers(records, verify_crc=False):
            if h.magic != 2:
                continue
            vals: tuple[str, ...] = ()
            if values:
                whole = mv[h.position:h.position + h.length + _LOG_OVERHEAD]
                vals = tuple(r.value.decode("utf-8", "replace") for r in decode_records(whole) if r.value is not None)
            yield Batch(t, partition, h.producer_id, h.producer_epoch, h.base_sequence, vals)
    except (ProtocolError, ValueError, struct.error, IndexError):
        return
