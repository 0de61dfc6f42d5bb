"""Reading Kafka frames out of byte streams, without scapy.

A Kafka connection is a stream of size-prefixed frames. A request names its
API key and version in its header; a response carries only the correlation
id, so a response can be read only by remembering the request that had the
same correlation id on the same connection. :class:`ConnectionDecoder` keeps
that memory; the pcap reader and the scapy layer both use it.

Bodies are decoded with ``broker_impl.protocol`` (the codec generated from
Kafka's own JSON schemas), so API names and error names are Kafka's.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from broker_impl.protocol.codegen import ProtocolError, Struct
from broker_impl.protocol.errors import Errors
from broker_impl.protocol.messages import API_BY_KEY, REQUEST_HEADER, RESPONSE_HEADER

_SIZE = struct.Struct(">i")
_REQ_HDR = struct.Struct(">hhi")


def api_name(api_key: int) -> str:
    api = API_BY_KEY.get(api_key)
    return api.name if api else f"ApiKey{api_key}"


def error_name(code: int) -> str:
    try:
        return Errors(code).name
    except ValueError:
        return f"ERROR_{code}"


def split_frames(stream: bytes) -> tuple[list[bytes], bytes]:
    """Cut ``stream`` into whole frames (each with its 4-byte size); return the rest."""
    frames: list[bytes] = []
    pos = 0
    while len(stream) - pos >= 4:
        (size,) = _SIZE.unpack_from(stream, pos)
        if size < 0:
            raise ProtocolError(f"negative frame size {size} at byte {pos}")
        end = pos + 4 + size
        if end > len(stream):
            break
        frames.append(stream[pos:end])
        pos = end
    return frames, stream[pos:]


@dataclass
class FrameInfo:
    """What one frame says, as a transcript line shows it."""

    direction: str                    # "c2b" (request) or "b2c" (response)
    size: int                         # the size field (bytes after it)
    correlation_id: int
    api_key: int | None = None
    api_version: int | None = None
    client_id: str | None = None
    error_codes: list[int] = field(default_factory=list)        # top-level error_code fields
    nested_error_codes: list[int] = field(default_factory=list)  # distinct non-zero codes below the top
    note: str | None = None           # why the body could not be read, if it could not

    @property
    def api_name(self) -> str:
        return "?" if self.api_key is None else api_name(self.api_key)

    def errors_text(self) -> str:
        if self.direction == "c2b":
            return ""
        parts = [error_name(c) for c in self.error_codes]
        if self.nested_error_codes:
            parts.append("nested: " + ",".join(error_name(c) for c in self.nested_error_codes))
        return " ".join(parts) if parts else "-"


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


def decode_request(frame: bytes) -> FrameInfo:
    """Header of a request frame (size included); the body is not needed to name it."""
    (size,) = _SIZE.unpack_from(frame, 0)
    api_key, version, corr = _REQ_HDR.unpack_from(frame, 4)
    info = FrameInfo("c2b", size, corr, api_key, version)
    api = API_BY_KEY.get(api_key)
    if api is None:
        info.note = "unknown API key"
        return info
    try:
        header, _ = REQUEST_HEADER.decode(api.request_header_version(version), frame[4:], 0)
        info.client_id = header.client_id
    except (ProtocolError, ValueError) as exc:
        info.note = str(exc)
    return info


def decode_response(frame: bytes, api_key: int | None, api_version: int | None) -> FrameInfo:
    """A response frame, read as the answer to ``api_key`` v``api_version``."""
    (size,) = _SIZE.unpack_from(frame, 0)
    (corr,) = _SIZE.unpack_from(frame, 4)
    info = FrameInfo("b2c", size, corr, api_key, api_version)
    api = API_BY_KEY.get(api_key) if api_key is not None else None
    if api is None:
        info.note = "no request with this correlation id" if api_key is None else "unknown API key"
        return info
    try:
        _, pos = RESPONSE_HEADER.decode(api.response_header_version(api_version), frame[4:], 0)
        body, _ = api.response.decode(api_version, frame[4:], pos)
    except (ProtocolError, ValueError) as exc:
        info.note = f"body unreadable: {exc}"
        return info
    info.error_codes, info.nested_error_codes = _error_codes(body)
    return info


class ConnectionDecoder:
    """Decodes one connection's frames, pairing responses with their requests.

    Kafka answers requests on a connection in order, but pairing by
    correlation id also copes with a transcript that lost a frame.
    """

    def __init__(self) -> None:
        self._pending: dict[int, tuple[int, int]] = {}

    def request(self, frame: bytes) -> FrameInfo:
        info = decode_request(frame)
        self._pending[info.correlation_id] = (info.api_key, info.api_version)
        return info

    def response(self, frame: bytes) -> FrameInfo:
        (corr,) = _SIZE.unpack_from(frame, 4)
        key, version = self._pending.pop(corr, (None, None))
        return decode_response(frame, key, version)

    def frame(self, direction: str, frame: bytes) -> FrameInfo:
        if len(frame) < 8:
            return FrameInfo(direction, len(frame) - 4, -1, note="frame shorter than a header")
        return self.request(frame) if direction == "c2b" else self.response(frame)
