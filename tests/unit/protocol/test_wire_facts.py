"""Specific facts of Kafka's wire format, checked against bytes written out
by hand from the protocol specification (KIP-482 for flexible versions,
KIP-893 for nullable structs), not against our own encoder's output.
"""

from __future__ import annotations

import struct

import pytest

from broker_impl.protocol.codegen import ProtocolError, read_uvarint, uvarint_bytes
from broker_impl.protocol.messages import API, REQUEST_HEADER, RESPONSE_HEADER
from codec_samples import all_message_versions, codec_by_name, sample

Z16 = bytes(16)


def _both_ways(codec, version, obj, expected: bytes) -> None:
    assert codec.encode(version, obj).hex(" ") == expected.hex(" ")
    back, end = codec.decode(version, expected, 0)
    assert end == len(expected)
    assert back == obj


# ------------------------------------------------------------------ nulls
def test_compact_nullable_array_null_and_empty():
    """Compact arrays: varint(N+1); 0 is null, 1 is empty."""
    req = API["Metadata"].request
    M = req.cls
    _both_ways(req, 12, M(topics=None, allow_auto_topic_creation=True),
               b"\x00" + b"\x01" + b"\x00" + b"\x00")
    _both_ways(req, 12, M(topics=[], allow_auto_topic_creation=False),
               b"\x01" + b"\x00" + b"\x00" + b"\x00")
    # v13 topic with a zero TopicId and a name, then its own empty tag section
    _both_ways(req, 13, M(topics=[M.MetadataRequestTopic(topic_id=Z16, name="t")],
                          allow_auto_topic_creation=True),
               b"\x02" + Z16 + b"\x02t" + b"\x00" + b"\x01\x00" + b"\x00")


def test_classic_nullable_array_null():
    req = API["Metadata"].request
    M = req.cls
    _both_ways(req, 4, M(topics=None, allow_auto_topic_creation=True), b"\xff\xff\xff\xff\x01")
    _both_ways(req, 1, M(topics=[M.MetadataRequestTopic(name="ab")]),
               b"\x00\x00\x00\x01" + b"\x00\x02ab")


def test_compact_and_classic_null_string_and_records():
    """Produce: TransactionalId null is 0x00 (compact) / 0xffff (classic);
    null Records are 0x00 / 0xffffffff."""
    req = API["Produce"].request
    P = req.cls
    topic = P.TopicProduceData(name="t", partition_data=[P.TopicProduceData.PartitionProduceData(index=0, records=None)])
    obj = P(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[topic])
    _both_ways(req, 9, obj,
               b"\x00" + b"\xff\xff" + b"\x00\x00\x75\x30"
               + b"\x02" + b"\x02t" + b"\x02" + b"\x00\x00\x00\x00" + b"\x00" + b"\x00" + b"\x00"
               + b"\x00")
    _both_ways(req, 3, obj,
               b"\xff\xff" + b"\xff\xff" + b"\x00\x00\x75\x30"
               + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00"
               + b"\xff\xff\xff\xff")
    obj.transactional_id = ""
    assert req.encode(9, obj)[:1] == b"\x01"          # empty, not null
    assert req.encode(3, obj)[:2] == b"\x00\x00"


def test_nullable_struct_marker():
    """KIP-893: a nullable struct is preceded by int8 -1 (null) or 1 (present)."""
    req = API["DescribeTopicPartitions"].request
    D = req.cls
    head = b"\x02" + b"\x02a" + b"\x00" + b"\x00\x00\x07\xd0"
    obj = D(topics=[D.TopicRequest(name="a")], response_partition_limit=2000, cursor=None)
    _both_ways(req, 0, obj, head + b"\xff" + b"\x00")
    obj.cursor = D.Cursor(topic_name="a", partition_index=5)
    _both_ways(req, 0, obj, head + b"\x01" + b"\x02a" + b"\x00\x00\x00\x05" + b"\x00" + b"\x00")


# ------------------------------------------------------------------ headers
def test_request_header_v2_client_id_is_a_classic_string():
    """RequestHeader.ClientId has flexibleVersions "none": even in header v2
    it is an int16-length string (so that any broker can read the client id
    of an ApiVersions request it does not understand); v2 only adds the tag
    section."""
    H = REQUEST_HEADER.cls
    fixed = b"\x00\x03" + b"\x00\x0c" + b"\x00\x00\x00\x01"
    _both_ways(REQUEST_HEADER, 2, H(request_api_key=3, request_api_version=12, correlation_id=1,
                                    client_id="abc"), fixed + b"\x00\x03abc" + b"\x00")
    _both_ways(REQUEST_HEADER, 2, H(request_api_key=3, request_api_version=12, correlation_id=1,
                                    client_id=None), fixed + b"\xff\xff" + b"\x00")
    _both_ways(REQUEST_HEADER, 1, H(request_api_key=3, request_api_version=12, correlation_id=1,
                                    client_id="abc"), fixed + b"\x00\x03abc")


def test_response_header_versions():
    _both_ways(RESPONSE_HEADER, 0, RESPONSE_HEADER.cls(correlation_id=258), b"\x00\x00\x01\x02")
    _both_ways(RESPONSE_HEADER, 1, RESPONSE_HEADER.cls(correlation_id=258), b"\x00\x00\x01\x02\x00")
    assert API["ApiVersions"].response_header_version(4) == 0
    assert API["Produce"].response_header_version(9) == 1
    assert API["Produce"].response_header_version(8) == 0
    assert API["Produce"].request_header_version(9) == 2
    assert API["Produce"].request_header_version(8) == 1


# ------------------------------------------------------------------ varints
UVARINTS = [
    (0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02"),
    (16383, b"\xff\x7f"), (16384, b"\x80\x80\x01"), (2**21 - 1, b"\xff\xff\x7f"),
    (2**21, b"\x80\x80\x80\x01"), (2**31 - 1, b"\xff\xff\xff\xff\x07"),
    (2**32 - 1, b"\xff\xff\xff\xff\x0f"),
]


@pytest.mark.parametrize("value,wire", UVARINTS)
def test_unsigned_varint(value, wire):
    assert uvarint_bytes(value) == wire
    assert read_uvarint(wire + b"\xee", 0) == (value, len(wire))


def test_unsigned_varint_longer_than_five_bytes_is_rejected():
    """Kafka's ByteUtils.readUnsignedVarint gives up after 5 bytes."""
    with pytest.raises(ProtocolError):
        read_uvarint(b"\x80\x80\x80\x80\x80\x01", 0)


@pytest.mark.parametrize("length,prefix", [
    (0, b"\x01"), (126, b"\x7f"), (127, b"\x80\x01"), (16382, b"\xff\x7f"), (16383, b"\x80\x80\x01"),
])
def test_compact_bytes_length_prefix(length, prefix):
    """Compact lengths are varint(N+1): the 1->2 and 2->3 byte boundaries."""
    req = API["SaslAuthenticate"].request
    obj = req.cls(auth_bytes=bytes(range(256)) * (length // 256) + bytes(length % 256))
    _both_ways(req, 2, obj, prefix + bytes(obj.auth_bytes) + b"\x00")


def test_compact_array_length_boundary():
    resp = API["ApiVersions"].response
    R = resp.cls
    obj = R(error_code=0, api_keys=[R.ApiVersion(api_key=i, min_version=0, max_version=1) for i in range(127)])
    data = resp.encode(3, obj)
    assert data[2:4] == b"\x80\x01"        # 127 elements -> varint(128)
    assert resp.decode(3, data, 0) == (obj, len(data))


# ------------------------------------------------------------------ tagged fields
def test_tagged_fields_written_only_when_not_default_in_ascending_order():
    resp = API["ApiVersions"].response
    base = b"\x00\x00" + b"\x01" + b"\x00\x00\x00\x00"
    _both_ways(resp, 3, resp.cls(), base + b"\x00")
    _both_ways(resp, 3, resp.cls(finalized_features_epoch=5),
               base + b"\x01" + b"\x01\x08" + b"\x00" * 7 + b"\x05")
    _both_ways(resp, 3, resp.cls(zk_migration_ready=True, finalized_features_epoch=5),
               base + b"\x02" + b"\x01\x08" + b"\x00" * 7 + b"\x05" + b"\x03\x01\x01")


def test_unknown_tagged_fields_are_skipped():
    """KIP-482: a reader skips tags it does not know, at any nesting level."""
    req = API["ApiVersions"].request
    body = b"\x02a\x02b"
    obj, end = req.decode(3, body + b"\x02" + b"\x05\x02xy" + b"\xac\x02\x00", 0)
    assert obj == req.cls(client_software_name="a", client_software_version="b")
    assert end == len(body) + 8


def test_tagged_field_overrunning_the_frame_is_an_error():
    req = API["ApiVersions"].request
    with pytest.raises(ProtocolError):
        req.decode(3, b"\x02a\x02b" + b"\x01" + b"\x63\x0a\x01\x02", 0)


# ------------------------------------------------------------------ malformed frames
@pytest.mark.parametrize("case", all_message_versions(), ids=lambda c: f"{c[0]}-v{c[1]}")
def test_every_truncation_raises_protocol_error(case):
    """Cutting a valid message anywhere must raise ProtocolError — never
    IndexError/struct.error, and never a silently short object."""
    name, version = case
    codec = codec_by_name(name)
    data = codec.encode(version, sample(codec, version, "full"))
    for cut in range(len(data)):
        with pytest.raises(ProtocolError):
            codec.decode(version, data[:cut], 0)


def test_invalid_utf8_is_a_protocol_error():
    with pytest.raises(ProtocolError):
        API["ApiVersions"].request.decode(3, b"\x03\xff\xfe\x02b\x00", 0)


def test_string_longer_than_frame_is_a_protocol_error():
    with pytest.raises(ProtocolError):
        REQUEST_HEADER.decode(1, b"\x00\x03\x00\x0c\x00\x00\x00\x01\x00\x09abc", 0)


# ------------------------------------------------------------------ trailing bytes
def test_trailing_bytes_after_a_message_are_left_to_the_caller():
    """librdkafka's Metadata v13 request carries 3 bytes after the body;
    Kafka ignores them. The decoder stops at the end of the message and
    reports where, so the connection layer can accept the frame."""
    a = API["Metadata"]
    obj = sample(a.request, 13, "full")
    hdr = REQUEST_HEADER.cls(request_api_key=3, request_api_version=13, correlation_id=9, client_id="rdkafka")
    head = REQUEST_HEADER.encode(2, hdr)
    body = a.request.encode(13, obj)
    frame = head + body + b"\x00\x00\x00"
    h, pos = REQUEST_HEADER.decode(2, frame, 0)
    assert (h, pos) == (hdr, len(head))
    back, end = a.request.decode(13, frame, pos)
    assert back == obj
    assert end == len(frame) - 3


# ------------------------------------------------------------------ schema violations
# What Kafka's generated readers refuse (RuntimeException at parse time, so the broker closes
# the connection): null in a non-nullable field or array element, a string longer than 32767
# bytes, an array claiming more elements than there are bytes left.
def test_null_in_a_non_nullable_array_is_a_protocol_error():
    a = API["Produce"]
    body = a.request.encode(9, a.Request(acks=-1, timeout_ms=5, topic_data=None))
    with pytest.raises(ProtocolError, match="non-nullable field TopicData was serialized as null"):
        a.request.decode(9, body, 0)


def test_null_in_a_non_nullable_string_is_a_protocol_error():
    a = API["TxnOffsetCommit"]
    for version in (0, 3):  # classic and compact strings
        body = a.request.encode(version, a.Request(transactional_id="t", group_id=None, topics=[]))
        with pytest.raises(ProtocolError, match="non-nullable field GroupId was serialized as null"):
            a.request.decode(version, body, 0)


def test_null_where_the_schema_allows_it_decodes_as_none():
    a = API["Metadata"]
    obj, _ = a.request.decode(12, a.request.encode(12, a.Request(topics=None)), 0)
    assert obj.topics is None


def test_array_elements_are_never_nullable():
    # DescribeGroups v0: groups is []string; an element with length -1
    data = struct.pack(">i", 1) + struct.pack(">h", -1)
    with pytest.raises(ProtocolError, match="Groups element was serialized as null"):
        API["DescribeGroups"].request.decode(0, data, 0)


def test_string_longer_than_32767_is_a_protocol_error():
    data = b"\x81\x80\x02" + b"a" * 32768 + b"\x02b\x00"  # compact length 32769 - 1
    with pytest.raises(ProtocolError, match="had invalid length 32768"):
        API["ApiVersions"].request.decode(3, data, 0)


def test_array_longer_than_the_bytes_left_is_a_protocol_error():
    data = struct.pack(">i", 1_000_000) + b"\x00" * 8
    with pytest.raises(ProtocolError, match="Tried to allocate a collection of size 1000000"):
        API["DescribeGroups"].request.decode(0, data, 0)
