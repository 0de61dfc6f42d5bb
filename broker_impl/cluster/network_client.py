"""Requests one broker sends another (Kafka's NetworkClient as the inter-broker senders use it:
ReplicaFetcherThread, TransactionMarkerChannelManager, AddPartitionsToTxnManager).

Why over the network even to this broker itself, when it advertises another address: the request
then is a real frame on the advertised listener, where a proxy in front of every node sees it, as
it sees Kafka's -- a case can hold a replica Fetch or delay a WriteTxnMarkers exactly as on Apache
Kafka. Each sender has
its own client id (``broker-<id>-fetcher-0``, ``broker-<id>-txn-marker-sender``,
``AddPartitionsManager-client-<id>``: Kafka's), which is how the proxy tells broker traffic from
a client's.

Kafka's TransactionMarkerChannelManager and AddPartitionsToTxnManager open every connection with
ApiVersions (v4, their software name and version) before their first request; the replica
fetchers do not (a 3-node Kafka 4.3.1 transcript). ``discover_versions`` does the same, so a
proxy rule counting a broker's frames counts the same frames on both.

A request to this broker's own listener, with nothing in between, is answered in-process
(``local``: server/connection ``LocalRequests``, which says why and what stays the same).

One connection per destination node, one request in flight on it at a time (a lock); the node's
address is asked at each connect (``ReplicaManager.endpoint``), so a restarted node on a new
address, or a proxy, is followed. Any failure (refused, reset, timeout, a frame that does not
parse) closes the connection and raises NetworkError; the caller decides about retrying.

A connection the other side closed while it was idle (the node stopped or restarted on the same
address) is not used for the next request: a new one is opened instead. Kafka's NetworkClient
polls every connection, so it sees such a close as it happens and reconnects before the next
request; without the check, the first request after a node's restart -- WriteTxnMarkers, a
transaction verification -- met the old connection's end and failed NETWORK_EXCEPTION (four
marker retries in every clean-bounce Streams run).
"""

from __future__ import annotations

import importlib.metadata
import itertools
import logging

import trio

from ..protocol.codegen import ProtocolError
from ..protocol.framing import FrameBuffer, idle_connection_closed
from ..protocol.messages import API, RESPONSE_HEADER
from ..protocol.stream_io import receive_some, send_all

log = logging.getLogger("kconform.broker.network")

#: ApiVersions v4's client software name and version (Kafka's say apache-kafka-java 4.3.1).
SOFTWARE_NAME = "kconform-broker"
try:
    SOFTWARE_VERSION = importlib.metadata.version("kconform")
except importlib.metadata.PackageNotFoundError:
    SOFTWARE_VERSION = "dev"
API_VERSIONS_VERSION = 4


class NetworkError(Exception):
    """A request to another broker got no answer (the caller maps it to NETWORK_EXCEPTION)."""


class _Connection:
    def __init__(self, address: tuple[str, int]):
        self.address = address
        self.stream: trio.SocketStream | None = None
        self.frames = FrameBuffer()
        self.lock = trio.Lock()

    def closed_by_peer(self) -> bool:
        """Whether the idle connection has something to read -- which, with no request in flight,
        can only be its end (EOF or a reset) -- without waiting."""
        if self.stream is None:
            return False
        return idle_connection_closed(self.stream.socket.fileno())

    async def close(self) -> None:
        if self.stream is not None:
            stream, self.stream = self.stream, None
            with trio.CancelScope(shield=True):
                await stream.aclose()
        self.frames = FrameBuffer()


class InterBrokerClient:
    def __init__(self, endpoint, client_id: str, discover_versions: bool = False, local=None):
        """``endpoint(node_id) -> (host, port) | None``: where a node listens now;
        ``discover_versions``: ApiVersions first on every new connection (module doc);
        ``local``: this broker's in-process answerer (server/connection ``LocalRequests``), which
        takes a request addressed to this broker's own listener -- no proxy in between."""
        self.endpoint = endpoint
        self.client_id = client_id
        self.discover_versions = discover_versions
        self.local = local
        self._local_lock = trio.Lock()
        self._connections: dict[int, _Connection] = {}
        self._correlation_ids = itertools.count(1)

    async def send(self, node_id: int, api_name: str, version: int, body, timeout_s: float):
        """Send one request to ``node_id`` and return its decoded response."""
        address = self.endpoint(node_id)
        if address is None:
            raise NetworkError(f"node {node_id} has no known endpoint")
        if self.local is not None and self.local.serves(address):
            # one request at a time, as on the connection it stands for (taken as below)
            if self._local_lock.locked():
                await self._local_lock.acquire()
            else:
                self._local_lock.acquire_nowait()
            try:
                return await self.local.send(api_name, version, self.client_id, body)
            finally:
                self._local_lock.release()
        conn = self._connections.get(node_id)
        if conn is None or conn.address != address:
            if conn is not None:
                await conn.close()
            conn = self._connections[node_id] = _Connection(address)
        api = API[api_name]
        # Uncontended (the usual case), the lock is taken without trio.Lock.acquire's pass through
        # the scheduler: the request's first wait is its checkpoint (protocol/stream_io).
        if conn.lock.locked():
            await conn.lock.acquire()
        else:
            conn.lock.acquire_nowait()
        try:
            try:
                if conn.closed_by_peer():
                    log.debug("the connection to node %d was closed by the node: reconnecting", node_id)
                    await conn.close()
                # trio.fail_after, without its context-manager generator (one per request)
                with trio.CancelScope(deadline=trio.current_time() + timeout_s):
                    if conn.stream is None:
                        conn.stream = await trio.open_tcp_stream(*address)
                        if self.discover_versions:
                            answer = await self._exchange(conn, node_id, API["ApiVersions"], API_VERSIONS_VERSION,
                                                          API["ApiVersions"].Request(
                                                              client_software_name=SOFTWARE_NAME,
                                                              client_software_version=SOFTWARE_VERSION))
                            if answer.error_code:
                                raise NetworkError(f"node {node_id} answered ApiVersions with error "
                                                   f"{answer.error_code}")
                    return await self._exchange(conn, node_id, api, version, body)
                raise trio.TooSlowError   # the deadline passed: the scope caught its Cancelled
            except trio.TooSlowError:
                await conn.close()
                raise NetworkError(f"no answer from node {node_id} to {api_name} within {timeout_s:.1f} s") from None
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, ProtocolError) as exc:
                await conn.close()
                raise NetworkError(f"{api_name} to node {node_id} at {address[0]}:{address[1]} failed: {exc}") from None
            except NetworkError:
                await conn.close()
                raise
            except BaseException:
                # cancelled mid-request: the connection's state is unknown
                await conn.close()
                raise
        finally:
            conn.lock.release()

    async def _exchange(self, conn: _Connection, node_id: int, api, version: int, body):
        """One request on ``conn`` and its decoded response."""
        cid = next(self._correlation_ids) & 0x7FFFFFFF
        await send_all(conn.stream, api.request_frame(version, cid, self.client_id, body))
        waited = False
        while (frame := conn.frames.next_frame()) is None:
            data = await receive_some(conn.stream, 1 << 20, wait_first=not waited)
            waited = True
            if not data:
                raise NetworkError(f"node {node_id} closed the connection")
            conn.frames.feed(data)
        header, pos = RESPONSE_HEADER.decode(api.response_header_version(version), frame, 4)
        if header.correlation_id != cid:
            raise NetworkError(f"node {node_id} answered correlation id {header.correlation_id}, "
                               f"expected {cid}")
        response, _ = api.response.decode(version, frame, pos)
        return response

    async def close(self) -> None:
        for conn in self._connections.values():
            await conn.close()
        self._connections.clear()
