"""The `raw` actor: hand-made frames on a plain socket, for bad-frame cases.

Why not a client library: no client sends a frame with a wrong size, an unknown API key or an
unsupported version on purpose. What a broker does with one (answer with an error, or close the
connection) is part of the wire contract, and Kafka's answer is the reference.

The outcome of `send_frame` is ok with {response_size, correlation_id, error_code, error} when a
response frame came back (error_code: the int16 right after the response header, which is where
ApiVersions puts its error), NETWORK_EXCEPTION when the broker closed the connection (what a
Java client reports as "disconnected before a response was received"), REQUEST_TIMED_OUT when
nothing came within 5 s.
"""
from __future__ import annotations

import socket
import struct
import time
from typing import Any

from conformance.clients import Outcome
from conformance.clients.errors import KAFKA_ERRORS
from conformance.clients.protocol import ErrorInfo

READ_TIMEOUT_S = 5.0


def build_frame(args: dict[str, Any]) -> bytes:
    if "hex" in args:
        return bytes.fromhex(str(args["hex"]).replace(" ", ""))
    client_id = b"kconform-raw"
    header = struct.pack(">hhih", int(args.get("api_key", 18)), int(args.get("api_version", 0)),
                         int(args.get("correlation_id", 1)), len(client_id)) + client_id
    body = bytes.fromhex(str(args.get("body_hex", "")).replace(" ", ""))
    payload = header + body
    return struct.pack(">i", len(payload) + int(args.get("size_delta", 0))) + payload


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def send_frame(address: tuple[str, int], args: dict[str, Any]) -> Outcome:
    t0 = time.monotonic()

    def fail(name: str, message: str) -> Outcome:
        code = next((c for c, (n, _) in KAFKA_ERRORS.items() if n == name), None)
        return Outcome(op="send_frame", ok=False, elapsed_ms=(time.monotonic() - t0) * 1000,
                       error=ErrorInfo(name=name, code=code, message=message, origin="runner",
                                       client_class="socket"))

    frame = build_frame(args)
    try:
        with socket.create_connection(address, timeout=READ_TIMEOUT_S) as sock:
            sock.sendall(frame)
            head = _recv_exact(sock, 4)
            if head is None:
                return fail("NETWORK_EXCEPTION", "the broker closed the connection without answering")
            (size,) = struct.unpack(">i", head)
            body = _recv_exact(sock, size) if 0 <= size < 64 * 1024 * 1024 else None
            if body is None:
                return fail("NETWORK_EXCEPTION", f"the broker closed the connection mid-response (size {size})")
    except socket.timeout:
        return fail("REQUEST_TIMED_OUT", f"no answer within {READ_TIMEOUT_S} s")
    except ConnectionError as exc:
        return fail("NETWORK_EXCEPTION", f"connection error: {exc}")
    (corr,) = struct.unpack(">i", body[:4])
    data: dict[str, Any] = {"response_size": size, "correlation_id": corr}
    if len(body) >= 6:
        (code,) = struct.unpack(">h", body[4:6])
        data["error_code"] = code
        data["error"] = KAFKA_ERRORS.get(code, (f"ERROR_{code}",))[0]
    return Outcome(op="send_frame", ok=True, data=data, elapsed_ms=(time.monotonic() - t0) * 1000)
