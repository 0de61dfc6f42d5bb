"""LogConfig: the Kafka configs the storage layer obeys, read from a plain dict.

Each setting is looked up by its topic-level name first (``segment.bytes``), then by the broker
name (``log.segment.bytes``), then falls back to Kafka's default. Values may be strings, as in a
properties file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

LONG_MAX = (1 << 63) - 1


def _get(cfg: Mapping[str, Any], names: tuple[str, ...], default):
    for n in names:
        if n in cfg and cfg[n] is not None:
            return cfg[n]
    return default


def _int(cfg, names, default) -> int:
    return int(_get(cfg, names, default))


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1 << 30  # log.segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000  # log.roll.ms / log.roll.hours (168 h)
    segment_index_bytes: int = 10 * 1024 * 1024  # log.index.size.max.bytes
    index_interval_bytes: int = 4096  # log.index.interval.bytes
    flush_messages: int = LONG_MAX  # log.flush.interval.messages
    flush_ms: int = LONG_MAX  # log.flush.interval.ms
    max_message_bytes: int = 1048588  # message.max.bytes
    message_timestamp_type: str = "CreateTime"  # log.message.timestamp.type
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000  # Kafka 4.x default: 1 hour
    retention_bytes: int = -1  # log.retention.bytes
    retention_ms: int = 7 * 24 * 3600 * 1000  # log.retention.ms / hours (168 h)
    producer_id_expiration_ms: int = 86_400_000  # producer.id.expiration.ms

    @classmethod
    def from_dict(cls, cfg: Mapping[str, Any] | None = None) -> "LogConfig":
        cfg = cfg or {}
        d = cls()
        roll_ms = _get(cfg, ("segment.ms", "log.roll.ms"), None)
        if roll_ms is None:
            hours = _get(cfg, ("log.roll.hours",), None)
            roll_ms = int(hours) * 3600 * 1000 if hours is not None else d.segment_ms
        retention_ms = _get(cfg, ("retention.ms", "log.retention.ms"), None)
        if retention_ms is None:
            minutes = _get(cfg, ("log.retention.minutes",), None)
            hours = _get(cfg, ("log.retention.hours",), None)
            if minutes is not None:
                retention_ms = int(minutes) * 60 * 1000
            elif hours is not None:
                retention_ms = int(hours) * 3600 * 1000
            else:
                retention_ms = d.retention_ms
        ts_type = str(_get(cfg, ("message.timestamp.type", "log.message.timestamp.type"),
                           d.message_timestamp_type))
        if ts_type not in ("CreateTime", "LogAppendTime"):
            raise ValueError(f"message.timestamp.type must be CreateTime or LogAppendTime, "
                             f"not {ts_type!r}")
        return cls(
            segment_bytes=_int(cfg, ("segment.bytes", "log.segment.bytes"), d.segment_bytes),
            segment_ms=int(roll_ms),
            segment_index_bytes=_int(cfg, ("segment.index.bytes", "log.index.size.max.bytes"),
                                     d.segment_index_bytes),
            index_interval_bytes=_int(cfg, ("index.interval.bytes", "log.index.interval.bytes"),
                                      d.index_interval_bytes),
            flush_messages=_int(cfg, ("flush.messages", "log.flush.interval.messages"),
                                d.flush_messages),
            flush_ms=_int(cfg, ("flush.ms", "log.flush.interval.ms"), d.flush_ms),
            max_message_bytes=_int(cfg, ("max.message.bytes", "message.max.bytes"),
                                   d.max_message_bytes),
            message_timestamp_type=ts_type,
            message_timestamp_before_max_ms=_int(
                cfg, ("message.timestamp.before.max.ms", "log.message.timestamp.before.max.ms"),
                d.message_timestamp_before_max_ms),
            message_timestamp_after_max_ms=_int(
                cfg, ("message.timestamp.after.max.ms", "log.message.timestamp.after.max.ms"),
                d.message_timestamp_after_max_ms),
            retention_bytes=_int(cfg, ("retention.bytes", "log.retention.bytes"),
                                 d.retention_bytes),
            retention_ms=int(retention_ms),
            producer_id_expiration_ms=_int(cfg, ("producer.id.expiration.ms",),
                                           d.producer_id_expiration_ms),
        )

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"
