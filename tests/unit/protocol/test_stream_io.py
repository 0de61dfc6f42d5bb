"""protocol/stream_io on real loopback TCP connections: the bytes arrive whole and in order,
a peer's close reads as b"", and a closed or reset stream raises what trio's SocketStream raises
(ClosedResourceError, BrokenResourceError) -- the errors the broker's connection loop and the
inter-broker client handle."""

from __future__ import annotations

import socket
import struct

import pytest
import trio

from broker_impl.protocol.stream_io import receive_some, send_all


async def _pair() -> tuple[trio.SocketStream, trio.SocketStream, trio.SocketListener]:
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    client = await trio.open_tcp_stream("127.0.0.1", port)
    server = await listener.accept()
    return client, server, listener


async def _read_exactly(stream, n: int, **kw) -> bytes:
    got = bytearray()
    while len(got) < n:
        data = await receive_some(stream, 1 << 16, **kw)
        assert data, f"peer closed after {len(got)} of {n} bytes"
        got += data
    return bytes(got)


def test_request_and_reply_round_trip():
    async def main():
        client, server, listener = await _pair()
        async with client, server, listener:
            await send_all(client, b"ping")
            assert await _read_exactly(server, 4) == b"ping"
            await send_all(server, b"pong!")
            assert await _read_exactly(client, 5, wait_first=True) == b"pong!"

    trio.run(main)


def test_a_payload_larger_than_the_socket_buffers_arrives_whole_and_in_order():
    payload = b"".join(struct.pack(">I", i) for i in range(2_000_000))   # 8 MB: send_all must wait

    async def main():
        client, server, listener = await _pair()
        async with client, server, listener:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(send_all, client, payload)
                assert await _read_exactly(server, len(payload)) == payload

    trio.run(main)


def test_the_peer_closing_reads_as_empty():
    async def main():
        client, server, listener = await _pair()
        async with server, listener:
            await send_all(client, b"last")
            await client.aclose()
            assert await _read_exactly(server, 4) == b"last"
            assert await receive_some(server, 1024) == b""

    trio.run(main)


@pytest.mark.parametrize("op", ["receive", "send"])
def test_a_closed_stream_raises_closed_resource_error(op):
    async def main():
        client, server, listener = await _pair()
        async with server, listener:
            await client.aclose()
            with pytest.raises(trio.ClosedResourceError):
                if op == "receive":
                    await receive_some(client, 1024)
                else:
                    await send_all(client, b"x")

    trio.run(main)


def test_closing_a_stream_wakes_its_waiting_reader_with_closed_resource_error():
    async def main():
        client, server, listener = await _pair()
        async with server, listener:
            async def close_soon():
                await trio.sleep(0.05)
                await client.aclose()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(close_soon)
                with pytest.raises(trio.ClosedResourceError):
                    await receive_some(client, 1024, wait_first=True)

    trio.run(main)


def test_a_reset_connection_raises_broken_resource_error():
    async def main():
        client, server, listener = await _pair()
        async with server, listener:
            # SO_LINGER 0: close sends RST, the peer's next read fails with ECONNRESET
            client.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            await client.aclose()
            await trio.sleep(0.05)
            with pytest.raises(trio.BrokenResourceError):
                await receive_some(server, 1024)
                await send_all(server, b"x" * 100_000)

    trio.run(main)
