"""Byte equality with kio, an independent codec generated from the same
Kafka schemas (with its own Rust reader and Python writer).

The same logical message is built for both codecs from one schema-driven
sample: our object is converted field by field to kio's frozen dataclass
(kio turns ``*TimeMs`` into ``timedelta``, error codes into an enum, UUIDs
into ``uuid.UUID``, timestamps into aware ``datetime``). Then:

- our bytes == kio's bytes;
- kio reads our bytes back to the same dataclass, consuming all of them;
- we read kio's bytes back to the same object.

kio's known limits are avoided rather than papered over: its reader raises
on unknown tagged fields (Kafka skips them; see
:func:`test_unknown_tagged_fields_skipped_where_kio_raises`); it models
error codes as an enum of known codes (so -32768 is refused) and times as
``timedelta``/``datetime`` (which overflow at the int64 limits). The
``edge`` variant (integers at type limits) is therefore compared with
kafka-python and in the round trips, not here.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import io
import uuid

import pytest

pytest.importorskip("kio")

from kio.schema.errors import ErrorCode  # noqa: E402
from kio.serial import entity_reader, entity_writer  # noqa: E402
from kio.serial._introspect import (  # noqa: E402
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
)


from broker_impl.protocol.messages import API, REQUEST_HEADER, RESPONSE_HEADER  # noqa: E402
from broker_impl.protocol.schema import FieldSpec, StructSpec, snake  # noqa: E402
from codec_samples import present_fields, sample  # noqa: E402

#: The APIs a transactional Kafka client exercises: these must all be compared.
REQUIRED_APIS = (
    "ApiVersions", "Metadata", "Produce", "Fetch", "ListOffsets", "FindCoordinator",
    "JoinGroup", "SyncGroup", "Heartbeat", "OffsetCommit", "OffsetFetch",
    "InitProducerId", "AddPartitionsToTxn", "EndTxn", "TxnOffsetCommit",
    "WriteTxnMarkers", "DescribeTransactions",
)

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_ZERO_UUID = bytes(16)


def kio_class(api: str, version: int, side: str):
    """kio's dataclass for ``api`` v``version`` (``side`` = request|response), or None."""
    try:
        mod = importlib.import_module(f"kio.schema.{snake(api)}.v{version}.{side}")
    except ImportError:
        return None
    return getattr(mod, f"{api}{side.capitalize()}", None)


# ------------------------------------------------------------ ours -> kio
def _prim_to_kio(kafka_type: str, v):
    if v is None:
        return None
    if kafka_type == "error_code":
        return ErrorCode(v)
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=v)
    if kafka_type == "datetime_i64":
        return _EPOCH + datetime.timedelta(milliseconds=v)
    if kafka_type == "uuid":
        return None if bytes(v) == _ZERO_UUID else uuid.UUID(bytes=bytes(v))
    if kafka_type in ("bytes", "records"):
        return bytes(v)
    return v


def to_kio(kcls, st: StructSpec, obj, version: int):
    """Convert our struct ``obj`` to kio's ``kcls``, field by field in schema order."""
    if obj is None:
        return None
    ours = present_fields(st, version)
    theirs = dataclasses.fields(kcls)
    assert len(ours) == len(theirs), (kcls, [f.name for f in ours], [f.name for f in theirs])
    kw = {}
    for f, kf in zip(ours, theirs):
        _check_same_field(f, kf)
        v = getattr(obj, f.attr)
        fc = classify_field(kf)
        if isinstance(fc, EntityTupleField):
            kw[kf.name] = None if v is None else tuple(to_kio(fc.type_, f.struct, e, version) for e in v)
        elif isinstance(fc, EntityField):
            kw[kf.name] = to_kio(fc.type_, f.struct, v, version)
        elif isinstance(fc, PrimitiveTupleField):
            kt = kf.metadata["kafka_type"]
            kw[kf.name] = None if v is None else tuple(_prim_to_kio(kt, e) for e in v)
        else:
            kw[kf.name] = _prim_to_kio(kf.metadata["kafka_type"], v)
    return kcls(**kw)


def _check_same_field(f: FieldSpec, kf) -> None:
    """kio drops unit suffixes (``throttle_time_ms`` -> ``throttle_time``); any
    other difference means the two schema copies are out of step."""
    a, b = f.attr, kf.name
    assert a == b or a.startswith(b + "_") or a.replace("_", "") == b.replace("_", ""), (a, b)


# ------------------------------------------------------------ kio -> ours
def _prim_from_kio(f: FieldSpec, v):
    t = f.elem_type
    if t == "uuid":
        return _ZERO_UUID if v is None else v.bytes
    if v is None:
        return None
    if isinstance(v, ErrorCode):
        return v.value
    if isinstance(v, datetime.timedelta):
        return v // datetime.timedelta(milliseconds=1)
    if isinstance(v, datetime.datetime):
        return (v - _EPOCH) // datetime.timedelta(milliseconds=1)
    if t in ("bytes", "records"):
        return bytes(v)
    return v


def from_kio(cls, st: StructSpec, kobj, version: int):
    if kobj is None:
        return None
    kw = {}
    for f, kf in zip(present_fields(st, version), dataclasses.fields(kobj)):
        v = getattr(kobj, kf.name)
        sub = getattr(cls, f.struct.name) if f.struct is not None else None
        if f.struct is not None and f.is_array:
            kw[f.attr] = None if v is None else [from_kio(sub, f.struct, e, version) for e in v]
        elif f.struct is not None:
            kw[f.attr] = from_kio(sub, f.struct, v, version)
        elif f.is_array:
            kw[f.attr] = None if v is None else [_prim_from_kio(f, e) for e in v]
        else:
            kw[f.attr] = _prim_from_kio(f, v)
    return cls(**kw)


def kio_encode(kcls, kobj) -> bytes:
    buf = io.BytesIO()
    entity_writer(kcls)(buf, kobj)
    return buf.getvalue()


def _cases():
    out = []
    for api in sorted(API):
        a = API[api]
        for v in range(a.min_version, a.max_version + 1):
            for side in ("request", "response"):
                if kio_class(api, v, side) is not None:
                    out.append((api, v, side))
    return out


CASES = _cases()


def test_kio_comparison_covers_every_version_of_the_client_apis():
    """Guards against the parametrisation silently shrinking (e.g. a kio
    upgrade renaming modules): every version of the transactional client's
    APIs is compared, and kio knows (nearly) every API we do."""
    for api in REQUIRED_APIS:
        a = API[api]
        for v in range(a.min_version, a.max_version + 1):
            assert (api, v, "request") in CASES and (api, v, "response") in CASES, (api, v)
    assert len({a for a, _, _ in CASES}) >= 45
    assert len(CASES) >= 400


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}{c[2].capitalize()}-v{c[1]}")
@pytest.mark.parametrize("variant", ["full", "nulls"])
def test_same_bytes_as_kio(case, variant):
    api, version, side = case
    codec = getattr(API[api], side)
    kcls = kio_class(api, version, side)
    obj = sample(codec, version, variant)
    ours = codec.encode(version, obj)

    kobj = to_kio(kcls, codec.spec.root, obj, version)
    theirs = kio_encode(kcls, kobj)
    assert ours == theirs

    kback, size = entity_reader(kcls)(ours, 0)
    assert size == len(ours)
    assert kback == kobj

    back, end = codec.decode(version, theirs, 0)
    assert end == len(theirs)
    assert back == obj
    assert from_kio(codec.cls, codec.spec.root, kback, version) == obj


@pytest.mark.parametrize("hv", [1, 2])
def test_request_header_same_bytes_as_kio(hv):
    mod = importlib.import_module(f"kio.schema.request_header.v{hv}.header")
    for client_id in ("kconform-\u00e9", None, "x" * 200):
        obj = REQUEST_HEADER.cls(request_api_key=0, request_api_version=9,
                                 correlation_id=-123456, client_id=client_id)
        ours = REQUEST_HEADER.encode(hv, obj)
        kobj = to_kio(mod.RequestHeader, REQUEST_HEADER.spec.root, obj, hv)
        assert ours == kio_encode(mod.RequestHeader, kobj)
        assert entity_reader(mod.RequestHeader)(ours, 0) == (kobj, len(ours))


@pytest.mark.parametrize("hv", [0, 1])
def test_response_header_same_bytes_as_kio(hv):
    mod = importlib.import_module(f"kio.schema.response_header.v{hv}.header")
    obj = RESPONSE_HEADER.cls(correlation_id=2**31 - 1)
    ours = RESPONSE_HEADER.encode(hv, obj)
    kobj = to_kio(mod.ResponseHeader, RESPONSE_HEADER.spec.root, obj, hv)
    assert ours == kio_encode(mod.ResponseHeader, kobj)
    assert entity_reader(mod.ResponseHeader)(ours, 0) == (kobj, len(ours))


def _with_unknown_tags(body: bytes) -> bytes:
    """``body`` is a flexible message whose last byte is its (empty) root
    tagged-field section; replace that with two tags nobody knows, in
    ascending order as the spec requires: tag 7 (3 bytes), tag 300 (0 bytes,
    a 2-byte varint tag number)."""
    assert body[-1] == 0
    return body[:-1] + b"\x02" + b"\x07\x03abc" + b"\xac\x02\x00"


def test_unknown_tagged_fields_skipped_where_kio_raises():
    """Kafka skips tagged fields it does not know (KIP-482: that is how old
    brokers tolerate new clients); kio 0.6.5 raises instead. Our decoder
    must behave like Kafka, at the root and inside nested structs."""
    api = API["FindCoordinator"]
    obj = sample(api.request, 4, "full")
    body = api.request.encode(4, obj)
    tagged = _with_unknown_tags(body)
    back, end = api.request.decode(4, tagged, 0)
    assert (back, end) == (obj, len(tagged))
    kcls = kio_class("FindCoordinator", 4, "request")
    assert entity_reader(kcls)(body, 0)[1] == len(body)
    with pytest.raises(KeyError, match="Unknown tagged field"):
        entity_reader(kcls)(tagged, 0)


def test_unknown_tagged_field_in_nested_struct_is_skipped():
    """A Heartbeat v4 request has no nested structs; use ApiVersions v3's
    response, whose ApiKeys elements each end with a tagged section."""
    codec = API["ApiVersions"].response
    obj = codec.cls(error_code=0, throttle_time_ms=5, api_keys=[
        codec.cls.ApiVersion(api_key=0, min_version=3, max_version=13)])
    body = codec.encode(3, obj)
    # error_code(2) + compact array len(1) + api_key, min, max (6) + element tags(1)
    elem_tags_at = 2 + 1 + 6
    assert body[elem_tags_at] == 0
    tagged = body[:elem_tags_at] + b"\x01\x05\x02hi" + body[elem_tags_at + 1:]
    back, end = codec.decode(3, tagged, 0)
    assert (back, end) == (obj, len(tagged))
    with pytest.raises(KeyError, match="Unknown tagged field"):
        entity_reader(kio_class("ApiVersions", 3, "response"))(tagged, 0)


@pytest.mark.parametrize("name", ["ConsumerProtocolAssignment", "ConsumerProtocolSubscription"])
def test_consumer_protocol_data_same_bytes_as_kio(name):
    """The group-protocol payloads carried inside JoinGroup/SyncGroup
    (``data`` schemas, no header) at every version."""
    from broker_impl.protocol.messages import DATA

    codec = DATA[name]
    for v in range(codec.spec.valid.lo, codec.spec.valid.hi + 1):
        kcls = getattr(importlib.import_module(f"kio.schema.{snake(name)}.v{v}.data"), name)
        for variant in ("full", "nulls"):
            obj = sample(codec, v, variant)
            ours = codec.encode(v, obj)
            kobj = to_kio(kcls, codec.spec.root, obj, v)
            assert ours == kio_encode(kcls, kobj), (v, variant)
            assert entity_reader(kcls)(ours, 0) == (kobj, len(ours))
