"""Kafka's framing: a 4-byte big-endian size, then that many bytes. Cutting a byte stream into frames.

Why one module: the broker reads requests, the proxy splits both directions of a connection, the
raw actor and the targets read one response off a blocking socket, reports cut frames out of
reassembled pcap streams. They all follow the same rule, and a size prefix that no Kafka peer
sends (negative, or above the reader's limit: Kafka's ``InvalidReceiveException``) must mean
the same to all of them.

A *frame* here is always the bytes as they cross the wire, size prefix included.
:class:`FrameBuffer` does no I/O, so trio streams and pcap reassembly feed it what they read;
:func:`read_frame` is the blocking-socket reader, which reads exactly one frame and nothing of
the next.
"""

from __future__ import annotations

import select
import socket
import struct

from .codegen import ProtocolError

SIZE = struct.Struct(">i")
#: Kafka's default socket.request.max.bytes (100 MiB): the limit when a reader names none.
MAX_FRAME_BYTES = 104857600
#: The largest size a prefix can say: a reader given it refuses only negative sizes (for
#: recorded traffic, which is read as it was sent).
ANY_SIZE = 0x7FFFFFFF


class FrameError(ProtocolError):
    """The bytes are not Kafka framing (a size prefix out of range), or end inside a frame."""


def _checked(size: int, max_bytes: int) -> int:
    if size < 0 or size > max_bytes:
        raise FrameError(f"invalid frame size {size} (allowed 0..{max_bytes})")
    return size


def _closed_inside(got: int, size: int | None) -> FrameError:
    """The error of a stream that ended ``got`` bytes into a frame's size prefix (``size`` None)
    or into its body."""
    if size is None:
        return FrameError(f"connection closed inside a frame's size ({got} of 4 bytes)")
    return FrameError(f"connection closed inside a frame ({got} of {size} bytes)")


def frame_end(buf, pos: int = 0, max_bytes: int = MAX_FRAME_BYTES) -> int | None:
    """Where the frame that starts at ``pos`` of ``buf`` ends; None while ``buf`` does not hold
    all of it. Raises :class:`FrameError` for a size prefix outside ``0..max_bytes``."""
    if len(buf) - pos < 4:
        return None
    end = pos + 4 + _checked(SIZE.unpack_from(buf, pos)[0], max_bytes)
    return end if end <= len(buf) else None


class FrameBuffer:
    """One direction of a connection: bytes go in as they arrive, whole frames come out."""

    def __init__(self, max_bytes: int = MAX_FRAME_BYTES) -> None:
        self.max_bytes = max_bytes
        self._buf = bytearray()

    def feed(self, data: bytes) -> None:
        self._buf += data

    def next_frame(self) -> bytes | None:
        """The next whole frame, taken out of the buffer; None until one is complete. Raises
        :class:`FrameError` at a size prefix out of range (the bytes stay: see :meth:`take_rest`)."""
        end = frame_end(self._buf, 0, self.max_bytes)
        if end is None:
            return None
        if end == len(self._buf):      # the usual case: the buffer holds just this frame
            frame = bytes(self._buf)
            self._buf.clear()
            return frame
        with memoryview(self._buf) as view:  # one copy, and no view left to block the del
            frame = bytes(view[:end])
        del self._buf[:end]
        return frame

    def take_rest(self) -> bytes:
        """Everything not yet taken as a frame (part of a frame, or bytes that are not framing)."""
        rest = bytes(self._buf)
        self._buf.clear()
        return rest

    def check_closed(self) -> None:
        """The stream ended: raises :class:`FrameError` when it ended inside a frame."""
        got = len(self._buf)
        if got:
            raise _closed_inside(got, None) if got < 4 else _closed_inside(got - 4, SIZE.unpack_from(self._buf)[0])

    def __len__(self) -> int:
        return len(self._buf)


def idle_connection_closed(fileno: int) -> bool:
    """Whether an idle connection (no request in flight) has something to read -- which can only
    be its end, EOF or a reset, or an error -- without waiting. Kafka's NetworkClient learns this
    by polling every connection; a client that keeps connections asks before reusing one."""
    poller = select.poll()
    poller.register(fileno, select.POLLIN | select.POLLRDHUP)
    return bool(poller.poll(0))


def read_frame(sock: socket.socket, max_bytes: int = MAX_FRAME_BYTES) -> bytes | None:
    """The next frame from a blocking socket, and not a byte more; None when the peer closed the
    connection before sending a byte of it. Raises :class:`FrameError` when the connection closed
    inside the frame or its size prefix is out of range; socket errors and timeouts propagate."""
    head = bytearray(4)
    got = _recv_into(sock, memoryview(head))
    if got < 4:
        if got == 0:
            return None
        raise _closed_inside(got, None)
    size = _checked(SIZE.unpack_from(head)[0], max_bytes)
    frame = bytearray(4 + size)
    frame[:4] = head
    got = _recv_into(sock, memoryview(frame)[4:])
    if got < size:
        raise _closed_inside(got, size)
    return bytes(frame)


def _recv_into(sock: socket.socket, view: memoryview) -> int:
    """Fill ``view`` from ``sock``; fewer bytes than asked only when the peer closed."""
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if n == 0:
            break
        got += n
    return got
