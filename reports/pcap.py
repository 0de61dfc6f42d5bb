"""A case's transcript as a pcap that Wireshark reads as Kafka, and back.

The proxy records frames, not packets, so this module makes the packets a
TCP stack would have sent for them: per connection a SYN / SYN-ACK / ACK
handshake, each frame as data segments of at most ``mss`` bytes (PSH on the
last) with correct sequence and acknowledgement numbers, a pure ACK from the
receiver after each frame, and FIN / FIN-ACK / ACK at the end. Wireshark's
Kafka dissector then decodes requests and responses: it looks at TCP port
9092, so ``broker_port=9092`` rewrites the broker side to that port (the
default keeps the broker's real port; use "Decode As... Kafka" then).

scapy is GPL-2.0-only and lives in the optional extra ``capture``: it is
imported inside the functions here, never at module import, and never by
``broker_impl``.
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from broker_impl.codec import ANY_SIZE, FrameBuffer

from .transcripts import Frame, read_transcript, split_address

DEFAULT_MSS = 1460
_CLIENT_MAC = "02:00:00:00:00:01"
_BROKER_MAC = "02:00:00:00:00:02"
_TICK = 1e-6  # spacing of packets that share one transcript timestamp


def _scapy():
    try:
        from scapy.layers.inet import IP, TCP
        from scapy.layers.inet6 import IPv6
        from scapy.layers.l2 import Ether
        from scapy.utils import PcapWriter, rdpcap
    except ImportError as exc:  # pragma: no cover - depends on the extra
        raise RuntimeError("pcap support needs scapy: pip install 'kconform[capture]'") from exc
    return Ether, IP, IPv6, TCP, PcapWriter, rdpcap


def _isn(conn: str, side: str) -> int:
    """A fixed initial sequence number per connection and side: same transcript, same pcap."""
    return int.from_bytes(hashlib.sha256(f"{conn}/{side}".encode()).digest()[:4], "big")


@dataclass
class _Peer:
    host: str
    port: int
    mac: str
    seq: int          # next sequence number this side sends


class _Connection:
    """Builds the packets of one TCP connection, keeping seq/ack numbers right."""

    def __init__(self, conn: str, client: str, broker: str, broker_port: int | None, layers):
        self.Ether, self.IP, self.IPv6, self.TCP = layers
        ch, cp = split_address(client)
        bh, bp = split_address(broker)
        self.client = _Peer(ch, cp, _CLIENT_MAC, _isn(conn, "client"))
        self.broker = _Peer(bh, broker_port or bp, _BROKER_MAC, _isn(conn, "broker"))
        self.v6 = ipaddress.ip_address(ch).version == 6
        self.packets: list = []
        self.t = None

    def _emit(self, sender: _Peer, receiver: _Peer, flags: str, t: float, payload: bytes = b"",
              seq_len: int = 0) -> None:
        t = t if self.t is None else max(t, self.t + _TICK)
        self.t = t
        ip = (self.IPv6(src=sender.host, dst=receiver.host) if self.v6
              else self.IP(src=sender.host, dst=receiver.host, flags="DF"))
        tcp = self.TCP(sport=sender.port, dport=receiver.port, flags=flags, seq=sender.seq,
                       ack=receiver.seq if "A" in flags else 0, window=65535)
        if flags == "S" or flags == "SA":
            tcp.options = [("MSS", self.mss)]
        pkt = self.Ether(src=sender.mac, dst=receiver.mac) / ip / tcp
        if payload:
            pkt = pkt / payload
        pkt.time = t
        self.packets.append(pkt)
        sender.seq = (sender.seq + len(payload) + seq_len) & 0xFFFFFFFF

    def open(self, t: float, mss: int) -> None:
        self.mss = mss
        c, b = self.client, self.broker
        self._emit(c, b, "S", t, seq_len=1)
        self._emit(b, c, "SA", t, seq_len=1)
        self._emit(c, b, "A", t)

    def data(self, from_client: bool, payload: bytes, t: float) -> None:
        s, r = (self.client, self.broker) if from_client else (self.broker, self.client)
        chunks = [payload[i:i + self.mss] for i in range(0, len(payload), self.mss)] or [b""]
        for i, chunk in enumerate(chunks):
            self._emit(s, r, "PA" if i == len(chunks) - 1 else "A", t, chunk)
        self._emit(r, s, "A", t)

    def close(self, t: float) -> None:
        c, b = self.client, self.broker
        self._emit(c, b, "FA", t, seq_len=1)
        self._emit(b, c, "FA", t, seq_len=1)
        self._emit(c, b, "A", t)


def transcript_packets(frames: list[Frame], *, broker_port: int | None = None, mss: int = DEFAULT_MSS,
                       start_time: float = 0.0) -> list:
    """The scapy packets for ``frames``, in time order across connections."""
    if mss < 1:
        raise ValueError("mss must be positive")
    Ether, IP, IPv6, TCP, _, _ = _scapy()
    conns: dict[str, _Connection] = {}
    for f in frames:
        c = conns.get(f.conn)
        if c is None:
            c = conns[f.conn] = _Connection(f.conn, f.client, f.broker, broker_port, (Ether, IP, IPv6, TCP))
            c.open(start_time + f.t - 3 * _TICK, mss)
        c.data(f.dir == "c2b", f.data, start_time + f.t)
    ordered = []
    for i, c in enumerate(conns.values()):
        c.close(c.t + _TICK)
        ordered.extend((p.time, i, j, p) for j, p in enumerate(c.packets))
    ordered.sort(key=lambda x: x[:3])
    return [p for *_, p in ordered]


def write_pcap(transcript: str | Path | list[Frame], pcap_path: str | Path, *,
               broker_port: int | None = None, mss: int = DEFAULT_MSS, start_time: float = 0.0) -> Path:
    """Write ``transcript`` (a transcript file or its frames) as a pcap.

    ``broker_port=9092`` rewrites the broker side's port so that Wireshark's
    Kafka dissector picks the stream up without "Decode As". ``start_time``
    (epoch seconds) is added to the transcript's relative times.
    """
    frames = read_transcript(transcript) if isinstance(transcript, (str, Path)) else transcript
    _, _, _, _, PcapWriter, _ = _scapy()
    pcap_path = Path(pcap_path)
    pcap_path.parent.mkdir(parents=True, exist_ok=True)
    w = PcapWriter(str(pcap_path), sync=False)
    try:
        for p in transcript_packets(frames, broker_port=broker_port, mss=mss, start_time=start_time):
            w.write(p)
    finally:
        w.close()
    return pcap_path


@dataclass
class PcapFrame:
    """One Kafka frame reassembled from a pcap."""

    time: float
    conn: str          # "client_host:port-broker_host:port"
    dir: str           # "c2b" | "b2c"
    src: str
    dst: str
    data: bytes


def _addr(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class _Stream:
    """One direction of a TCP connection: payload put back in sequence order."""

    def __init__(self) -> None:
        self.next_seq: int | None = None
        self.frames = FrameBuffer(ANY_SIZE)
        self.out_of_order: dict[int, tuple[bytes, float]] = {}

    def add(self, seq: int, payload: bytes, t: float) -> list[tuple[bytes, float]]:
        """Add a segment; return the frames it completes with the time of the completing segment."""
        if self.next_seq is None:
            self.next_seq = seq
        self.out_of_order.setdefault(seq, (payload, t))
        done: list[tuple[bytes, float]] = []
        while self.next_seq in self.out_of_order:
            data, ts = self.out_of_order.pop(self.next_seq)
            self.next_seq = (self.next_seq + len(data)) & 0xFFFFFFFF
            self.frames.feed(data)
            while (frame := self.frames.next_frame()) is not None:
                done.append((frame, ts))
        # a retransmission of bytes already taken: drop it
        for s in [s for s in self.out_of_order if ((self.next_seq - s) & 0xFFFFFFFF) < 0x80000000]:
            self.out_of_order.pop(s)
        return done


def read_pcap(pcap_path: str | Path) -> list[PcapFrame]:
    """The Kafka frames of a pcap, per connection and direction, in capture order.

    The client of a connection is the side that sent the SYN; in a capture
    that starts mid-connection it is the side seen sending data first, since
    a Kafka client always speaks first. Segments are put back in sequence
    order and retransmitted bytes are dropped, so frames split over several
    segments come out whole.
    """
    _, IP, IPv6, TCP, _, rdpcap = _scapy()
    out: list[tuple[float, int, PcapFrame]] = []
    conns: dict[frozenset, tuple[tuple[str, int], tuple[str, int]]] = {}
    streams: dict[tuple, _Stream] = {}
    from scapy.error import Scapy_Exception

    try:
        packets = rdpcap(str(pcap_path))
    except (Scapy_Exception, EOFError) as exc:
        raise ValueError(f"not a pcap file: {exc}") from None
    for idx, pkt in enumerate(packets):
        if TCP not in pkt:
            continue
        ip = pkt[IP] if IP in pkt else (pkt[IPv6] if IPv6 in pkt else None)
        if ip is None:
            continue
        tcp = pkt[TCP]
        a, b = (ip.src, tcp.sport), (ip.dst, tcp.dport)
        key = frozenset((a, b))
        flags = str(tcp.flags)
        payload = bytes(tcp.payload)
        if key not in conns:
            if "S" in flags and "A" in flags:   # saw SYN-ACK first: the receiver is the client
                conns[key] = (b, a)
            elif "S" in flags or payload:
                conns[key] = (a, b)
            else:
                continue
        client, broker = conns[key]
        seq_start = tcp.seq + (1 if "S" in flags else 0)
        if not payload:
            if "S" in flags:
                streams[(key, a)] = _Stream()
                streams[(key, a)].next_seq = seq_start
            continue
        stream = streams.setdefault((key, a), _Stream())
        direction = "c2b" if a == client else "b2c"
        conn = f"{_addr(*client)}-{_addr(*broker)}"
        for data, ts in stream.add(seq_start, payload, float(pkt.time)):
            out.append((ts, idx, PcapFrame(ts, conn, direction, _addr(*a), _addr(*b), data)))
    out.sort(key=lambda x: x[:2])
    return [f for *_, f in out]
