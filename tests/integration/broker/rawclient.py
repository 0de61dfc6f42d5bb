"""A blocking raw Kafka connection built on the project's codec, for tests that
must send exactly the bytes they choose (bad frames, replayed batches)."""

from __future__ import annotations

import socket

from broker_impl.codec import API, RESPONSE_HEADER, FrameError, read_frame


class RawConnection:
    def __init__(self, bootstrap: str, timeout: float = 10.0):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> bytes | None:
        """One response frame without its size prefix, or None when the broker closed the connection."""
        try:
            frame = read_frame(self.sock)
        except (ConnectionResetError, FrameError):
            return None
        return None if frame is None else frame[4:]

    def encode_request(self, api_name: str, version: int, body) -> bytes:
        api = API[api_name]
        self.correlation_id += 1
        return api.request_frame(version, self.correlation_id, "kconform-test", body)

    def request(self, api_name: str, version: int, body, expect_response: bool = True):
        self.send_raw(self.encode_request(api_name, version, body))
        if not expect_response:
            return None
        frame = self.recv_frame()
        if frame is None:
            raise ConnectionError("broker closed the connection")
        api = API[api_name]
        hv = api.response_header_version(version)
        header, pos = RESPONSE_HEADER.decode(hv, frame, 0)
        assert header.correlation_id == self.correlation_id
        resp, _ = api.response.decode(version, frame, pos)
        return resp
