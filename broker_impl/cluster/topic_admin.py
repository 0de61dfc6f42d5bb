"""The decisions of CreatePartitions and (Incremental)AlterConfigs on a topic, shared by the
one-node broker (its own controller) and the cluster's controller: Kafka's
ReplicationControlManager.createPartitions and ConfigurationControlManager with its
ControllerConfigurationValidator (LogConfig.validate). Pure functions: they compute the new
state or raise KafkaError with Kafka's error and message; the caller applies and persists it.
"""

from __future__ import annotations

from ..protocol.errors import Errors, KafkaError
from ..log.config import TOPIC_DEFAULTS
from .topics import validate_topic_name

# IncrementalAlterConfigs' OpType
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


# ====================================================================== CreatePartitions
def new_partition_replicas(name: str, current: int, replication_factor: int, count: int, assignments: list[list[int]] | None,
                           registered: list[int], alive: list[int], start: int = 0) -> list[list[int]]:
    """The replicas of the partitions ``current .. count-1`` of a topic that has ``current``
    partitions of ``replication_factor`` replicas: the request's manual ``assignments`` (one per
    new partition) checked, or placed round-robin over the ``alive`` brokers from ``start``."""
    if count == current:
        raise KafkaError(Errors.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
    if count < current:
        raise KafkaError(Errors.INVALID_PARTITIONS, f"The topic {name} currently has {current} partition(s); "
                                                    f"{count} would not be an increase.")
    additional = count - current
    if assignments is not None:
        if len(assignments) != additional:
            raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                             f"Attempted to add {additional} additional partition(s), but only "
                             f"{len(assignments)} assignment(s) were specified.")
        out = []
        for i, replicas in enumerate(assignments):
            if not replicas:
                raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                                 "The manual partition assignment includes an empty replica list.")
            previous = None
            for broker_id in sorted(replicas):
                if broker_id not in registered:
                    raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                                     f"The manual partition assignment includes broker {broker_id}, but no such "
                                     "broker is registered.")
                if broker_id == previous:
                    raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                                     f"The manual partition assignment includes the broker {broker_id} more than "
                                     "once.")
                previous = broker_id
            if len(replicas) != replication_factor:
                raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                                 f"The manual partition assignment includes a partition with {len(replicas)} "
                                 f"replica(s), but this is not consistent with previous partitions, which have "
                                 f"{replication_factor} replica(s).")
            if not any(r in alive for r in replicas):
                raise KafkaError(Errors.INVALID_REPLICA_ASSIGNMENT,
                                 "All brokers specified in the manual partition assignment for partition "
                                 f"{current + i} are fenced or in controlled shutdown.")
            out.append(list(replicas))
        return out
    if not alive:
        raise KafkaError(Errors.INVALID_REPLICATION_FACTOR,
                         f"Unable to replicate the partition {replication_factor} time(s): All brokers are "
                         "currently fenced or in controlled shutdown.")
    if replication_factor > len(alive):
        raise KafkaError(Errors.INVALID_REPLICATION_FACTOR,
                         f"Unable to replicate the partition {replication_factor} time(s): The target replication "
                         f"factor of {replication_factor} cannot be reached because only {len(alive)} broker(s) "
                         "are registered.")
    return [[alive[(start + p + i) % len(alive)] for i in range(replication_factor)]
            for p in range(current, count)]


# ====================================================================== topic configs
def _at_least(lo):
    def check(v):
        return None if v >= lo else f"Value must be at least {lo}"
    return check


def _between(lo, hi):
    def check(v):
        if v < lo:
            return f"Value must be at least {lo}"
        return None if v <= hi else f"Value must be no more than {hi}"
    return check


def _gzip_level(v):
    return None if v == -1 or 1 <= v <= 9 else "Value must be between 1 and 9 or equal to -1"


def _one_of(*choices):
    def check(v):
        return None if v in choices else f"String must be one of: {', '.join(choices)}"
    return check


def _list_of(*choices):
    def check(v):
        bad = [x for x in v.split(",") if x.strip() not in choices]
        return None if not bad else f"String must be one of: {', '.join(choices)}"
    return check


#: Kafka's LogConfig validators of the topic configs (the type is in log/config.TOPIC_DEFAULTS)
VALIDATORS = {
    "cleanup.policy": _list_of("compact", "delete"),
    "compression.type": _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    "compression.gzip.level": _gzip_level,
    "compression.lz4.level": _between(1, 17),
    "compression.zstd.level": _between(-131072, 22),
    "local.retention.bytes": _at_least(-2),
    "local.retention.ms": _at_least(-2),
    "segment.bytes": _at_least(1048576),
    "delete.retention.ms": _at_least(0),
    "file.delete.delay.ms": _at_least(0),
    "flush.messages": _at_least(1),
    "flush.ms": _at_least(0),
    "index.interval.bytes": _at_least(0),
    "max.compaction.lag.ms": _at_least(1),
    "max.message.bytes": _at_least(0),
    "message.timestamp.after.max.ms": _at_least(0),
    "message.timestamp.before.max.ms": _at_least(0),
    "message.timestamp.type": _one_of("CreateTime", "LogAppendTime"),
    "min.cleanable.dirty.ratio": _between(0, 1),
    "min.compaction.lag.ms": _at_least(0),
    "min.insync.replicas": _at_least(1),
    "retention.ms": _at_least(-1),
    "segment.index.bytes": _at_least(4),
    "segment.jitter.ms": _at_least(0),
    "segment.ms": _at_least(1),
}

_PARSE_ERRORS = {3: "Not a number of type INT", 5: "Not a number of type LONG", 6: "Not a number of type DOUBLE",
                 1: "Expected value to be either true or false"}
_INT_RANGE = {3: (-(1 << 31), (1 << 31) - 1), 5: (-(1 << 63), (1 << 63) - 1)}


def _parse(ctype: int, value: str):
    v = value.strip()
    if ctype in _INT_RANGE:
        n = int(v)
        lo, hi = _INT_RANGE[ctype]
        if not lo <= n <= hi:
            raise ValueError(v)
        return n
    if ctype == 6:
        return float(v)
    if ctype == 1:
        if v.lower() not in ("true", "false"):
            raise ValueError(v)
        return v.lower() == "true"
    return v


def validate_topic_configs(configs: dict[str, str], known: dict[str, tuple], validators=None) -> None:
    """LogConfig.validate: every name a topic config of ``known`` (name -> (broker key,
    default, Kafka type)), every value of its type and range; INVALID_CONFIG otherwise."""
    for name in configs:
        if name not in known:
            raise KafkaError(Errors.INVALID_CONFIG, f"Unknown topic config name: {name}")
    for name, value in configs.items():
        ctype = known[name][2]
        try:
            parsed = _parse(ctype, value)
        except ValueError:
            raise KafkaError(Errors.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: "
                                                    f"{_PARSE_ERRORS[ctype]}") from None
        check = (VALIDATORS if validators is None else validators).get(name)
        why = check(parsed) if check else None
        if why:
            raise KafkaError(Errors.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: {why}")
    lag = {n: int(configs[n]) for n in ("min.compaction.lag.ms", "max.compaction.lag.ms") if n in configs}
    if validators is None and len(lag) == 2 and lag["min.compaction.lag.ms"] > lag["max.compaction.lag.ms"]:
        raise KafkaError(Errors.INVALID_CONFIG,   # LogConfig.validateValues
                         f"conflict topic config setting min.compaction.lag.ms ({lag['min.compaction.lag.ms']}) > "
                         f"max.compaction.lag.ms ({lag['max.compaction.lag.ms']})")


def topic_default(config, name: str) -> str | None:
    """A topic config's value when the topic has none of its own: the broker config that
    supplies it, else Kafka's default."""
    bkey, fallback, _ctype = TOPIC_DEFAULTS.get(name, (None, None, None))
    return config.values.get(bkey, fallback) if bkey else fallback


def alter_topic_configs(config, name: str, current: dict[str, str], ops: list[tuple[str, int, str | None]] | None,
                        replace: dict[str, str] | None) -> dict[str, str]:
    """Topic ``name``'s own configs after IncrementalAlterConfigs (``ops``) or AlterConfigs
    (``replace``: the whole new set, as the legacy API means it), validated
    (ControllerConfigurationValidator: the name first, then LogConfig); raises KafkaError."""
    if not name:
        raise KafkaError(Errors.INVALID_REQUEST, "Default topic resources are not allowed.")
    validate_topic_name(name)
    if replace is not None:
        validate_topic_configs(replace, TOPIC_DEFAULTS)
        return dict(replace)
    return incremental_alter(current, ops, TOPIC_DEFAULTS, lambda name: topic_default(config, name))


def incremental_alter(current: dict[str, str], ops: list[tuple[str, int, str | None]], known: dict[str, tuple],
                      default_of, validators=None) -> dict[str, str]:
    """ConfigurationControlManager.incrementalAlterConfigResource on a topic's own configs:
    the new configs after ``ops`` (name, operation, value), validated. ``default_of(name)`` is
    what APPEND / SUBTRACT start from when the topic has no value of its own."""
    new = dict(current)
    for name, op, value in ops:
        if op == SET:
            new[name] = value
        elif op == DELETE:
            new.pop(name, None)
        elif op in (APPEND, SUBTRACT):
            if name not in known or known[name][2] != 7:
                raise KafkaError(Errors.INVALID_CONFIG,
                                 f"Can't {OP_NAMES[op]} to key {name} because its type is not LIST.")
            base = new.get(name)
            if base is None:
                base = default_of(name)
            parts = [x for x in (base or "").split(",") if x]
            for x in (value or "").split(","):
                if op == APPEND and x not in parts:
                    parts.append(x)
                elif op == SUBTRACT and x in parts:
                    parts.remove(x)
            new[name] = ",".join(parts)
        else:
            raise KafkaError(Errors.INVALID_REQUEST, f"Unknown alter configs operation {op}")
    validate_topic_configs(new, known, validators)
    return new


# ====================================================================== cluster-wide broker defaults
def broker_default_keys() -> dict[str, str]:
    """The broker configs this broker changes at run time: those that supply a topic config's
    default (Kafka's DynamicLogConfig), broker key -> topic config name."""
    return {bkey: name for name, (bkey, _fallback, _ctype) in TOPIC_DEFAULTS.items() if bkey}


def alter_broker_defaults(static: dict[str, str], current: dict[str, str],
                          ops: list[tuple[str, int, str | None]]) -> dict[str, str]:
    """The cluster-wide dynamic broker configs (the BROKER resource "") after ``ops``: only the
    defaults of topic configs, validated as the topic configs are; a bad value is
    INVALID_REQUEST, as Kafka's ConfigAdminManager answers it (KAFKA-13609)."""
    keys = broker_default_keys()
    other = [name for name, _op, _value in ops if name not in keys]
    if other:
        raise KafkaError(Errors.INVALID_REQUEST,
                         f"The embedded broker does not change these configs at run time: {', '.join(other)} "
                         "(only the broker defaults of topic configs)")
    known = {bkey: (bkey, None, TOPIC_DEFAULTS[name][2]) for bkey, name in keys.items()}
    validators = {bkey: VALIDATORS[name] for bkey, name in keys.items() if name in VALIDATORS}
    try:
        return incremental_alter(current, ops, known, static.get, validators)
    except KafkaError as exc:
        raise KafkaError(Errors.INVALID_REQUEST, exc.message) from None
