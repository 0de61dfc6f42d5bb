"""Framing: the stream splitter, the blocking-socket reader, and naming frames from their headers."""

from __future__ import annotations

import socket
import struct

import pytest

from broker_impl.codec import (
    API,
    FrameBuffer,
    FrameError,
    frame_end,
    read_errors,
    read_frame,
    request_info,
    response_info,
)


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_frame_buffer_cuts_frames_however_the_bytes_arrive():
    frames = [frame(b""), frame(b"a" * 7), frame(bytes(range(200)))]
    stream = b"".join(frames)
    for step in (1, 3, 4, 5, len(stream)):
        buf = FrameBuffer()
        got = []
        for i in range(0, len(stream), step):
            buf.feed(stream[i:i + step])
            while (f := buf.next_frame()) is not None:
                got.append(f)
        assert got == frames and len(buf) == 0
        buf.check_closed()  # ended between frames: nothing to say


def test_frame_buffer_refuses_sizes_out_of_range_and_keeps_the_bytes():
    buf = FrameBuffer(max_bytes=10)
    buf.feed(frame(b"ok") + struct.pack(">i", 11) + b"rest")
    assert buf.next_frame() == frame(b"ok")
    with pytest.raises(FrameError, match="invalid frame size 11"):
        buf.next_frame()
    assert buf.take_rest() == struct.pack(">i", 11) + b"rest" and len(buf) == 0
    with pytest.raises(FrameError, match="invalid frame size -1"):
        frame_end(struct.pack(">i", -1))
    assert frame_end(b"\x00\x00\x00") is None and frame_end(frame(b"abc")[:-1]) is None
    assert frame_end(b"xx" + frame(b"abc"), 2) == 9


def test_frame_buffer_says_where_a_stream_ended_inside_a_frame():
    buf = FrameBuffer()
    buf.feed(b"\x00\x00")
    with pytest.raises(FrameError, match=r"inside a frame's size \(2 of 4 bytes\)"):
        buf.check_closed()
    buf.feed(b"\x00\x09abc")
    with pytest.raises(FrameError, match=r"inside a frame \(3 of 9 bytes\)"):
        buf.check_closed()


def test_read_frame_reads_one_frame_and_not_a_byte_more():
    a, b = socket.socketpair()
    with a, b:
        a.settimeout(5)
        b.sendall(frame(b"first") + frame(b"second"))
        assert read_frame(a) == frame(b"first")
        assert read_frame(a) == frame(b"second")
        b.sendall(frame(b"x" * 100_000))  # more than one recv
        assert read_frame(a) == frame(b"x" * 100_000)
        b.shutdown(socket.SHUT_WR)
        assert read_frame(a) is None


@pytest.mark.parametrize("sent,error", [
    (b"\x00\x00", r"inside a frame's size \(2 of 4 bytes\)"),
    (struct.pack(">i", 10) + b"abc", r"inside a frame \(3 of 10 bytes\)"),
    (struct.pack(">i", 2000), r"invalid frame size 2000 \(allowed 0..1000\)"),
    (struct.pack(">i", -3), r"invalid frame size -3"),
])
def test_read_frame_says_why_there_is_no_frame(sent, error):
    a, b = socket.socketpair()
    with a, b:
        a.settimeout(5)
        b.sendall(sent)
        b.shutdown(socket.SHUT_WR)
        with pytest.raises(FrameError, match=error):
            read_frame(a, max_bytes=1000)


def test_a_response_cut_short_keeps_its_real_size_and_says_why_its_body_is_unread():
    api = API["EndTxn"]
    whole = api.response_frame(3, 42, api.Response(error_code=90))
    assert read_errors(response_info(whole, api.key, 3), whole).error_codes == [90]
    cut = whole[:9]  # a transcript keeps only the first bytes of a large frame
    info = read_errors(response_info(cut, api.key, 3, "cli"), cut)
    assert (info.size, info.api_name, info.correlation_id, info.client_id) == (len(whole), "EndTxn", 42, "cli")
    assert info.error_codes == [] and info.note.startswith("body unreadable")
    assert read_errors(response_info(whole), whole).note == "no request with this correlation id"
    assert request_info(b"\x00\x00\x00\x04abcd").note == "frame shorter than a header"
    assert request_info(struct.pack(">ihhi", 8, 999, 0, 3)).api_label == "ApiKey999"
