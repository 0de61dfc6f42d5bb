"""Errors raised by the storage layer: Kafka's exceptions, each a :class:`KafkaError` whose
class carries the Kafka error code the broker answers with.

The class names follow Kafka's exception names (``CorruptRecordException`` ->
``CorruptRecordError``...) so a reader can map them back to
``org.apache.kafka.common.protocol.Errors``; how an append's error is answered (with or without
the log start offset, with or without its message) is decided by ReplicaManager, by class, as
Kafka's ``appendToLocalLog`` does.
"""

from __future__ import annotations

from ..protocol.errors import Errors, KafkaError


class LogError(KafkaError):
    """Base class: a refusal of the log, answered with its class's Kafka error code."""

    def __init__(self, message: str | None = None):
        super().__init__(None, message)


class OffsetOutOfRangeError(LogError):
    """Fetch or ListOffsets at an offset outside [log start, log end] (OFFSET_OUT_OF_RANGE)."""

    error = Errors.OFFSET_OUT_OF_RANGE


class CorruptRecordError(LogError):
    """Batch too short for its header, or CRC32C mismatch (CORRUPT_MESSAGE)."""

    error = Errors.CORRUPT_MESSAGE


class MessageTooLargeError(LogError):
    """A batch larger than max.message.bytes (MESSAGE_TOO_LARGE)."""

    error = Errors.MESSAGE_TOO_LARGE


class RecordListTooLargeError(LogError):
    """The records of one append are larger than segment.bytes (RECORD_LIST_TOO_LARGE)."""

    error = Errors.RECORD_LIST_TOO_LARGE


class UnexpectedAppendOffsetError(LogError):
    """A follower was handed batches that do not start at its log end offset (Kafka's
    UnexpectedAppendOffsetException): its fetch state and its log disagree."""

    error = Errors.UNKNOWN_SERVER_ERROR


class InvalidTimestampError(LogError):
    """CreateTime outside message.timestamp.{before,after}.max.ms (INVALID_TIMESTAMP)."""

    error = Errors.INVALID_TIMESTAMP


class UnsupportedForMessageFormatError(LogError):
    """A feature the stored message format cannot carry (UNSUPPORTED_FOR_MESSAGE_FORMAT)."""

    error = Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT


class OutOfOrderSequenceError(LogError):
    error = Errors.OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceError(LogError):
    """Kept for completeness: current Kafka never returns it from Produce (duplicates succeed)."""

    error = Errors.DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(LogError):
    error = Errors.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(LogError):
    error = Errors.INVALID_TXN_STATE


class TransactionCoordinatorFencedError(LogError):
    error = Errors.TRANSACTION_COORDINATOR_FENCED


class UnknownProducerIdError(LogError):
    """Kept for completeness: since KIP-360 (Kafka 2.5) the leader accepts any sequence from an
    unknown producer id, so current Kafka does not return it from Produce."""

    error = Errors.UNKNOWN_PRODUCER_ID


class UnsupportedCompressionTypeError(LogError):
    """zstd in a Produce request older than v7 (UNSUPPORTED_COMPRESSION_TYPE)."""

    error = Errors.UNSUPPORTED_COMPRESSION_TYPE


class InvalidRecordError(LogError):
    """Kafka's ``InvalidRecordException`` from ProduceRequest.validateRecords and
    LogValidator.validateBatch (INVALID_RECORD)."""

    error = Errors.INVALID_RECORD


class InvalidRequestRecordsError(InvalidRecordError):
    """INVALID_RECORD from Kafka's ProduceRequest.validateRecords: the request's records are
    refused before they reach the log (no batch, several, magic < 2), so Kafka's answer carries
    no log start offset."""


class KafkaStorageError(LogError):
    """The log directory failed (I/O error): KAFKA_STORAGE_ERROR."""

    error = Errors.KAFKA_STORAGE_ERROR
