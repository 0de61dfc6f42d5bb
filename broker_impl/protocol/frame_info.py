"""What one frame says (:class:`FrameInfo`), read no further than the question needs.

A request starts with its header (api key, api version, correlation id, client id; tagged fields
in header v2); a response starts with the correlation id only, so a response is named by the
request that carried the same correlation id on the same connection.

Two depths, because the readers differ in what they can afford. The proxy names every frame it
forwards and must not decode a 1 MiB Produce body to do so: :func:`request_info` and
:func:`response_info` read headers only (plus Produce's ``acks``, since an ``acks=0`` Produce is
never answered and nobody may wait for its response). Reports read recorded traffic and want the
error codes of responses: :func:`read_errors` decodes a response body for them, and
:class:`ConnectionDecoder` pairs a recorded connection's responses with their requests.

Frames that do not parse (a fault case sending garbage, a corrupt rule) are described as far as
they go, with a ``note`` saying why not further; nothing here raises on bad bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field, replace

from .codegen import ProtocolError, Struct, read_uvarint
from .errors import error_name
from .framing import SIZE
from .messages import API_BY_KEY, REQUEST_HEADER, RESPONSE_HEADER

_KEY_VERSION_CORR = struct.Struct(">hhi")
_I16 = struct.Struct(">h")
_UNREADABLE = (ProtocolError, ValueError, IndexError, struct.error)

PRODUCE = 0
SHORT = "frame shorter than a header"


@dataclass(frozen=True)
class FrameInfo:
    """One frame as kconform names it. ``size`` is the whole frame as sent, its 4-byte size prefix
    included (read from the prefix, so a captured frame cut short still tells its real size)."""

    direction: str                 # "c2b" request, "b2c" response
    size: int
    api_key: int | None = None
    api_name: str | None = None    # Kafka's name; None when the key is unknown
    api_version: int | None = None
    correlation_id: int | None = None
    client_id: str | None = None   # a response carries its request's
    expects_response: bool = True  # False for Produce with acks=0
    error_codes: list[int] = field(default_factory=list)        # top-level *error_code fields (read_errors)
    nested_error_codes: list[int] = field(default_factory=list)  # distinct non-zero codes below the top
    note: str | None = None        # why the frame was not read as far as asked

    @property
    def api_label(self) -> str:
        """The API's name for a reader: Kafka's, ``ApiKey<n>`` for a key Kafka lacks, ``?`` when unknown."""
        if self.api_name is not None:
            return self.api_name
        return "?" if self.api_key is None else f"ApiKey{self.api_key}"

    def describe(self) -> str:
        name = self.api_name or (f"api {self.api_key}" if self.api_key is not None else "unknown frame")
        ver = f" v{self.api_version}" if self.api_version is not None else ""
        return f"{self.direction} {name}{ver} corr={self.correlation_id} ({self.size} bytes)"

    def errors_text(self) -> str:
        """A response's error names (``-`` for none); empty for a request."""
        if self.direction == "c2b":
            return ""
        parts = [error_name(c) for c in self.error_codes]
        if self.nested_error_codes:
            parts.append("nested: " + ",".join(error_name(c) for c in self.nested_error_codes))
        return " ".join(parts) if parts else "-"


def _size(frame) -> int:
    return 4 + SIZE.unpack_from(frame)[0] if len(frame) >= 4 else len(frame)


def request_info(frame) -> FrameInfo:
    """Name a client->broker frame from its header (``frame`` includes the size prefix)."""
    size = _size(frame)
    if len(frame) < 4 + _KEY_VERSION_CORR.size:
        return FrameInfo("c2b", size, note=SHORT)
    api_key, version, corr = _KEY_VERSION_CORR.unpack_from(frame, 4)
    api = API_BY_KEY.get(api_key)
    if api is None:
        return FrameInfo("c2b", size, api_key, None, version, corr, note="unknown API key")
    client_id = None
    expects = True
    note = None
    try:
        header, pos = REQUEST_HEADER.decode(api.request_header_version(version), frame, 4)
        client_id = header.client_id
        if api_key == PRODUCE:
            expects = _produce_acks(frame, pos, version, api.is_flexible(version)) != 0
    except _UNREADABLE as exc:
        note = str(exc)
    return FrameInfo("c2b", size, api_key, api.name, version, corr, client_id, expects, note=note)


SASL_AUTHENTICATE = 36
_I32 = struct.Struct(">i")


def sasl_token_span(frame) -> tuple[int, int] | None:
    """Where a SaslAuthenticate request's ``auth_bytes`` lie in ``frame`` (size prefix included),
    for whoever records traffic and must not keep a credential: PLAIN sends the password itself,
    OAUTHBEARER a bearer token (SCRAM sends proofs). None for any other frame or one that does
    not parse that far."""
    if len(frame) < 4 + _KEY_VERSION_CORR.size:
        return None
    api_key, version, _ = _KEY_VERSION_CORR.unpack_from(frame, 4)
    api = API_BY_KEY.get(api_key)
    if api_key != SASL_AUTHENTICATE or api is None:
        return None
    try:
        _, pos = REQUEST_HEADER.decode(api.request_header_version(version), frame, 4)
        if api.is_flexible(version):
            n, pos = read_uvarint(frame, pos)
            n -= 1
        else:
            (n,) = _I32.unpack_from(frame, pos)
            pos += 4
    except _UNREADABLE:
        return None
    return (pos, min(pos + n, len(frame))) if n > 0 else None


def _produce_acks(frame, pos: int, version: int, flexible: bool) -> int:
    """``acks`` of a Produce request; it follows the nullable transactional id (v3+)."""
    if version >= 3:
        if flexible:
            n, pos = read_uvarint(frame, pos)
            pos += max(n - 1, 0)
        else:
            (n,) = _I16.unpack_from(frame, pos)
            pos += 2 + max(n, 0)
    (acks,) = _I16.unpack_from(frame, pos)
    return acks


def response_info(frame, api_key: int | None = None, api_version: int | None = None,
                  client_id: str | None = None) -> FrameInfo:
    """Name a broker->client frame as the answer to ``api_key`` v``api_version`` (the request with
    its correlation id; None when there was none). Reads the correlation id only."""
    size = _size(frame)
    if len(frame) < 8:
        return FrameInfo("b2c", size, note=SHORT)
    (corr,) = SIZE.unpack_from(frame, 4)
    if api_key is None:
        return FrameInfo("b2c", size, correlation_id=corr)
    api = API_BY_KEY.get(api_key)
    return FrameInfo("b2c", size, api_key, api.name if api else None, api_version, corr, client_id)


def read_errors(info: FrameInfo, frame) -> FrameInfo:
    """``info`` of a response, with the error codes its body carries: the body is decoded."""
    if info.note is not None:
        return info
    api = API_BY_KEY.get(info.api_key) if info.api_key is not None else None
    if api is None:
        return replace(info, note="no request with this correlation id" if info.api_key is None else "unknown API key")
    try:
        _, pos = RESPONSE_HEADER.decode(api.response_header_version(info.api_version), frame, 4)
        body, _ = api.response.decode(info.api_version, frame, pos)
    except _UNREADABLE as exc:
        return replace(info, note=f"body unreadable: {exc}")
    top, nested = _error_codes(body)
    return replace(info, error_codes=top, nested_error_codes=nested)


def _error_codes(obj: Struct) -> tuple[list[int], list[int]]:
    """Top-level ``*error_code`` fields, and distinct non-zero ones further down."""
    top: list[int] = []
    nested: list[int] = []

    def walk(v) -> None:
        if isinstance(v, Struct):
            for f in v._fields:
                x = getattr(v, f)
                if f.endswith("error_code") and isinstance(x, int):
                    if x and x not in nested:
                        nested.append(x)
                else:
                    walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    for f in obj._fields:
        v = getattr(obj, f)
        if f.endswith("error_code") and isinstance(v, int):
            top.append(v)
        else:
            walk(v)
    return top, nested


class ConnectionDecoder:
    """Names one recorded connection's frames, response error codes included.

    Responses are paired with their requests by correlation id rather than by order, which
    also copes with a recording that lost a frame.
    """

    def __init__(self) -> None:
        self._pending: dict[int, FrameInfo] = {}

    def request(self, frame) -> FrameInfo:
        info = request_info(frame)
        if info.correlation_id is not None:
            self._pending[info.correlation_id] = info
        return info

    def response(self, frame) -> FrameInfo:
        info = response_info(frame)
        req = self._pending.pop(info.correlation_id, None) if info.correlation_id is not None else None
        if req is not None:
            info = response_info(frame, req.api_key, req.api_version, req.client_id)
        return read_errors(info, frame)

    def frame(self, direction: str, frame) -> FrameInfo:
        return self.request(frame) if direction == "c2b" else self.response(frame)
