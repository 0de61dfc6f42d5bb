"""Requests one broker sends another (Kafka's NetworkClient as the inter-broker senders use it:
ReplicaFetcherThread, TransactionMarkerChannelManager, AddPartitionsToTxnManager).

Why over the network even to this broker itself: the request then is a real frame on the
advertised listener, where a proxy in front of every node sees it, as it sees Kafka's -- a case
can hold a replica Fetch or delay a WriteTxnMarkers exactly as on Apache Kafka. Each sender has
its own client id (``broker-<id>-fetcher-0``, ``broker-<id>-txn-marker-sender``,
``AddPartitionsManager-client-<id>``: Kafka's), which is how the proxy tells broker traffic from
a client's.

One connection per destination node, one request in flight on it at a time (a lock); the node's
address is asked at each connect (``ReplicaManager.endpoint``), so a restarted node on a new
address, or a proxy, is followed. Any failure (refused, reset, timeout, a frame that does not
parse) closes the connection and raises NetworkError; the caller decides about retrying.
"""

from __future__ import annotations

import itertools
import logging

import trio

from ..protocol.codegen import ProtocolError
from ..protocol.framing import FrameBuffer
from ..protocol.messages import API, RESPONSE_HEADER

log = logging.getLogger("kconform.broker.network")


class NetworkError(Exception):
    """A request to another broker got no answer (the caller maps it to NETWORK_EXCEPTION)."""


class _Connection:
    def __init__(self, address: tuple[str, int]):
        self.address = address
        self.stream: trio.SocketStream | None = None
        self.frames = FrameBuffer()
        self.lock = trio.Lock()

    async def close(self) -> None:
        if self.stream is not None:
            stream, self.stream = self.stream, None
            with trio.CancelScope(shield=True):
                await stream.aclose()
        self.frames = FrameBuffer()


class InterBrokerClient:
    def __init__(self, endpoint, client_id: str):
        """``endpoint(node_id) -> (host, port) | None``: where a node listens now."""
        self.endpoint = endpoint
        self.client_id = client_id
        self._connections: dict[int, _Connection] = {}
        self._correlation_ids = itertools.count(1)

    async def send(self, node_id: int, api_name: str, version: int, body, timeout_s: float):
        """Send one request to ``node_id`` and return its decoded response."""
        address = self.endpoint(node_id)
        if address is None:
            raise NetworkError(f"node {node_id} has no known endpoint")
        conn = self._connections.get(node_id)
        if conn is None or conn.address != address:
            if conn is not None:
                await conn.close()
            conn = self._connections[node_id] = _Connection(address)
        api = API[api_name]
        async with conn.lock:
            try:
                with trio.fail_after(timeout_s):
                    if conn.stream is None:
                        conn.stream = await trio.open_tcp_stream(*address)
                    cid = next(self._correlation_ids) & 0x7FFFFFFF
                    await conn.stream.send_all(api.request_frame(version, cid, self.client_id, body))
                    while (frame := conn.frames.next_frame()) is None:
                        data = await conn.stream.receive_some(1 << 20)
                        if not data:
                            raise NetworkError(f"node {node_id} closed the connection")
                        conn.frames.feed(data)
                header, pos = RESPONSE_HEADER.decode(api.response_header_version(version), frame, 4)
                if header.correlation_id != cid:
                    raise NetworkError(f"node {node_id} answered correlation id {header.correlation_id}, "
                                       f"expected {cid}")
                response, _ = api.response.decode(version, frame, pos)
                return response
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

    async def close(self) -> None:
        for conn in self._connections.values():
            await conn.close()
        self._connections.clear()
