"""The vocabulary every driver normalises to: Kafka's error names, plus a few names of its own.

Why: each client spells errors its own way (librdkafka says NOT_LEADER_FOR_PARTITION,
UNKNOWN_TOPIC_OR_PART and _FENCED; kafka-python still says NOT_LEADER_FOR_PARTITION and UNKNOWN), while a
conformance verdict compares outcomes across clients. Kafka's own ``org.apache.kafka.common.protocol.Errors``
enum is the reference; its table lives once, in the codec (``broker_impl.codec.ERROR_TABLE``, read from
kafka-clients 4.4.0), and this module only views it by code.

Besides Kafka's codes the drivers use a few *non-Kafka* names (``code`` None) for outcomes that have no
wire error: see ``LOCAL_NAMES``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from broker_impl.codec import ERROR_TABLE, error_code
from conformance.buildcache import cache_root

# code -> (Kafka Errors enum name, Java exception class that Errors builds for it)
KAFKA_ERRORS: dict[int, tuple[str, str | None]] = {e.code: (e.name, e.exception) for e in ERROR_TABLE}


# Outcomes with no Kafka error code. Drivers and the runner use exactly these names.
LOCAL_NAMES: dict[str, str] = {
    "ILLEGAL_STATE": "the client refused the call in its current state (librdkafka _STATE, Java "
    "IllegalStateException, kafka-python IllegalStateError)",
    "INVALID_ARGUMENT": "the client rejected an argument or config (librdkafka _INVALID_ARG, Java "
    "IllegalArgumentException/ConfigException, kafka-python KafkaConfigurationError)",
    "TRANSACTION_ABORTED": "a record failed because its transaction was aborted (librdkafka _PURGE_QUEUE/"
    "_PURGE_INFLIGHT, Java TransactionAbortedException, kafka-python TransactionAbortedError)",
    "COMMIT_FAILED": "a consumer offset commit the client gave up on (Java CommitFailedException, "
    "kafka-python CommitFailedError)",
    "CLIENT_ERROR": "a client error with no Kafka equivalent; client_class says which",
    "UNSUPPORTED_BY_CLIENT": "the client library has no API for this op",
    "DEADLINE_EXCEEDED": "the library call was still running at the op's deadline; the driver answered "
    "without it (the call may still complete later inside the driver)",
    "DRIVER_ERROR": "the driver could not run the op (malformed request, driver bug)",
    "DRIVER_TIMEOUT": "runner side: the driver did not answer within deadline + grace and was killed",
    "DRIVER_DIED": "runner side: the driver process exited or was killed before answering",
}


def kafka_name(code: int) -> str | None:
    """Kafka's enum name for a wire error code, or None if Kafka 4.4 does not know the code."""
    row = KAFKA_ERRORS.get(code)
    return row[0] if row else None


def kafka_code(name: str) -> int | None:
    """The wire code of a Kafka error name, or None for the non-Kafka names in LOCAL_NAMES."""
    return error_code(name)


def error_table_file() -> Path:
    """Kafka's error table as a JSON file ``{"code": "NAME"}``, for drivers not written in Python
    (the KafkaJS driver reads it at start-up), so that they name errors from this one table.

    Written once per table content into the cache (``kafka-errors/<digest>.json``, replaced
    atomically, so concurrent drivers never read half a file)."""
    text = json.dumps({str(code): name for code, (name, _) in sorted(KAFKA_ERRORS.items())}, sort_keys=True)
    path = cache_root() / "kafka-errors" / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    return path
