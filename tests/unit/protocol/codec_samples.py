"""Schema-driven sample messages for the codec tests.

The values are derived from Kafka's JSON schemas, never written per
message: for a given message, version and *variant* every field present in
that version gets a value that differs from its default (so that tagged
fields are really written and a decoder that silently drops a field cannot
pass), nested arrays get elements, and nullable fields are either all set or
all ``None``.

Variants:
- ``"full"``: moderate values, every nullable field set, arrays of 2 elements;
  strings/bytes long enough (> 127 bytes for some) to need 2-byte varint
  lengths in flexible versions;
- ``"nulls"``: like ``"full"`` but every field nullable in that version is
  ``None`` (nullable strings, bytes, records, arrays and structs);
- ``"edge"``: integers at the limits of their type, empty strings/bytes
  where that is not the default, arrays of 1 element.
"""

from __future__ import annotations

import hashlib

from broker_impl.protocol.codegen import Codec
from broker_impl.protocol.messages import API, DATA, REQUEST_HEADER, RESPONSE_HEADER
from broker_impl.protocol.schema import FieldSpec, StructSpec

VARIANTS = ("full", "nulls", "edge")

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}

#: Real error codes, so that oracles with an ErrorCode enum (kio) accept them.
ERROR_CODES = (3, 6, 15, 16, 47, 51, 87)


def all_codecs() -> list[tuple[str, Codec]]:
    """Every message codec: requests and responses of every API, headers, data."""
    out = []
    for name in sorted(API):
        out.append((f"{name}Request", API[name].request))
        out.append((f"{name}Response", API[name].response))
    for name in sorted(DATA):
        out.append((name, DATA[name]))
    return out


def all_message_versions() -> list[tuple[str, int]]:
    """``(message name, version)`` for every valid version of every message."""
    out = []
    for name, codec in all_codecs():
        v = codec.spec.valid
        out.extend((name, ver) for ver in range(v.lo, v.hi + 1))
    return out


def codec_by_name(name: str) -> Codec:
    if name == "RequestHeader":
        return REQUEST_HEADER
    if name == "ResponseHeader":
        return RESPONSE_HEADER
    if name in DATA:
        return DATA[name]
    for suffix, attr in (("Request", "request"), ("Response", "response")):
        if name.endswith(suffix) and name[: -len(suffix)] in API:
            return getattr(API[name[: -len(suffix)]], attr)
    raise KeyError(name)


class _Counter:
    def __init__(self) -> None:
        self.n = 0

    def next(self) -> int:
        self.n += 1
        return self.n


def _int_value(f: FieldSpec, t: str, variant: str, k: int) -> int:
    lo, hi = INT_RANGES[t]
    d = f.default if isinstance(f.default, int) else 0
    if variant == "edge":
        cands = (hi, lo) if k % 2 else (lo, hi)
    else:
        if t == "int16" and f.name.endswith("ErrorCode"):
            cands = (ERROR_CODES[k % len(ERROR_CODES)], ERROR_CODES[(k + 1) % len(ERROR_CODES)])
        else:
            cands = (d + 1 + (k % 90), d - 1 - (k % 90))
    for c in cands:
        if lo <= c <= hi and c != d:
            return c
    raise AssertionError(f"no non-default int for {f.name}")


def _uuid(k: int) -> bytes:
    return hashlib.sha256(b"uuid%d" % k).digest()[:16]


def _primitive(f: FieldSpec, t: str, variant: str, c: _Counter):
    k = c.next()
    if t in INT_RANGES:
        return _int_value(f, t, variant, k)
    if t == "bool":
        return not bool(f.default) if not f.is_array else bool(k % 2)
    if t == "float64":
        return -1.0e300 if variant == "edge" else 2.5 + k
    if t == "uuid":
        return _uuid(k)
    if t == "string":
        if variant == "edge" and f.default != "":
            return ""
        s = f"{f.attr}-{k}-\u00e9\u2713"
        return s * 8 if k % 3 == 0 else s  # some > 127 bytes
    if t in ("bytes", "records"):
        if variant == "edge" and f.default != b"":
            return b""
        return hashlib.sha256(b"%d" % k).digest() * (5 if k % 3 == 0 else 1)
    raise AssertionError(t)


def _struct(codec: Codec, st: StructSpec, version: int, variant: str, c: _Counter):
    cls = codec.classes[st.name]
    kwargs = {}
    for f in st.fields:
        if version not in f.versions:
            continue
        kwargs[f.attr] = _field(codec, f, version, variant, c)
    return cls(**kwargs)


def _field(codec: Codec, f: FieldSpec, version: int, variant: str, c: _Counter):
    if variant == "nulls" and version in f.nullable:
        return None
    if f.is_array:
        n = 1 if variant == "edge" else 2
        if f.struct is not None:
            return [_struct(codec, f.struct, version, variant, c) for _ in range(n)]
        return [_primitive(f, f.elem_type, variant, c) for _ in range(n)]
    if f.struct is not None:
        return _struct(codec, f.struct, version, variant, c)
    return _primitive(f, f.type, variant, c)


def sample(codec: Codec, version: int, variant: str = "full"):
    """An instance of ``codec``'s root class for ``version``."""
    return _struct(codec, codec.spec.root, version, variant, _Counter())


def present_fields(st: StructSpec, version: int) -> list[FieldSpec]:
    return [f for f in st.fields if version in f.versions]
