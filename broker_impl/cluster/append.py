"""What an append as a leader is asked and answers, shared by the replica manager that appends
(server/replica_manager, server/add_partitions_manager) and the handlers that call it
(handlers/produce, handlers/transactions): a partition's answer (Kafka's
ProduceResponse.PartitionResponse), and the KIP-890 verification a request asks for
(its transactional id, and Kafka's TransactionSupportedOperation for its version).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..protocol.errors import Errors


@dataclass(slots=True)
class PartitionResponse:
    """One partition's answer to an append (Kafka's ProduceResponse.PartitionResponse): its error
    and, once its records are in the log, where they went."""

    error: Errors = Errors.NONE
    base_offset: int = -1
    last_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


class TransactionSupportedOperation(enum.Enum):
    """What a request's version lets the leader do with a partition the transaction does not
    have yet, and which errors its client knows (Kafka's TransactionSupportedOperation)."""

    DEFAULT_ERROR = 0            # Produce <= v10, TxnOffsetCommit <= v3: verify only, no TRANSACTION_ABORTABLE
    GENERIC_ERROR_SUPPORTED = 1  # Produce v11, TxnOffsetCommit v4: verify only
    ADD_PARTITION = 2            # Produce v12+, TxnOffsetCommit v5+ (TV2): the coordinator adds the partition

    @classmethod
    def for_produce(cls, version: int) -> TransactionSupportedOperation:
        if version >= 12:
            return cls.ADD_PARTITION
        return cls.GENERIC_ERROR_SUPPORTED if version >= 11 else cls.DEFAULT_ERROR

    @classmethod
    def for_txn_offset_commit(cls, version: int) -> TransactionSupportedOperation:
        if version >= 5:
            return cls.ADD_PARTITION
        return cls.GENERIC_ERROR_SUPPORTED if version >= 4 else cls.DEFAULT_ERROR

    @property
    def supports_epoch_bump(self) -> bool:
        return self is TransactionSupportedOperation.ADD_PARTITION


@dataclass(frozen=True)
class TxnVerification:
    """A request's transactional batches are to be verified: whose transaction, and how."""

    transactional_id: str
    operation: TransactionSupportedOperation
