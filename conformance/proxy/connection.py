"""One proxied TCP connection: a client on one side, a broker node on the other.

Two pumps run, one per direction. Each reads large chunks, splits them into Kafka frames (the
codec's :class:`~broker_impl.codec.FrameBuffer`), names every frame (the codec's
:func:`~broker_impl.codec.request_info`; :mod:`.frames` for responses), records it
(:mod:`.transcript`), asks the rule book whether a rule acts on it (:mod:`.rules`), and forwards
runs of untouched frames with one ``send_all``: the per-frame cost is a header decode and a dict
lookup, never per-byte work.

A connection is a stream, so an action on one frame delays every later frame in the same
direction on that connection (a held Produce request holds the requests pipelined behind it,
exactly as a slow network would), while the other direction and other connections go on.

When either side closes, or a pump fails, or a ``sever`` rule fires, both sides are closed:
Kafka never half-closes, and a client must see its connection go away as a whole. One
exception keeps the network honest: when the client goes away (the response pump cannot write
to it), what it sent before it went is still on the wire. A request the proxy is delaying, and
bytes still queued behind it, reach the broker as a late packet would; the request pump closes
both sides when it reads the client's end. Kafka processes such a request (its Selector keeps
a closing channel until its staged receives are handled), so a client that timed out an
EndTxn and retried it on a new connection can still have the first one applied late (S20).

An ``answer`` rule swallows a request and queues the proxy's own response to it in
:class:`.frames.PendingRequests`, behind the requests still unanswered; it reaches the client
when their responses have gone out (from the response pump, or from a third task when the
connection is otherwise idle). One lock orders every write to the client, so a synthesized
response never overtakes a broker response the client asked for earlier.
"""

from __future__ import annotations

import logging
import socket
import struct

import trio

from broker_impl.codec import FrameBuffer, FrameError, FrameInfo, request_info, response_info

from .answer import AnswerError
from .frames import PendingRequests
from .rewrite import rewrite_response
from .rules import Hold, Rule

log = logging.getLogger("kconform.proxy")

#: Bytes asked of the kernel per read; large, so bulk Produce/Fetch traffic takes few reads.
RECV_BYTES = 256 * 1024


class _ReadFailed(Exception):
    """Reading a pump's source failed (as opposed to writing to its destination)."""


class _Sever(Exception):
    def __init__(self, reset: bool) -> None:
        super().__init__("severed by rule")
        self.reset = reset


class ProxiedConnection:
    def __init__(self, server, node, conn_id: int, client: trio.abc.Stream, upstream: trio.abc.Stream,
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
        self._to_client = trio.Lock()        # every write to the client holds it
        self._injected = trio.Event()        # set when an answer rule queued a response

    # ---------------------------------------------------------------- life cycle
    async def run(self) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._scope = nursery.cancel_scope
                nursery.start_soon(self._pump, "c2b", self.client, self.upstream)
                nursery.start_soon(self._pump, "b2c", self.upstream, self.client)
                nursery.start_soon(self._inject_when_idle)
        finally:
            # Recorded before the sockets close, so whoever sees the close finds the event.
            self.server._event("close", conn=self.conn_id, node=self.node.node_id, client=self.client_addr,
                               broker=self.broker_addr, reason=self.close_reason or "proxy stopped")
            with trio.CancelScope(shield=True):
                for stream in (self.client, self.upstream):
                    await close_stream(stream, self._reset)

    def sever(self, reset: bool = False, reason: str = "severed") -> None:
        """Close both sides now (call from the proxy's trio thread)."""
        self._reset = self._reset or reset
        self.close_reason = self.close_reason or reason
        if self._scope is not None:
            self._scope.cancel()

    # ---------------------------------------------------------------- pumping
    async def _pump(self, direction: str, src: trio.abc.Stream, dst: trio.abc.Stream) -> None:
        close_all = True
        try:
            await self._frames(direction, src, dst)
            self.close_reason = self.close_reason or ("client closed" if direction == "c2b" else "broker closed")
        except _Sever as s:
            self._reset = self._reset or s.reset
            self.close_reason = self.close_reason or "severed by rule"
        except _ReadFailed as exc:
            self.close_reason = self.close_reason or f"{direction}: {exc.__cause__!r}"
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            if direction == "b2c":
                self._client_gone(exc, "b2c")
                close_all = False
            else:
                self.close_reason = self.close_reason or f"{direction}: {exc!r}"
        finally:
            if close_all and self._scope is not None:
                self._scope.cancel()

    def _client_gone(self, exc: BaseException, where: str) -> None:
        """A write to the client failed: it closed or reset its side. Nothing is closed here:
        the request pump still owns what the client sent before (a delayed frame, bytes in the
        socket), passes it on, and closes both sides when it reads the client's end -- which,
        the client being gone, comes right after."""
        self.close_reason = self.close_reason or f"{where}: client gone: {exc!r}"

    async def _inject_when_idle(self) -> None:
        """Send synthesized responses whose turn came while no broker response was flowing."""
        try:
            while True:
                await self._injected.wait()
                self._injected = trio.Event()
                async with self._to_client:
                    ready = self._injected_frames(self.pending.take_ready())
                    if ready:
                        await _send(self.client, ready)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self._client_gone(exc, "b2c (answer)")

    def _injected_frames(self, items: list) -> list[bytes]:
        """Record synthesized responses in the transcript as they go out; returns their bytes."""
        out = []
        for info, frame, rule_id in items:
            self.server.transcript.record(conn=self.conn_id, node=self.node.node_id, src=self.broker_addr,
                                          dst=self.client_addr, info=info, data=frame, rule=rule_id,
                                          action="answer")
            out.append(frame)
        return out

    def _endpoints(self, direction: str) -> tuple[str, str]:
        return (self.client_addr, self.broker_addr) if direction == "c2b" else (self.broker_addr, self.client_addr)

    async def _frames(self, direction: str, src: trio.abc.Stream, dst: trio.abc.Stream) -> None:
        frames = FrameBuffer(self.server.max_frame_bytes)
        raw = False
        while True:
            try:
                data = await src.receive_some(RECV_BYTES)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                raise _ReadFailed() from exc
            if not data:
                rest = frames.take_rest()
                if rest:  # the peer closed inside a frame: pass on what it did send
                    await self._raw(direction, rest, dst)
                return
            if raw:
                await self._raw(direction, data, dst)
                continue
            frames.feed(data)
            if direction == "b2c":
                async with self._to_client:
                    raw = await self._chunk(direction, frames, dst)
            else:
                raw = await self._chunk(direction, frames, dst)

    async def _chunk(self, direction: str, frames: FrameBuffer, dst: trio.abc.Stream) -> bool:
        """Handle the whole frames ``frames`` holds; True when the stream stopped being Kafka
        framing (what was left has been passed on raw)."""
        raw = False
        out: list[bytes] = []
        while True:
            try:
                frame = frames.next_frame()
            except FrameError:
                # Not Kafka framing any more (garbage, or a corrupted size): stop naming
                # frames on this direction and pass bytes through as they come.
                raw = True
                break
            if frame is None:
                break
            send = await self._frame(direction, frame, dst, out)
            if send is not None:
                out.append(send)
        if direction == "b2c":
            out += self._injected_frames(self.pending.take_ready())
        if out:
            await _send(dst, out)
        if raw:
            await self._raw(direction, frames.take_rest(), dst, locked=direction == "b2c")
        return raw

    async def _frame(self, direction: str, frame: bytes, dst: trio.abc.Stream, out: list[bytes]) -> bytes | None:
        """Name, record and apply rules to one frame; returns the bytes to queue, or None."""
        server = self.server
        rewritten = None
        if direction == "c2b":
            info: FrameInfo = request_info(frame)
        else:
            info = self.pending.answer(frame)
            out += self._injected_frames(self.pending.take_passed())  # queued before this response
            rewritten = rewrite_response(frame, info, server.local_address)
        t = server.transcript.now()
        decision = server.rules.decide(self.node.node_id, self.conn_id, info, t, trio.Event)
        src, dst_addr = self._endpoints(direction)
        if decision is None:
            # The transcript keeps the bytes as the broker sent them, and notes the rewrite.
            server.transcript.record(conn=self.conn_id, node=self.node.node_id, src=src, dst=dst_addr,
                                     info=info, data=frame, t=t, sent=rewritten[0] if rewritten else None,
                                     rewritten=rewritten[1] if rewritten else None)
            if direction == "c2b":
                self.pending.sent(info)
            return rewritten[0] if rewritten else frame
        rule_id, rule, hold = decision
        original = frame
        if rewritten:
            frame = rewritten[0]
        sent = rule.corrupt_frame(frame) if rule.action == "corrupt" else (rewritten[0] if rewritten else None)
        server.transcript.record(conn=self.conn_id, node=self.node.node_id, src=src, dst=dst_addr, info=info,
                                 data=original, t=t, rule=rule_id, action=rule.action, sent=sent,
                                 rewritten=rewritten[1] if rewritten else None)
        log.info("proxy node %s conn %d: rule %d %s %s", self.node.node_id, self.conn_id, rule_id,
                 rule.action, info.describe())
        if out:  # frames before this one go first, whatever happens to it
            await _send(dst, out)
            out.clear()
        action = rule.action
        if action == "drop":
            return None
        if action == "answer":
            try:
                answer = rule.answer_frame(info, frame)
            except AnswerError as exc:  # selects() admits only answerable versions; be safe anyway
                log.error("proxy node %s conn %d: cannot answer %s: %s", self.node.node_id, self.conn_id,
                          info.describe(), exc)
                self.pending.sent(info)
                return frame
            self.pending.inject(response_info(answer, info.api_key, info.api_version, info.client_id), answer, rule_id)
            self._injected.set()
            return None
        if action == "delay":
            await trio.sleep(rule.delay_ms / 1000.0)
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
            if rule.delay_ms is None:
                await h.event.wait()
            else:
                with trio.move_on_after(rule.delay_ms / 1000.0):
                    await h.event.wait()
        finally:
            self.server.rules.unhold(h.rule_id, h)

    async def _raw(self, direction: str, data: bytes, dst: trio.abc.Stream, locked: bool = False) -> None:
        src, dst_addr = self._endpoints(direction)
        self.server.transcript.record(conn=self.conn_id, node=self.node.node_id, src=src, dst=dst_addr,
                                      info=FrameInfo(direction, len(data)), data=data, unframed=True)
        if direction == "b2c" and not locked:
            async with self._to_client:  # every write to the client holds the lock
                await dst.send_all(data)
        else:
            await dst.send_all(data)


async def _send(dst: trio.abc.Stream, out: list[bytes]) -> None:
    await dst.send_all(out[0] if len(out) == 1 else b"".join(out))


def arm_reset(stream: trio.abc.Stream) -> None:
    """SO_LINGER 0: the close that follows sends a RST, as a crashed peer or a firewall would."""
    try:
        getattr(stream, "transport_stream", stream).socket.setsockopt(
            socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass


#: How long a TLS side's close_notify may take before the socket is just closed.
TLS_CLOSE_S = 1.0


async def close_stream(stream: trio.abc.Stream, reset: bool) -> None:
    """Close one side: with a RST when ``reset`` (no TLS close_notify either: a crashed peer
    sends none), else in order -- bounded, since a TLS close writes to a peer that may not read."""
    if reset:
        arm_reset(stream)
        await trio.aclose_forcefully(stream)
        return
    with trio.move_on_after(TLS_CLOSE_S):
        await stream.aclose()
        return
    await trio.aclose_forcefully(stream)
