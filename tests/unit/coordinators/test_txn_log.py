"""Kafka's __transaction_state record format and partitioning."""

from broker_impl.coordinators import partitioner
from broker_impl.coordinators import transaction_log as tlog
from broker_impl.coordinators.transaction_metadata import TransactionMetadata, TransactionState, TV_2


def test_partition_for_matches_java_hash():
    # "abc".hashCode() == 96354 in Java; a negative hash still maps into range
    assert partitioner.java_string_hash("abc") == 96354
    assert partitioner.java_string_hash("polygenelubricants") == -(1 << 31)
    assert partitioner.partition_for("polygenelubricants", 50) == 0
    assert partitioner.partition_for("abc", 50) == 96354 % 50


def test_key_and_value_round_trip_both_versions():
    assert tlog.key_bytes("abc") == bytes.fromhex("0000" "0003616263")
    assert tlog.read_key(tlog.key_bytes("tx-1")) == "tx-1"
    md = TransactionMetadata("tx", 7, producer_epoch=3, txn_timeout_ms=1000, state=TransactionState.ONGOING,
                             topic_partitions={("a", 1), ("a", 0)}, txn_start_timestamp=5,
                             txn_last_update_timestamp=6)
    t = md.prepare_abort_or_commit(TransactionState.PREPARE_COMMIT, TV_2, 9, 10, False)
    for level, version in ((0, 0), (2, 1)):
        data = tlog.value_bytes(t, level)
        assert data[:2] == version.to_bytes(2, "big")
        back = tlog.read_value("tx", data)
        assert (back.producer_id, back.producer_epoch, back.state, back.topic_partitions) == \
            (7, 4, TransactionState.PREPARE_COMMIT, {("a", 0), ("a", 1)})
        assert back.next_producer_id == (9 if version == 1 else -1)
        assert back.client_transaction_version == (TV_2 if version == 1 else 0)
    assert tlog.read_value("tx", None) is None
