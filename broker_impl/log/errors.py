"""Errors raised by the storage layer, each carrying the Kafka error code the broker answers with.

Why one hierarchy: the Produce/Fetch/ListOffsets handlers catch ``LogError`` and put
``exc.error_code`` into the partition response; the class names follow Kafka's exception names
(``CorruptRecordException`` -> ``CorruptRecordError``...) so a reader can map them back to
``org.apache.kafka.common.protocol.Errors``.
"""

from __future__ import annotations


class LogError(Exception):
    """Base class: a refusal that the broker reports as a Kafka error code."""

    error_code: int = -1  # UNKNOWN_SERVER_ERROR
    error_name: str = "UNKNOWN_SERVER_ERROR"

    def __init__(self, message: str = ""):
        super().__init__(message or self.error_name)
        self.message = message or self.error_name


class OffsetOutOfRangeError(LogError):
    """Fetch or ListOffsets at an offset outside [log start, log end] (OFFSET_OUT_OF_RANGE)."""

    error_code = 1
    error_name = "OFFSET_OUT_OF_RANGE"


class CorruptRecordError(LogError):
    """Batch too short for its header, or CRC32C mismatch (CORRUPT_MESSAGE)."""

    error_code = 2
    error_name = "CORRUPT_MESSAGE"


class MessageTooLargeError(LogError):
    """A batch larger than max.message.bytes (MESSAGE_TOO_LARGE)."""

    error_code = 10
    error_name = "MESSAGE_TOO_LARGE"


class RecordListTooLargeError(LogError):
    """The records of one append are larger than segment.bytes (RECORD_LIST_TOO_LARGE)."""

    error_code = 18
    error_name = "RECORD_LIST_TOO_LARGE"


class InvalidTimestampError(LogError):
    """CreateTime outside message.timestamp.{before,after}.max.ms (INVALID_TIMESTAMP)."""

    error_code = 32
    error_name = "INVALID_TIMESTAMP"


class UnsupportedForMessageFormatError(LogError):
    """A feature the stored message format cannot carry (UNSUPPORTED_FOR_MESSAGE_FORMAT)."""

    error_code = 43
    error_name = "UNSUPPORTED_FOR_MESSAGE_FORMAT"


class OutOfOrderSequenceError(LogError):
    error_code = 45
    error_name = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class DuplicateSequenceError(LogError):
    """Kept for completeness: current Kafka never returns it from Produce (duplicates succeed)."""

    error_code = 46
    error_name = "DUPLICATE_SEQUENCE_NUMBER"


class InvalidProducerEpochError(LogError):
    error_code = 47
    error_name = "INVALID_PRODUCER_EPOCH"


class InvalidTxnStateError(LogError):
    error_code = 48
    error_name = "INVALID_TXN_STATE"


class TransactionCoordinatorFencedError(LogError):
    error_code = 52
    error_name = "TRANSACTION_COORDINATOR_FENCED"


class UnknownProducerIdError(LogError):
    """Kept for completeness: since KIP-360 (Kafka 2.5) the leader accepts any sequence from an
    unknown producer id, so current Kafka does not return it from Produce."""

    error_code = 59
    error_name = "UNKNOWN_PRODUCER_ID"


class UnsupportedCompressionTypeError(LogError):
    """zstd in a Produce request older than v7 (UNSUPPORTED_COMPRESSION_TYPE)."""

    error_code = 76
    error_name = "UNSUPPORTED_COMPRESSION_TYPE"


class InvalidRecordError(LogError):
    """Kafka's ``InvalidRecordException`` from ProduceRequest.validateRecords and
    LogValidator.validateBatch (INVALID_RECORD)."""

    error_code = 87
    error_name = "INVALID_RECORD"


class KafkaStorageError(LogError):
    """The log directory failed (I/O error): KAFKA_STORAGE_ERROR."""

    error_code = 56
    error_name = "KAFKA_STORAGE_ERROR"
