"""One proxied TCP connection: a client on one side, a broker node on the other.

Two pumps run, one per direction. Each reads large chunks, splits them into Kafka frames,
names every frame (:mod:`.frames`), records it (:mod:`.transcript`), asks the rule book
whether a rule acts on it (:mod:`.rules`), and forwards runs of untouched frames with one
``send_all``: the per-frame cost is a header decode and a dict lookup, never per-byte work.

A connection is a stream, so an action on one frame delays every later frame in the same
direction on that connection (a held Produce request holds the requests pipelined behind it,
exactly as a slow network would), while the other direction and other connections go on.

When either side closes, or a pump fails, or a ``sever`` rule fires, both sides are closed:
Kafka never half-closes, and a client must see its connection go away as a whole.
"""

from __future__ import annotations

import logging
import socket
import struct

import trio

from .frames import SIZE, FrameInfo, PendingRequests, parse_request
from .rules import Hold, Rule

log = logging.getLogger("kconform.proxy")

#: Bytes asked of the kernel per read; large, so bulk Produce/Fetch traffic takes few reads.
RECV_BYTES = 256 * 1024


class _Sever(Exception):
    def __init__(self, reset: bool) -> None:
        super().__init__("severed by rule")
        self.reset = reset


class ProxiedConnection:
    def __init__(self, server, node, conn_id: int, client: trio.SocketStream, upstream: trio.SocketStream,
                 client_addr: str, broker_addr: str) -> None:
        self.server = server
        self.node = node
        self.conn_id = conn_id
        self.client = client
        self.upstream = upstream
        self.client_addr = client_addr
        self.broker_addr = broker_addr
        self.pending = PendingRequests()
        self.close_reason: str | None = None
        self._reset = False
        self._scope: trio.CancelScope | None = None

    # ---------------------------------------------------------------- life cycle
    async def run(self) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._scope = nursery.cancel_scope
                nursery.start_soon(self._pump, "c2b", self.client, self.upstream)
                nursery.start_soon(self._pump, "b2c", self.upstream, self.client)
        finally:
            # Recorded before the sockets close, so whoever sees the close finds the event.
            self.server._event("close", conn=self.conn_id, node=self.node.node_id, client=self.client_addr,
                               broker=self.broker_addr, reason=self.close_reason or "proxy stopped")
            with trio.CancelScope(shield=True):
                for stream in (self.client, self.upstream):
                    if self._reset:
                        _arm_reset(stream)
                    await stream.aclose()

    def sever(self, reset: bool = False, reason: str = "severed") -> None:
        """Close both sides now (call from the proxy's trio thread)."""
        self._reset = self._reset or reset
        self.close_reason = self.close_reason or reason
        if self._scope is not None:
            self._scope.cancel()

    # ---------------------------------------------------------------- pumping
    async def _pump(self, direction: str, src: trio.SocketStream, dst: trio.SocketStream) -> None:
        try:
            await self._frames(direction, src, dst)
            self.close_reason = self.close_reason or ("client closed" if direction == "c2b" else "broker closed")
        except _Sever as s:
            self._reset = self._reset or s.reset
            self.close_reason = self.close_reason or "severed by rule"
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self.close_reason = self.close_reason or f"{direction}: {exc!r}"
        finally:
            if self._scope is not None:
                self._scope.cancel()

    def _endpoints(self, direction: str) -> tuple[str, str]:
        return (self.client_addr, self.broker_addr) if direction == "c2b" else (self.broker_addr, self.client_addr)

    async def _frames(self, direction: str, src: trio.SocketStream, dst: trio.SocketStream) -> None:
        limit = self.server.max_frame_bytes
        buf = bytearray()
        raw = False
        while True:
            data = await src.receive_some(RECV_BYTES)
            if not data:
                if buf:  # the peer closed inside a frame: pass on what it did send
                    await self._raw(direction, bytes(buf), dst)
                return
            if raw:
                await self._raw(direction, data, dst)
                continue
            buf += data
            out: list[bytes] = []
            pos = 0
            n = len(buf)
            while n - pos >= 4:
                (size,) = SIZE.unpack_from(buf, pos)
                if size < 0 or size > limit:
                    # Not Kafka framing any more (garbage, or a corrupted size): stop naming
                    # frames on this direction and pass bytes through as they come.
                    raw = True
                    break
                end = pos + 4 + size
                if end > n:
                    break
                with memoryview(buf) as view:  # one copy, and no view left to block del buf[:pos]
                    frame = bytes(view[pos:end])
                pos = end
                send = await self._frame(direction, frame, dst, out)
                if send is not None:
                    out.append(send)
            if out:
                await _send(dst, out)
            if raw:
                rest = bytes(buf[pos:])
                buf.clear()
                await self._raw(direction, rest, dst)
            else:
                del buf[:pos]

    async def _frame(self, direction: str, frame: bytes, dst: trio.SocketStream, out: list[bytes]) -> bytes | None:
        """Name, record and apply rules to one frame; returns the bytes to queue, or None."""
        server = self.server
        info: FrameInfo = parse_request(frame) if direction == "c2b" else self.pending.answer(frame)
        t = server.transcript.now()
        decision = server.rules.decide(self.node.node_id, self.conn_id, info, t, trio.Event)
        src, dst_addr = self._endpoints(direction)
        if decision is None:
            server.transcript.record(conn=self.conn_id, node=self.node.node_id, src=src, dst=dst_addr,
                                     info=info, data=frame, t=t)
            if direction == "c2b":
                self.pending.sent(info)
            return frame
        rule_id, rule, hold = decision
        sent = rule.corrupt_frame(frame) if rule.action == "corrupt" else None
        server.transcript.record(conn=self.conn_id, node=self.node.node_id, src=src, dst=dst_addr, info=info,
                                 data=frame, t=t, rule=rule_id, action=rule.action, sent=sent)
        log.info("proxy node %s conn %d: rule %d %s %s", self.node.node_id, self.conn_id, rule_id,
                 rule.action, info.describe())
        if out:  # frames before this one go first, whatever happens to it
            await _send(dst, out)
            out.clear()
        action = rule.action
        if action == "drop":
            return None
        if action == "delay":
            await trio.sleep(rule.ms / 1000.0)
        elif action == "hold":
            await self._hold(hold, rule)
        elif action == "sever":
            if rule.when == "after":
                if direction == "c2b":
                    self.pending.sent(info)
                await dst.send_all(frame)
            raise _Sever(rule.reset)
        elif action == "corrupt":
            frame = sent
        if direction == "c2b":
            self.pending.sent(info)
        return frame

    async def _hold(self, h: Hold, rule: Rule) -> None:
        try:
            if rule.ms is None:
                await h.event.wait()
            else:
                with trio.move_on_after(rule.ms / 1000.0):
                    await h.event.wait()
        finally:
            self.server.rules.unhold(h.rule_id, h)

    async def _raw(self, direction: str, data: bytes, dst: trio.SocketStream) -> None:
        src, dst_addr = self._endpoints(direction)
        self.server.transcript.record(conn=self.conn_id, node=self.node.node_id, src=src, dst=dst_addr,
                                      info=FrameInfo(direction, len(data)), data=data, unframed=True)
        await dst.send_all(data)


async def _send(dst: trio.SocketStream, out: list[bytes]) -> None:
    await dst.send_all(out[0] if len(out) == 1 else b"".join(out))


def _arm_reset(stream: trio.SocketStream) -> None:
    """SO_LINGER 0: the close that follows sends a RST, as a crashed peer or a firewall would."""
    try:
        stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
