"""Bytes in and out of a trio socket stream, with fewer trips through trio's scheduler.

Why not ``SocketStream.receive_some`` / ``send_all``: each is a checkpoint even when its system
call succeeds at once -- one more pass of trio's run loop, each pass one ``epoll_wait`` -- and
``receive_some`` first tries ``recv``, which on a request-response connection fails with EAGAIN
almost every time, then waits, then reads and passes once more. On the transaction path every
inter-broker request (the KIP-890 verification, WriteTxnMarkers) is two such reads and two
such writes on the loopback. Measured (docs/measurements.md): a verification round trip to the
broker's own listener cost 230 us of CPU with SocketStream's calls and trio.Lock, 185 us with
these; under bench/txn_trees.py the broker's epoll_wait calls per transaction went from 21 to 12.

Here a read tries the socket without yielding and waits only when there is nothing to read
(the wait is the checkpoint); a write that the socket takes whole does not yield (the caller's
next read does). The bytes and their order are the same; errors are those of
``SocketStream``: a closed stream raises ``trio.ClosedResourceError``, any other socket error
``trio.BrokenResourceError`` (with the OSError as its cause).

The file descriptor is looked up again before every system call, in the same step as the call:
a stream closed by another task between two steps answers ClosedResourceError, never a read
or write on a descriptor the process has since reused.
"""

from __future__ import annotations

import os

import trio


def _fd(stream: trio.SocketStream) -> int:
    fd = stream.socket.fileno()
    if fd < 0:
        raise trio.ClosedResourceError("the stream was closed")
    return fd


async def receive_some(stream: trio.SocketStream, max_bytes: int, *, wait_first: bool = False) -> bytes:
    """Up to ``max_bytes`` bytes from ``stream``; b"" when the peer closed its side. Yields
    once: waiting for data when none is there, else a checkpoint after the read.
    ``wait_first``: the caller knows nothing can be there yet (it has just sent a request and
    not yielded since), so no read is tried before the wait.
    A stream that is no socket stream (a TLS listener's ``trio.SSLStream``) is read its own way."""
    if not isinstance(stream, trio.SocketStream):
        return await stream.receive_some(max_bytes)
    if not wait_first:
        try:
            data = os.read(_fd(stream), max_bytes)
        except BlockingIOError:
            pass
        except OSError as exc:
            raise trio.BrokenResourceError(str(exc)) from exc
        else:
            await trio.lowlevel.checkpoint()
            return data
    while True:
        await trio.lowlevel.wait_readable(stream.socket)
        try:
            return os.read(_fd(stream), max_bytes)
        except BlockingIOError:     # a spurious wake-up: wait again
            continue
        except OSError as exc:
            raise trio.BrokenResourceError(str(exc)) from exc


async def send_all(stream: trio.SocketStream, data) -> None:
    """All of ``data`` to ``stream``; waits (a checkpoint) only while the socket's send buffer
    is full."""
    if not isinstance(stream, trio.SocketStream):
        await stream.send_all(data)
        return
    with memoryview(data) as view:
        sent = 0
        while sent < len(view):
            try:
                if sent:
                    with view[sent:] as rest:
                        sent += os.write(_fd(stream), rest)
                else:
                    sent = os.write(_fd(stream), view)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(stream.socket)
            except OSError as exc:
                raise trio.BrokenResourceError(str(exc)) from exc
