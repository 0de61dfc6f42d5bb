"""One client connection: frames in, responses out, strictly in order.

Kafka's SocketServer mutes a channel while one of its requests is being
handled, so a connection's responses always come back in request order; we
get the same by handling a connection's requests one after the other.

Bad input never takes the broker down: a frame whose size is out of range,
whose header names an unknown API or an unsupported version, or whose body
does not parse (the codec refuses what Kafka's generated readers refuse: null
in a non-nullable field, a string longer than 32767 bytes, an array longer than
the bytes left), closes *that* connection, as Kafka does. The one exception is
ApiVersions at a version the broker does not know: Kafka answers it with
UNSUPPORTED_VERSION in a v0 response, so that the client can pick a version
both sides speak.

A connection on a TLS or SASL listener authenticates first (server/listeners, server/authenticator):
none of its requests reaches a handler before it has.

Those closes are logged per peer host at a bounded rate (:class:`PeerWarnings`):
a peer sending garbage in a loop -- a fuzzer, a client speaking another
protocol -- would otherwise write a line per frame (hundreds of megabytes:
docs/measurements.md). Internal errors (a handler raised) are bugs and are always
logged with their traceback.
"""

from __future__ import annotations

import itertools
import logging
import struct
from functools import partial

import trio

from ..cluster.network_client import NetworkError
from ..handlers import HANDLERS, Handler
from ..protocol.codegen import ProtocolError
from ..protocol.errors import Errors
from ..protocol.framing import FrameBuffer, FrameError
from ..protocol.messages import API, REQUEST_HEADER
from ..protocol.stream_io import receive_some, send_all
from .authenticator import AuthenticationClose, new_authenticator
from ..cluster.authorizer import BROKER_PRINCIPAL
from .context import RequestContext
from .listeners import ANONYMOUS, Listener, secure

log = logging.getLogger("kconform.broker.connection")

_HDR = struct.Struct(">hhi")
_CONN_IDS = itertools.count(1)
_RECV_CHUNK = 1 << 20


class PeerWarnings:
    """At most ``burst`` warnings per peer host in each ``window_s``; the rest are counted and
    said in one line when the host's next window opens. Hosts are few (clients, not
    connections: every connection has its own port), so the table stays small."""

    def __init__(self, burst: int = 5, window_s: float = 60.0, clock=None) -> None:
        self.burst = burst
        self.window_s = window_s
        self.clock = clock or trio.current_time
        self._hosts: dict[str, list] = {}  # host -> [window start, logged, suppressed]

    def warn(self, peer: str, message: str, *args) -> None:
        host = peer.rpartition(":")[0] or peer
        now = self.clock()
        entry = self._hosts.get(host)
        if entry is None or now - entry[0] >= self.window_s:
            if entry is not None and entry[2]:
                log.warning("%d more malformed or refused requests from %s in the last %.0f s (not logged one by one)",
                            entry[2], host, now - entry[0])
            entry = self._hosts[host] = [now, 0, 0]
        if entry[1] < self.burst:
            entry[1] += 1
            log.warning(message, *args)
        else:
            entry[2] += 1


#: One per process, as the log it protects is.
PEER_WARNINGS = PeerWarnings()


class CloseConnection(Exception):
    """The peer sent something Kafka answers by closing the connection."""


class FrameReader:
    """A connection's requests, frame by frame (size prefix included), read as they come."""

    def __init__(self, stream: trio.SocketStream, max_bytes: int):
        self.stream = stream
        self.frames = FrameBuffer(max_bytes)  # socket.request.max.bytes

    async def next_frame(self) -> bytes | None:
        """The next request frame; None when the client closed between frames. A size out of
        range (Kafka: InvalidReceiveException) or a close inside a frame closes the connection.
        Every call yields to the scheduler once at least (reading, or a checkpoint when the frame
        was already buffered): a client pipelining requests does not keep the others waiting."""
        try:
            frame = self.frames.next_frame()
            if frame is not None:
                await trio.lowlevel.checkpoint()
                return frame
            while (frame := self.frames.next_frame()) is None:
                data = await receive_some(self.stream, _RECV_CHUNK)
                if not data:
                    self.frames.check_closed()
                    return None
                self.frames.feed(data)
        except FrameError as exc:
            raise CloseConnection(str(exc)) from None
        return frame


def _unsupported_api_versions(correlation_id: int) -> bytes:
    """Kafka's answer to ApiVersions at a version it does not know
    (``ApiVersionsRequest.getErrorResponse``): a v0 response with UNSUPPORTED_VERSION listing
    only ApiVersions' own range, enough for the client to retry with a version both speak."""
    api = HANDLERS[18].api
    h = HANDLERS[18]
    R = api.Response
    resp = R(error_code=Errors.UNSUPPORTED_VERSION,
             api_keys=[R.ApiVersion(api_key=18, min_version=h.advertised_min, max_version=h.max_version)])
    return api.response_frame(0, correlation_id, resp)


async def serve_connection(broker, stream: trio.SocketStream, listener: Listener | None = None) -> None:
    conn_id = next(_CONN_IDS)
    try:
        host, port = stream.socket.getpeername()[:2]
        peer = f"{host}:{port}"
    except OSError:
        peer = "?"
    broker.connections[conn_id] = peer
    try:
        # a broker of a cluster answers nothing before its first catch-up with the metadata (the
        # connection waits, as on Kafka's listener before enableRequestProcessing): a topic it
        # has not learnt yet would read UNKNOWN_TOPIC_OR_PARTITION
        if not broker.requests_enabled.is_set():
            await broker.requests_enabled.wait()
        # TLS, then SASL (server/authenticator): no frame reaches a handler before both succeed
        stream, principal = await secure(listener, stream)
        reader = FrameReader(stream, broker.config.int("socket.request.max.bytes"))
        auth = new_authenticator(broker, listener, principal, lambda f: _handle_frame(broker, f, peer, conn_id))
        send = partial(send_all, stream)
        if not await auth.authenticate(reader.next_frame, send):
            return
        after_response: list = []
        while True:
            frame = await reader.next_frame()
            if frame is None:
                return
            if await auth.before_request(frame, reader.next_frame, send):
                continue
            try:
                out = await _handle_frame(broker, frame, peer, conn_id, auth.principal, after_response.append)
                if out is not None:
                    await send_all(stream, out)
            finally:
                # also when the client is gone: what the handler left for after its answer
                # (EndTxn's markers) must happen all the same
                while after_response:
                    after_response.pop(0)()
    except (CloseConnection, AuthenticationClose) as exc:
        PEER_WARNINGS.warn(peer, "closing connection %d from %s: %s", conn_id, peer, exc)
    except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
        pass
    except Exception:  # a handler bug must not take other connections down
        log.exception("closing connection %d from %s after an internal error", conn_id, peer)
    finally:
        broker.connections.pop(conn_id, None)
        broker.connection_closed(conn_id)
        with trio.CancelScope(shield=True):
            await stream.aclose()


async def _handle_frame(broker, frame: bytes, peer: str, conn_id: int,
                        principal: str = ANONYMOUS, after_response=None) -> bytes | None:
    if len(frame) < 12:
        raise CloseConnection(f"frame of {len(frame) - 4} bytes is shorter than a request header")
    api_key, version, correlation_id = _HDR.unpack_from(frame, 4)
    handler: Handler | None = HANDLERS.get(api_key)
    if handler is None:
        raise CloseConnection(f"unknown API key {api_key}")
    api = handler.api
    if not handler.min_version <= version <= handler.max_version:
        if api_key == 18 and version > handler.max_version:
            # Kafka still parses the header, at the header version the (unknown, newer and so
            # flexible) request version implies; a header that does not parse closes the connection.
            try:
                REQUEST_HEADER.decode(api.request_header_version(version), frame, 4)
            except ProtocolError as exc:
                raise CloseConnection(f"malformed header of ApiVersions v{version}: {exc}") from None
            return _unsupported_api_versions(correlation_id)
        raise CloseConnection(
            f"unsupported version {version} of {api.name} (supported {handler.min_version}-{handler.max_version})")
    try:
        header, pos = REQUEST_HEADER.decode(api.request_header_version(version), frame, 4)
        req, pos = api.request.decode(version, frame, pos)
    except ProtocolError as exc:
        raise CloseConnection(f"malformed {api.name} v{version} request: {exc}") from None
    # Trailing bytes are ignored, as Kafka does (librdkafka's Metadata v13 has 3).
    ctx = RequestContext(api, version, correlation_id, header.client_id, peer, conn_id, principal, after_response)
    resp = await _answer(broker, handler, ctx, req)
    if resp is None:
        return None
    return api.response_frame(version, correlation_id, resp)


async def _answer(broker, handler: Handler, ctx: RequestContext, req):
    """The handler's response to one decoded request (None: the request has none)."""
    try:
        return await handler.fn(broker, ctx, req)
    except ProtocolError as exc:  # a handler found what Kafka refuses as a malformed request
        raise CloseConnection(f"malformed {ctx.api.name} v{ctx.version} request: {exc}") from None


class LocalRequests:
    """Requests this broker sends itself (AddPartitionsToTxn from its AddPartitionsToTxnManager,
    WriteTxnMarkers from its marker sender), answered in process when nothing stands between the
    sender and this broker's own listener -- no proxy, no other advertised address.

    Why: Kafka sends these over its network client to itself too, and a proxy in front of the node
    must see them (cluster/network_client), which it still does: its address is not this
    listener's. Without one, no process can observe the frame, and the loopback round trip --
    encode, two socket writes, two reads, decode, passes through the scheduler -- was most of
    what a one-node transaction cost over 2e60ac4, which called the coordinator and the log
    directly (bench/txn_trees.py, docs/measurements.md).

    The answer is the same handler's, called in the sender's task. No deadline is put around it:
    what these handlers wait for (the ISR's acks, the transaction log's append) ends within
    request.timeout.ms by their own timeouts, the very bound the sender's timeout is, so a socket's
    sender would not give up first -- and cutting a handler short is what a socket never does (a
    WriteTxnMarkers that appended its marker settles the group's offsets after the wait). The one
    difference: a fault point that holds the handler holds its local sender with it, where a
    socket's sender would give up after request.timeout.ms. A request the handler refuses as
    malformed, or a handler's bug (logged), is NetworkError, as the closed connection would be.
    """

    def __init__(self, broker):
        self.broker = broker
        self.connection_id = next(_CONN_IDS)
        self._correlation_ids = itertools.count(1)

    def serves(self, address: tuple[str, int]) -> bool:
        """Whether ``address`` is this broker's own listener (the first, or the inter-broker one)."""
        ib = self.broker.inter_broker_listener
        return address in ((self.broker.host, self.broker.port), (ib.host, ib.port))

    async def send(self, api_name: str, version: int, client_id: str, body):
        handler = HANDLERS[API[api_name].key]
        ctx = RequestContext(handler.api, version, next(self._correlation_ids) & 0x7FFFFFFF, client_id,
                             f"{self.broker.host}:local", self.connection_id, BROKER_PRINCIPAL)
        try:
            return await _answer(self.broker, handler, ctx, body)
        except CloseConnection as exc:
            raise NetworkError(f"{api_name} to this broker refused: {exc}") from None
        except Exception:  # a handler bug: logged as on a connection, and the sender retries
            log.exception("internal error answering %s from %s (in process)", api_name, client_id)
            raise NetworkError(f"{api_name} to this broker failed: internal error") from None
