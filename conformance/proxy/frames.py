"""What the proxy knows about one frame: which API, which version, which correlation id.

Kafka frames are a 4-byte big-endian size followed by that many bytes. A request starts with
its header (api key, api version, correlation id, client id; tagged fields in header v2); a
response starts with the correlation id only. So a response can be named only by remembering,
per connection, which request carried that correlation id: :class:`PendingRequests` does that.

Decoding stops at the header: the proxy never needs a body, and decoding a 1 MiB Produce body
per frame would cost more than forwarding it. The one body field read is Produce's ``acks``,
because an ``acks=0`` Produce is never answered and must not wait for a response forever.

Frames that do not parse (a fault case sending garbage, a corrupt rule upstream of another
proxy) are still described as far as they go: ``api_name`` is None when the key is unknown.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from dataclasses import dataclass

from broker_impl.protocol.codegen import ProtocolError, read_uvarint
from broker_impl.protocol.messages import API_BY_KEY, REQUEST_HEADER

SIZE = struct.Struct(">i")
_KEY_VERSION_CORR = struct.Struct(">hhi")
_I16 = struct.Struct(">h")

PRODUCE = 0


@dataclass(frozen=True)
class FrameInfo:
    """One frame as the proxy names it. ``size`` counts the whole frame, 4-byte prefix included."""

    direction: str            # "c2b" request, "b2c" response
    size: int
    api_key: int | None = None
    api_name: str | None = None
    api_version: int | None = None
    correlation_id: int | None = None
    client_id: str | None = None   # a response carries its request's
    expects_response: bool = True  # False for Produce with acks=0

    def describe(self) -> str:
        name = self.api_name or (f"api {self.api_key}" if self.api_key is not None else "unknown frame")
        ver = f" v{self.api_version}" if self.api_version is not None else ""
        return f"{self.direction} {name}{ver} corr={self.correlation_id} ({self.size} bytes)"


def parse_request(frame: bytes) -> FrameInfo:
    """Name a client->broker frame (``frame`` includes the size prefix)."""
    size = len(frame)
    if size < 12:
        return FrameInfo("c2b", size)
    api_key, version, corr = _KEY_VERSION_CORR.unpack_from(frame, 4)
    api = API_BY_KEY.get(api_key)
    if api is None:
        return FrameInfo("c2b", size, api_key, None, version, corr)
    client_id = None
    expects = True
    try:
        header, pos = REQUEST_HEADER.decode(api.request_header_version(version), frame, 4)
        client_id = header.client_id
        if api_key == PRODUCE:
            expects = _produce_acks(frame, pos, api.is_flexible(version)) != 0
    except (ProtocolError, IndexError, struct.error, UnicodeDecodeError):
        pass
    return FrameInfo("c2b", size, api_key, api.name, version, corr, client_id, expects)


def _produce_acks(frame: bytes, pos: int, flexible: bool) -> int:
    """``acks`` of a Produce request; it follows the nullable transactional id (v3+)."""
    (version,) = _I16.unpack_from(frame, 6)
    if version >= 3:
        if flexible:
            n, pos = read_uvarint(frame, pos)
            pos += max(n - 1, 0)
        else:
            (n,) = _I16.unpack_from(frame, pos)
            pos += 2 + max(n, 0)
    (acks,) = _I16.unpack_from(frame, pos)
    return acks


def response_correlation_id(frame: bytes) -> int | None:
    if len(frame) < 8:
        return None
    return SIZE.unpack_from(frame, 4)[0]


class PendingRequests:
    """Requests forwarded on one connection and not yet answered, in the order they were sent.

    Kafka answers a connection's requests in order, so when the response to correlation id X
    arrives, every request before X that is still pending was never going to be answered
    (an ``acks=0`` Produce we could not recognise, a request the broker chose to drop): they
    are forgotten, which keeps this bounded. A response whose id was never sent (a corrupted
    frame) is named as unknown and forgets nothing.

    Responses the proxy synthesizes (an ``answer`` rule) wait in the same queue, behind the
    requests that were pending when they were made: a client reads its responses in request
    order, so such a response may go out only once everything before it was answered.
    :meth:`take_ready` hands over those whose turn has come.
    """

    def __init__(self) -> None:
        self._pending: OrderedDict[object, object] = OrderedDict()
        self._ready: list[tuple[FrameInfo, bytes, object]] = []
        self._injected = 0

    def sent(self, info: FrameInfo) -> None:
        if info.correlation_id is not None and info.expects_response:
            self._pending[info.correlation_id] = info

    def inject(self, info: FrameInfo, frame: bytes, tag: object = None) -> None:
        """Queue ``frame``, the proxy's own response (named ``info``), behind every pending request;
        ``tag`` comes back with it (the rule that made it)."""
        self._injected += 1
        self._pending[("injected", self._injected)] = (info, frame, tag)

    def answer(self, frame: bytes) -> FrameInfo:
        corr = response_correlation_id(frame)
        req = self._pending.get(corr) if corr is not None else None
        if not isinstance(req, FrameInfo):
            return FrameInfo("b2c", len(frame), correlation_id=corr)
        while True:
            k, v = self._pending.popitem(last=False)
            if k == corr:
                break
            if not isinstance(v, FrameInfo):
                self._ready.append(v)  # injected before this request: it goes out first
        return FrameInfo("b2c", len(frame), req.api_key, req.api_name, req.api_version, corr, req.client_id)

    def take_passed(self) -> list[tuple[FrameInfo, bytes, object]]:
        """Injected responses the last :meth:`answer` passed over: they go out before its frame."""
        ready, self._ready = self._ready, []
        return ready

    def take_ready(self) -> list[tuple[FrameInfo, bytes, object]]:
        """Injected responses that may go out now, in order: those passed over by :meth:`answer`,
        then those at the head of the queue (nothing still unanswered before them)."""
        while self._pending:
            k, v = next(iter(self._pending.items()))
            if isinstance(v, FrameInfo):
                break
            self._pending.popitem(last=False)
            self._ready.append(v)
        ready, self._ready = self._ready, []
        return ready

    def __len__(self) -> int:
        return len(self._pending)
