"""Where the transaction coordinator puts a group's offsets partition in a transaction
(AddOffsetsToTxn, TxnOffsetCommit v5+): it must be the partition the group coordinator writes the
transactional offsets to, or the COMMIT/ABORT marker lands beside them and a restart finds them
still pending (UNSTABLE_OFFSET_COMMIT forever). Kafka asks the group coordinator
(``partitionFor``), which counts the partitions of the existing topic, not the config."""

from __future__ import annotations

from broker_impl.config import BrokerConfig
from broker_impl.coordinators.partitioner import partition_for
from broker_impl.server.broker import Broker


def _broker(tmp_path, partitions: int) -> Broker:
    b = Broker(BrokerConfig({"offsets.topic.num.partitions": str(partitions)}), tmp_path / "data")
    b.open()
    return b


def test_offsets_partition_follows_the_existing_offsets_topic(tmp_path):
    b = _broker(tmp_path, 5)
    b.group_coordinator.store.ensure()          # __consumer_offsets created with 5 partitions
    b.close()
    b = _broker(tmp_path, 7)                    # restarted with another configured count
    try:
        group = next(g for g in (f"group-{i}" for i in range(100)) if partition_for(g, 5) != partition_for(g, 7))
        assert len(b.topics.get("__consumer_offsets").partitions) == 5
        assert b.txn_coordinator.offsets_partition(group) == ("__consumer_offsets", partition_for(group, 5))
        assert b.txn_coordinator.offsets_partition(group)[1] == b.group_coordinator.store.partition_for(group)
    finally:
        b.close()


def test_offsets_partition_before_the_topic_exists_uses_the_config(tmp_path):
    b = _broker(tmp_path, 7)
    try:
        assert b.topics.get("__consumer_offsets") is None
        assert b.txn_coordinator.offsets_partition("my-group") == ("__consumer_offsets", partition_for("my-group", 7))
    finally:
        b.close()
