"""LogConfig: the Kafka configs the storage layer obeys, read from a plain dict.

Each setting is looked up by its topic-level name first (``segment.bytes``), then by the broker
name (``log.segment.bytes``), then falls back to Kafka's default. Values may be strings, as in a
properties file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

LONG_MAX = (1 << 63) - 1

# Kafka's ConfigType values (DescribeConfigs v3+)
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7

#: Every topic config of Kafka 4.3.1, as its DescribeConfigs lists them for a new topic (measured; here,
#: beside the settings the storage layer obeys, so that the controller's validation and DescribeConfigs
#: share it): name -> (the broker config that supplies its default, or None; the default when
#: there is none or the broker config is not set; Kafka's config type).
TOPIC_DEFAULTS = {
    "cleanup.policy": ("log.cleanup.policy", "delete", LIST),
    "compression.type": ("compression.type", "producer", STRING),
    "compression.gzip.level": (None, "-1", INT),
    "compression.lz4.level": (None, "9", INT),
    "compression.zstd.level": (None, "3", INT),
    "delete.retention.ms": (None, "86400000", LONG),
    "file.delete.delay.ms": (None, "60000", LONG),
    "flush.messages": ("log.flush.interval.messages", None, LONG),
    "flush.ms": ("log.flush.interval.ms", None, LONG),
    "follower.replication.throttled.replicas": (None, "", LIST),
    "index.interval.bytes": ("log.index.interval.bytes", None, INT),
    "leader.replication.throttled.replicas": (None, "", LIST),
    "local.retention.bytes": (None, "-2", LONG),
    "local.retention.ms": (None, "-2", LONG),
    "max.compaction.lag.ms": (None, "9223372036854775807", LONG),
    "max.message.bytes": ("message.max.bytes", None, INT),
    "message.timestamp.after.max.ms": (None, "3600000", LONG),
    "message.timestamp.before.max.ms": (None, "9223372036854775807", LONG),
    "message.timestamp.type": ("log.message.timestamp.type", None, STRING),
    "min.cleanable.dirty.ratio": (None, "0.5", DOUBLE),
    "min.compaction.lag.ms": (None, "0", LONG),
    "min.insync.replicas": ("min.insync.replicas", None, INT),
    "preallocate": (None, "false", BOOLEAN),
    "remote.log.copy.disable": (None, "false", BOOLEAN),
    "remote.log.delete.on.disable": (None, "false", BOOLEAN),
    "remote.storage.enable": (None, "false", BOOLEAN),
    "retention.bytes": ("log.retention.bytes", None, LONG),
    "retention.ms": ("log.retention.ms", None, LONG),
    "segment.bytes": ("log.segment.bytes", None, INT),
    "segment.index.bytes": ("log.index.size.max.bytes", None, INT),
    "segment.jitter.ms": (None, "0", LONG),
    "segment.ms": ("log.roll.ms", None, LONG),
    "unclean.leader.election.enable": ("unclean.leader.election.enable", "false", BOOLEAN),
}


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
