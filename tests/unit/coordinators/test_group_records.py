"""__consumer_offsets record layout and group -> partition mapping, and the timer."""

from __future__ import annotations

import struct

import trio
import trio.testing

from broker_impl.coordinators.group_records import (
    GroupRecord, MemberMetadata, OffsetAndMetadata, OffsetRecord, decode_record, group_metadata_key,
    group_metadata_value, new_group_metadata_value, offset_commit_key, offset_commit_value,
)
from broker_impl.coordinators.group_timer import CoordinatorTimer
from broker_impl.coordinators.partitioner import java_string_hash, partition_for


def test_java_string_hash_matches_java():
    # Values of java.lang.String.hashCode().
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(1 << 31)      # Integer.MIN_VALUE
    assert java_string_hash("\u00e9t\u00e9") == 0xE9 * 961 + 0x74 * 31 + 0xE9   # UTF-16 units, not UTF-8 bytes
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00   # a surrogate pair counts twice


def test_partition_for_uses_kafka_abs():
    # Utils.abs(Integer.MIN_VALUE) == 0, not a negative number.
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    h = java_string_hash("my-group")
    assert partition_for("my-group", 50) == abs(h) % 50


def test_offset_commit_key_layout():
    key = offset_commit_key("g", "t", 7)
    # int16 version 1, string group, string topic, int32 partition
    assert key == struct.pack(">h", 1) + b"\x00\x01g" + b"\x00\x01t" + struct.pack(">i", 7)


def test_offset_commit_value_layout_v3_and_v1():
    v3 = offset_commit_value(OffsetAndMetadata(42, 5, "md", 1000))
    assert v3 == (struct.pack(">h", 3) + struct.pack(">q", 42) + struct.pack(">i", 5) + b"\x00\x02md"
                  + struct.pack(">q", 1000))
    v1 = offset_commit_value(OffsetAndMetadata(42, 5, "md", 1000, expire_timestamp=2000))
    assert v1 == (struct.pack(">h", 1) + struct.pack(">q", 42) + b"\x00\x02md" + struct.pack(">q", 1000)
                  + struct.pack(">q", 2000))


def test_records_round_trip():
    r = decode_record(offset_commit_key("g", "t", 1), offset_commit_value(OffsetAndMetadata(9, 2, "x", 77)))
    assert r == OffsetRecord("g", "t", 1, OffsetAndMetadata(9, 2, "x", 77, None))
    r = decode_record(offset_commit_key("g", "t", 1), offset_commit_value(OffsetAndMetadata(9, -1, "", 77, 99)))
    assert r.value.expire_timestamp == 99
    assert decode_record(offset_commit_key("g", "t", 1), None) == OffsetRecord("g", "t", 1, None)
    m = MemberMetadata(member_id="m-1", group_instance_id="i", client_id="c", client_host="/h",
                       rebalance_timeout=300, session_timeout=10, subscription=b"s", assignment=b"a")
    value = new_group_metadata_value(protocol_type="consumer", generation=3, protocol="range", leader="m-1",
                                     current_state_timestamp=5, members=[m])
    key = group_metadata_key("g")
    assert key[:2] == b"\x00\x02"
    r = decode_record(key, group_metadata_value(value))
    assert isinstance(r, GroupRecord) and r.group == "g"
    assert (r.value.generation, r.value.protocol, r.value.leader) == (3, "range", "m-1")
    assert r.value.members[0].group_instance_id == "i" and bytes(r.value.members[0].assignment) == b"a"
    assert decode_record(key, None) == GroupRecord("g", None)


def test_timer_fires_in_deadline_order_and_replaces_keys():
    fired = []

    async def main():
        timer = CoordinatorTimer()
        async with trio.open_nursery() as n:
            n.start_soon(timer.run)
            timer.schedule("a", 300, lambda: fired.append("a"))
            timer.schedule("b", 100, lambda: fired.append("b"))
            timer.schedule("c", 200, lambda: fired.append("c"))
            timer.schedule("b", 400, lambda: fired.append("b2"))    # replaces b
            timer.schedule("d", 50, lambda: fired.append("d"))
            timer.cancel("d")
            await trio.sleep(1)
            assert len(timer) == 0
            n.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert fired == ["c", "a", "b2"]


def test_timer_heap_stays_bounded_under_reschedules():
    async def main():
        timer = CoordinatorTimer()
        for i in range(10_000):
            timer.schedule(("hb", i % 10), 10_000, lambda: None)
        assert len(timer) == 10
        assert len(timer._heap) <= 64 + 4 * 10 + 1

    trio.run(main, clock=trio.testing.MockClock())
