"""A scapy layer for Kafka frames: the project's own, small one.

``KafkaRequest`` dissects the size and the request header (api key with
Kafka's API names, api version, correlation id, client id); the body stays
raw. ``KafkaResponse`` dissects the size and correlation id; what the body
means depends on the request with that correlation id, so
:meth:`KafkaResponse.decode_body` takes the api key and version and reads
the top-level error codes with ``broker_impl.codec`` (the codec made from
Kafka's JSON schemas). :func:`dissect` does the pairing for a whole capture.

scapy is GPL-2.0-only: this module is part of the optional ``capture``
extra and is imported only by reports code that needs it.
"""

from __future__ import annotations

from scapy.fields import FieldLenField, IntField, ShortEnumField, ShortField, StrLenField
from scapy.layers.inet import TCP
from scapy.packet import Packet, Raw, bind_layers

from broker_impl.codec import (
    ANY_SIZE,
    API_BY_KEY,
    ConnectionDecoder,
    FrameError,
    FrameInfo,
    frame_end,
    read_errors,
    response_info,
)

KAFKA_PORT = 9092
API_NAMES = {key: api.name for key, api in sorted(API_BY_KEY.items())}


class _KafkaFrame(Packet):
    """Shared by both directions: the body ends where ``size`` says."""

    def extract_padding(self, s: bytes):
        body_len = max(0, self.size - (len(self.original) - 4 - len(s))) if self.size is not None else len(s)
        return s[:body_len], s[body_len:]

    def guess_payload_class(self, payload: bytes):
        return Raw

    @classmethod
    def tcp_reassemble(cls, data: bytes, metadata, session):
        """For scapy's TCPSession: hand back a packet once a whole frame is in."""
        try:
            end = frame_end(data, 0, ANY_SIZE)
        except FrameError:
            return None
        return None if end is None else cls(data)


class KafkaRequest(_KafkaFrame):
    name = "Kafka request"
    fields_desc = [
        IntField("size", None),
        ShortEnumField("api_key", 0, API_NAMES),
        ShortField("api_version", 0),
        IntField("correlation_id", 0),
        FieldLenField("client_id_len", None, length_of="client_id", fmt="!h"),
        StrLenField("client_id", b"", length_from=lambda p: max(0, p.client_id_len or 0)),
    ]

    def post_build(self, pkt: bytes, pay: bytes) -> bytes:
        if self.size is None:
            pkt = (len(pkt) + len(pay) - 4).to_bytes(4, "big") + pkt[4:]
        return pkt + pay

    def mysummary(self) -> str:
        return self.sprintf("Kafka %api_key% v%api_version% corr=%correlation_id%")


class KafkaResponse(_KafkaFrame):
    name = "Kafka response"
    fields_desc = [
        IntField("size", None),
        IntField("correlation_id", 0),
    ]

    def post_build(self, pkt: bytes, pay: bytes) -> bytes:
        if self.size is None:
            pkt = (len(pkt) + len(pay) - 4).to_bytes(4, "big") + pkt[4:]
        return pkt + pay

    def decode_body(self, api_key: int, api_version: int) -> FrameInfo:
        """The response read as the answer to ``api_key`` v``api_version``: error codes included."""
        frame = bytes(self)
        return read_errors(response_info(frame, api_key, api_version), frame)

    def mysummary(self) -> str:
        return self.sprintf("Kafka response corr=%correlation_id%")


def bind_kafka_port(port: int = KAFKA_PORT) -> None:
    """Let scapy dissect TCP segments to/from ``port`` as Kafka frames.

    A frame split over several segments is whole only under scapy's
    ``TCPSession`` (``sniff(offline=..., session=TCPSession)``), which calls
    ``tcp_reassemble``; :func:`dissect` does its own reassembly.
    """
    bind_layers(TCP, KafkaRequest, dport=port)
    bind_layers(TCP, KafkaResponse, sport=port)


def dissect(frames) -> list[tuple[object, Packet, FrameInfo]]:
    """Each reassembled frame (``reports.pcap.PcapFrame``) with its scapy packet and meaning.

    Responses are paired with the request of the same correlation id on the
    same connection, which is what gives them an API name and error codes.
    """
    decoders: dict[str, ConnectionDecoder] = {}
    out = []
    for f in frames:
        dec = decoders.setdefault(f.conn, ConnectionDecoder())
        pkt = KafkaRequest(f.data) if f.dir == "c2b" else KafkaResponse(f.data)
        out.append((f, pkt, dec.frame(f.dir, f.data)))
    return out
