"""Bad input closes one connection (or gets Kafka's error code); the broker and
every other client carry on."""

from __future__ import annotations

import os
import struct
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from broker_impl.log.records import build_batch
from broker_impl.protocol.messages import API

from .rawclient import RawConnection


def _well_behaved_round_trip(bootstrap: str, topic: str, n: int = 50) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 0})
    for i in range(n):
        p.produce(topic, value=b"ok-%d" % i, partition=0)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bad-input-check", "log_level": 0,
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        for m in c.consume(100, 1.0):
            if m.error() is None:
                got.append(m.value())
    c.close()
    assert got[-n:] == [b"ok-%d" % i for i in range(n)]


def _closed_by_broker(conn: RawConnection) -> bool:
    conn.sock.settimeout(10)
    return conn.recv_frame() is None


def _log_text(broker) -> str:
    return broker.log_path.read_text(errors="replace")


@pytest.fixture
def victim_and_bystander(broker):
    """A well-behaved raw connection opened before the bad one, checked after it."""
    bystander = RawConnection(broker.bootstrap)
    yield broker, bystander
    bystander.close()


def _bystander_still_served(bystander: RawConnection) -> None:
    api = API["ApiVersions"]
    resp = bystander.request("ApiVersions", 3, api.Request(client_software_name="t", client_software_version="1"))
    assert resp.error_code == 0


def test_random_bytes_close_only_that_connection(victim_and_bystander):
    broker, bystander = victim_and_bystander
    with RawConnection(broker.bootstrap) as bad:
        bad.send_raw(struct.pack(">i", 64) + os.urandom(64))
        assert _closed_by_broker(bad)
    _bystander_still_served(bystander)
    _well_behaved_round_trip(broker.bootstrap, "after-random")


def test_frame_over_socket_request_max_bytes(broker_factory):
    broker = broker_factory({"socket.request.max.bytes": "1024"})
    with RawConnection(broker.bootstrap) as bad:
        bad.send_raw(struct.pack(">i", 4096) + b"\x00" * 16)
        assert _closed_by_broker(bad)
    assert "invalid frame size 4096" in _log_text(broker)
    _well_behaved_round_trip(broker.bootstrap, "after-oversize")


def test_negative_size_and_truncated_frame(victim_and_bystander):
    broker, bystander = victim_and_bystander
    with RawConnection(broker.bootstrap) as bad:
        bad.send_raw(struct.pack(">i", -5))
        assert _closed_by_broker(bad)
    with RawConnection(broker.bootstrap) as bad:
        bad.send_raw(struct.pack(">i", 100) + b"\x00\x03\x00\x01")  # then hang up mid-frame
        bad.sock.shutdown(1)
        assert _closed_by_broker(bad)
    _bystander_still_served(bystander)


def test_unknown_api_key_closes_connection_and_is_logged(victim_and_bystander):
    broker, bystander = victim_and_bystander
    with RawConnection(broker.bootstrap) as bad:
        body = struct.pack(">hhi", 9999, 0, 7) + struct.pack(">h", 1) + b"x"
        bad.send_raw(struct.pack(">i", len(body)) + body)
        assert _closed_by_broker(bad)
    deadline = time.monotonic() + 5
    while "unknown API key 9999" not in _log_text(broker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "unknown API key 9999" in _log_text(broker)
    assert "127.0.0.1:" in _log_text(broker)  # the peer address is logged
    _bystander_still_served(bystander)


def test_unsupported_api_versions_version_gets_kafka_error(broker):
    """ApiVersions at an unknown version: UNSUPPORTED_VERSION in a v0 answer, with our ranges."""
    with RawConnection(broker.bootstrap) as conn:
        # header v2 (the version is unknown and so taken as flexible): client id + empty tagged fields
        body = struct.pack(">hhi", 18, 99, 42) + struct.pack(">h", 1) + b"x" + b"\x00" + b"\x00\x00\x00"
        conn.send_raw(struct.pack(">i", len(body)) + body)
        frame = conn.recv_frame()
        assert frame is not None
        (corr,) = struct.unpack_from(">i", frame, 0)
        assert corr == 42
        resp, _ = API["ApiVersions"].response.decode(0, frame, 4)
        assert resp.error_code == 35  # UNSUPPORTED_VERSION
        # as Kafka: only ApiVersions' own range (the 16-byte answer real Kafka gives)
        assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(18, 0, 4)]
        assert len(frame) == 16


def test_unsupported_api_versions_with_truncated_header_closes(broker):
    """No tagged-field byte after the client id: the v2 header does not parse, Kafka closes."""
    with RawConnection(broker.bootstrap) as conn:
        body = struct.pack(">hhi", 18, 99, 42) + struct.pack(">h", 1) + b"x"
        conn.send_raw(struct.pack(">i", len(body)) + body)
        assert _closed_by_broker(conn)


def test_unsupported_version_of_other_api_closes_connection(victim_and_bystander):
    broker, bystander = victim_and_bystander
    with RawConnection(broker.bootstrap) as bad:
        body = struct.pack(">hhi", 3, 77, 1) + struct.pack(">h", 1) + b"x"  # Metadata v77
        bad.send_raw(struct.pack(">i", len(body)) + body)
        assert _closed_by_broker(bad)
    _bystander_still_served(bystander)


def test_batch_with_wrong_crc_gets_corrupt_message(broker):
    P = API["Produce"].Request
    with RawConnection(broker.bootstrap) as conn:
        md = conn.request("Metadata", 12, API["Metadata"].Request(
            topics=[API["Metadata"].Request.MetadataRequestTopic(name="crc-topic")],
            allow_auto_topic_creation=True))
        assert md.topics[0].name == "crc-topic"
        batch = bytearray(build_batch([(b"k", b"v")], base_timestamp=int(time.time() * 1000)))
        batch[-1] ^= 0xFF  # inside the CRC-covered part
        req = P(acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(
            name="crc-topic", partition_data=[P.TopicProduceData.PartitionProduceData(index=0, records=bytes(batch))])])
        resp = conn.request("Produce", 9, req)
        assert resp.responses[0].partition_responses[0].error_code == 2  # CORRUPT_MESSAGE
        # the same connection keeps working
        good = build_batch([(b"k", b"v")], base_timestamp=int(time.time() * 1000))
        req.topic_data[0].partition_data[0].records = good
        resp = conn.request("Produce", 9, req)
        assert resp.responses[0].partition_responses[0].error_code == 0
    _well_behaved_round_trip(broker.bootstrap, "crc-topic")


def test_malformed_body_closes_connection(victim_and_bystander):
    broker, bystander = victim_and_bystander
    with RawConnection(broker.bootstrap) as bad:
        # Metadata v12 header, then a topics array claiming 1000 entries with no bytes behind it
        body = struct.pack(">hhi", 3, 12, 5) + struct.pack(">h", 1) + b"x" + b"\x00" + b"\xe9\x07"
        bad.send_raw(struct.pack(">i", len(body)) + body)
        assert _closed_by_broker(bad)
    _bystander_still_served(bystander)


@pytest.mark.parametrize("api_name,version,body", [
    ("Produce", 9, lambda R: R(acks=-1, timeout_ms=1000, topic_data=None)),
    ("Produce", 9, lambda R: R(acks=-1, timeout_ms=1000, topic_data=[R.TopicProduceData(name="t", partition_data=None)])),
    ("Fetch", 12, lambda R: R(max_wait_ms=0, topics=None)),
    ("ListOffsets", 7, lambda R: R(topics=None)),
    ("TxnOffsetCommit", 3, lambda R: R(transactional_id="t", group_id=None, topics=[])),
], ids=["produce-topic_data", "produce-partition_data", "fetch-topics", "list_offsets-topics",
        "txn_offset_commit-group_id"])
def test_null_in_a_non_nullable_field_is_malformed(victim_and_bystander, api_name, version, body):
    """Kafka's generated readers throw on null where the schema does not allow it, and the
    request is refused at parse time (the connection closes): never an internal error."""
    broker, bystander = victim_and_bystander
    with RawConnection(broker.bootstrap) as bad:
        bad.send_raw(bad.encode_request(api_name, version, body(API[api_name].Request)))
        assert _closed_by_broker(bad)
    _bystander_still_served(bystander)
    deadline = time.monotonic() + 5
    while "was serialized as null" not in _log_text(broker) and time.monotonic() < deadline:
        time.sleep(0.05)
    text = _log_text(broker)
    assert "was serialized as null" in text
    assert "internal error" not in text


def test_malformed_frame_warnings_are_rate_limited_per_peer(victim_and_bystander):
    """A peer sending garbage in a loop gets a few warning lines, not one per frame."""
    broker, bystander = victim_and_bystander
    for _ in range(40):
        with RawConnection(broker.bootstrap) as bad:
            body = struct.pack(">hhi", 9999, 0, 7) + struct.pack(">h", 1) + b"x"
            bad.send_raw(struct.pack(">i", len(body)) + body)
            assert _closed_by_broker(bad)
    _bystander_still_served(bystander)
    assert 1 <= _log_text(broker).count("unknown API key 9999") <= 5
