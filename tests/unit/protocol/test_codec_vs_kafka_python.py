"""Byte equality with kafka-python 3.0.12's schema-driven protocol classes.

kafka-python builds its request/response classes from the same JSON
schemas but with its own generator, value types (``uuid.UUID`` or None for
the zero UUID, sets of bit numbers for ``*AuthorizedOperations``) and its
own header handling; it is the codec of a real client, so agreeing with it
byte for byte — bodies and headers, framed as they go on the wire — is
strong evidence that clients will understand us.
"""

from __future__ import annotations

import struct
import uuid

import pytest

pytest.importorskip("kafka")

import kafka.protocol.admin  # noqa: E402,F401  (registers the classes)
import kafka.protocol.consumer  # noqa: E402,F401
import kafka.protocol.metadata  # noqa: E402,F401
import kafka.protocol.producer  # noqa: E402,F401
from kafka.protocol.api_message import ApiMessage  # noqa: E402

from broker_impl.protocol.messages import API, REQUEST_HEADER, RESPONSE_HEADER  # noqa: E402
from broker_impl.protocol.schema import FieldSpec, StructSpec  # noqa: E402
from codec_samples import sample  # noqa: E402

_ZERO_UUID = bytes(16)


def _kp_classes() -> dict[str, type]:
    out, todo = {}, list(ApiMessage.__subclasses__())
    while todo:
        c = todo.pop()
        todo.extend(c.__subclasses__())
        if getattr(c, "_class_version", None) is None and getattr(c, "_json", None):
            out[c.__name__] = c
    return out


KP = _kp_classes()


def _kp_fields(kp_struct) -> list:
    return list(kp_struct._fields)


# ------------------------------------------------------------ ours -> kafka-python
def _prim_to_kp(kp_type: str, f: FieldSpec, v):
    if v is None:
        return None
    if f.elem_type == "uuid":
        return None if bytes(v) == _ZERO_UUID else uuid.UUID(bytes=bytes(v))
    if kp_type == "bitfield":
        u = v & 0xFFFFFFFF
        return {i for i in range(32) if u >> i & 1}
    if f.elem_type in ("bytes", "records"):
        return bytes(v)
    return v


def to_kp(kp_cls, st: StructSpec, obj, version: int, root: bool = False):
    """Our ``obj`` as an instance of kafka-python's ``kp_cls`` (fields in schema order)."""
    if obj is None:
        return None
    kw = {}
    theirs = _kp_fields(kp_cls._struct)
    assert len(theirs) == len(st.fields), (kp_cls, [f.name for f in theirs])
    for f, kf in zip(st.fields, theirs):
        if version not in f.versions:
            continue
        v = getattr(obj, f.attr)
        if f.struct is not None:
            sub = getattr(kp_cls, kf.type_str)
            if f.is_array:
                kw[kf.name] = None if v is None else [to_kp(sub, f.struct, e, version) for e in v]
            else:
                kw[kf.name] = to_kp(sub, f.struct, v, version)
        elif f.is_array:
            kw[kf.name] = None if v is None else [_prim_to_kp(kf.type_str, f, e) for e in v]
        else:
            kw[kf.name] = _prim_to_kp(kf.type_str, f, v)
    return kp_cls(version=version, **kw) if root else kp_cls(**kw)


# ------------------------------------------------------------ kafka-python -> ours
def _prim_from_kp(kp_type: str, f: FieldSpec, v):
    if f.elem_type == "uuid":
        return _ZERO_UUID if v is None else v.bytes
    if kp_type == "bitfield":
        if v is None:
            return -(2**31)
        u = sum(1 << i for i in v)
        return u - (1 << 32) if u >= 1 << 31 else u
    if v is None:
        return None
    if f.elem_type in ("bytes", "records"):
        return bytes(v)
    return v


def from_kp(cls, st: StructSpec, kobj, version: int):
    if kobj is None:
        return None
    kw = {}
    for f, kf in zip(st.fields, _kp_fields(kobj._struct)):
        if version not in f.versions:
            continue
        v = getattr(kobj, kf.name)
        if f.struct is not None:
            sub = getattr(cls, f.struct.name)
            if f.is_array:
                kw[f.attr] = None if v is None else [from_kp(sub, f.struct, e, version) for e in v]
            else:
                kw[f.attr] = from_kp(sub, f.struct, v, version)
        elif f.is_array:
            kw[f.attr] = None if v is None else [_prim_from_kp(kf.type_str, f, e) for e in v]
        else:
            kw[f.attr] = _prim_from_kp(kf.type_str, f, v)
    return cls(**kw)


def _cases():
    out = []
    for api in sorted(API):
        a = API[api]
        for side in ("Request", "Response"):
            if api + side in KP:
                out.extend((api, v, side) for v in range(a.min_version, a.max_version + 1))
    return out


CASES = _cases()


def test_kafka_python_covers_the_client_apis():
    """The comparison is not vacuous: kafka-python has classes for (nearly)
    every API and the transactional client's ones are all there."""
    for api in ("Produce", "Fetch", "InitProducerId", "AddPartitionsToTxn", "EndTxn",
                "TxnOffsetCommit", "WriteTxnMarkers", "JoinGroup", "SyncGroup",
                "OffsetCommit", "OffsetFetch", "ApiVersions", "Metadata"):
        assert api + "Request" in KP and api + "Response" in KP, api
    assert len(CASES) >= 400


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}{c[2]}-v{c[1]}")
@pytest.mark.parametrize("variant", ["full", "nulls", "edge"])
def test_same_body_bytes_as_kafka_python(case, variant):
    api, version, side = case
    codec = getattr(API[api], side.lower())
    kp_cls = KP[api + side]
    obj = sample(codec, version, variant)
    ours = codec.encode(version, obj)

    kobj = to_kp(kp_cls, codec.spec.root, obj, version, root=True)
    theirs = bytes(kobj.encode(version=version))
    assert ours == theirs

    back, end = codec.decode(version, theirs, 0)
    assert end == len(theirs)
    assert back == obj
    if api == "ApiVersions" and side == "Response" and obj.error_code != 0:
        # kafka-python reads an ApiVersions error response as v0 (what Kafka
        # sends for UNSUPPORTED_VERSION), so only the bytes are compared here.
        return
    kback = kp_cls.decode(ours, version=version)
    assert from_kp(codec.cls, codec.spec.root, kback, version) == obj


# ------------------------------------------------------------ headers and frames
def _frame(*parts: bytes) -> bytes:
    body = b"".join(parts)
    return struct.pack(">i", len(body)) + body


@pytest.mark.parametrize("api,version", [
    ("ApiVersions", 0), ("ApiVersions", 3), ("ApiVersions", 4),
    ("Metadata", 1), ("Metadata", 8), ("Metadata", 9), ("Metadata", 12), ("Metadata", 13),
    ("Produce", 3), ("Produce", 8), ("Produce", 9), ("Produce", 13),
    ("Fetch", 4), ("Fetch", 11), ("Fetch", 12), ("Fetch", 17),
    ("InitProducerId", 1), ("InitProducerId", 2), ("InitProducerId", 5),
    ("EndTxn", 2), ("EndTxn", 3), ("FindCoordinator", 2), ("FindCoordinator", 4),
    ("SaslHandshake", 1), ("SaslAuthenticate", 2), ("JoinGroup", 5), ("JoinGroup", 9),
])
@pytest.mark.parametrize("client_id", ["kafka-python-3.0.12", None])
def test_request_frame_same_as_kafka_python(api, version, client_id):
    """Size prefix + RequestHeader v1 (non-flexible API versions) or v2
    (flexible: adds an empty tagged section, ClientId stays a classic int16
    string) + body, exactly as kafka-python frames it."""
    a = API[api]
    obj = sample(a.request, version, "full")
    hv = a.request_header_version(version)
    assert hv == (2 if version in a.request.spec.flexible else 1)
    hdr = REQUEST_HEADER.cls(request_api_key=a.key, request_api_version=version,
                             correlation_id=7_654_321, client_id=client_id)
    ours = _frame(REQUEST_HEADER.encode(hv, hdr), a.request.encode(version, obj))

    kobj = to_kp(KP[api + "Request"], a.request.spec.root, obj, version, root=True)
    kobj.with_header(correlation_id=7_654_321, client_id=client_id)
    theirs = bytes(kobj.encode(version=version, header=True, framed=True))
    assert ours == theirs

    # and kafka-python reads our header back
    kback = KP[api + "Request"].decode(ours, version=version, header=True, framed=True)
    assert kback.header.correlation_id == 7_654_321
    assert kback.header.client_id == client_id
    assert kback.header.request_api_key == a.key


@pytest.mark.parametrize("api,version", [
    ("ApiVersions", 0), ("ApiVersions", 2), ("ApiVersions", 3), ("ApiVersions", 4),
    ("Metadata", 8), ("Metadata", 9), ("Metadata", 13), ("Produce", 8), ("Produce", 9),
    ("Produce", 13), ("Fetch", 11), ("Fetch", 12), ("Fetch", 18), ("InitProducerId", 1),
    ("InitProducerId", 2), ("AddPartitionsToTxn", 2), ("AddPartitionsToTxn", 4),
    ("EndTxn", 2), ("EndTxn", 5), ("WriteTxnMarkers", 1), ("OffsetCommit", 7),
    ("OffsetCommit", 8), ("OffsetFetch", 5), ("OffsetFetch", 9),
])
def test_response_frame_same_as_kafka_python(api, version):
    """ResponseHeader v0 for non-flexible versions, v1 (with a tagged
    section) for flexible ones — except ApiVersions, always v0."""
    a = API[api]
    obj = sample(a.response, version, "full")
    hv = a.response_header_version(version)
    if api == "ApiVersions":
        assert hv == 0
    else:
        assert hv == (1 if version in a.response.spec.flexible else 0)
    hdr = RESPONSE_HEADER.cls(correlation_id=-5)
    ours = _frame(RESPONSE_HEADER.encode(hv, hdr), a.response.encode(version, obj))

    kobj = to_kp(KP[api + "Response"], a.response.spec.root, obj, version, root=True)
    kobj.with_header(correlation_id=-5)
    # (no version= here: kafka-python would set request_api_version on a ResponseHeader)
    theirs = bytes(kobj.encode(header=True, framed=True))
    assert ours == theirs


def test_api_versions_v3_response_uses_header_v0():
    """The body is flexible but the header has no tagged section: a client
    that sent an unsupported version must still be able to read it."""
    a = API["ApiVersions"]
    hdr = RESPONSE_HEADER.encode(a.response_header_version(3), RESPONSE_HEADER.cls(correlation_id=1))
    assert hdr == b"\x00\x00\x00\x01"
    assert RESPONSE_HEADER.encode(1, RESPONSE_HEADER.cls(correlation_id=1)) == b"\x00\x00\x00\x01\x00"
    assert a.response_header_version(3) == 0
    assert API["Metadata"].response_header_version(9) == 1
