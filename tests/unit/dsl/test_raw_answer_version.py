"""`send_frame` with `answer_version`: the answer decoded whole as that version, or why not.

The two answers are the bytes measured on the wire for ApiVersions v99 (correlation id 7):
Apache Kafka 4.3.1's v0 UNSUPPORTED_VERSION answer, and librdkafka 2.16.0's mock's.
"""
from __future__ import annotations

import socket
import threading

from conformance.raw import send_frame

# size, correlation id, error 35, INT32 count 1, ApiVersions (18) 0-4
KAFKA_4_3_1 = bytes.fromhex("00000010" "00000007" "0023" "00000001" "0012" "0000" "0004")
# size, correlation id, error 35, then a one-byte count and ApiVersions (18) 0-2, as sent
LIBRDKAFKA_MOCK = bytes.fromhex("00000011" "00000007" "0023" "01" "0012" "0000" "0002" "00" "000000")


def _answer_once(answer: bytes) -> tuple[str, int]:
    """A socket on 127.0.0.1 that reads one request and writes `answer` (bounded: one client, 5 s)."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(5)

    def serve() -> None:
        with srv:
            conn, _ = srv.accept()
            with conn:
                conn.settimeout(5)
                size = int.from_bytes(conn.recv(4), "big")
                while size > 0:
                    size -= len(conn.recv(size))
                conn.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[:2]


def _v99(address, **extra):
    return send_frame(address, {"api_key": 18, "api_version": 99, "correlation_id": 7, "body_hex": "00", **extra})


def test_kafkas_answer_decodes_as_v0():
    out = _v99(_answer_once(KAFKA_4_3_1), answer_version=0)
    assert out.ok and out.data["error"] == "UNSUPPORTED_VERSION" and out.data["response_size"] == 16
    assert out.data["response"]["api_keys"] == [{"api_key": 18, "min_version": 0, "max_version": 4}]


def test_the_mocks_answer_is_not_v0():
    out = _v99(_answer_once(LIBRDKAFKA_MOCK), answer_version=0)
    assert out.ok and out.data["error"] == "UNSUPPORTED_VERSION" and out.data["response_size"] == 17
    assert "response" not in out.data
    assert out.data["undecodable"].startswith("not a ApiVersions v0 response")


def test_bytes_left_over_make_an_answer_undecodable():
    longer = (len(KAFKA_4_3_1) - 4 + 2).to_bytes(4, "big") + KAFKA_4_3_1[4:] + b"\x00\x00"
    out = _v99(_answer_once(longer), answer_version=0)
    assert out.data["undecodable"] == "a ApiVersions v0 response with 2 byte(s) left over"


def test_without_answer_version_nothing_is_decoded():
    out = _v99(_answer_once(KAFKA_4_3_1))
    assert out.ok and "response" not in out.data and "undecodable" not in out.data
