"""Storage layer of the embedded broker: Kafka's log format and semantics on local files.

Modules (one job each): ``records`` (record batch v2), ``compression`` (codecs), ``index``
(.index/.timeindex/.txnindex), ``segment`` (one segment), ``producer_state``
(ProducerStateManager: idempotence, transactions, snapshots), ``config`` (LogConfig from Kafka
config names), ``partition_log`` (PartitionLog = Kafka's UnifiedLog for one partition),
``errors`` (exceptions carrying Kafka error codes).
"""

from .config import LogConfig
from .errors import LogError
from .partition_log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    FetchDataInfo,
    LogAppendInfo,
    PartitionLog,
    TimestampAndOffset,
    partition_dir,
)
from .producer_state import AppendOrigin, ProducerStateManager

__all__ = [
    "AppendOrigin", "EARLIEST_TIMESTAMP", "FetchDataInfo", "LATEST_TIMESTAMP", "LogAppendInfo",
    "LogConfig", "LogError", "MAX_TIMESTAMP", "PartitionLog", "ProducerStateManager",
    "TimestampAndOffset", "partition_dir",
]
