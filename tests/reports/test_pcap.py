"""Transcripts written as pcap and read back: real TCP framing, the same frames, Kafka decoded."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import pytest

scapy = pytest.importorskip("scapy", reason="pcap support is the optional extra 'capture' (scapy)")

from scapy.layers.inet import IP, TCP  # noqa: E402
from scapy.utils import rdpcap  # noqa: E402

from reports.cli import transcript, transcript_lines  # noqa: E402
from reports.kafka_layer import KafkaRequest, KafkaResponse, dissect  # noqa: E402
from reports.pcap import read_pcap, write_pcap  # noqa: E402
from reports.transcripts import read_transcript, write_transcript  # noqa: E402
from tests.reports.rowgen import transcript_frames  # noqa: E402

BROKER_PORT = 39092


@pytest.fixture
def transcript_file(tmp_path) -> Path:
    return write_transcript(tmp_path / "case.transcript.jsonl",
                            transcript_frames(fenced=True, seed=7, broker_port=BROKER_PORT, record_bytes=5000))


def _per_direction(frames) -> dict[tuple[str, str], list[bytes]]:
    out: dict[tuple[str, str], list[bytes]] = {}
    for f in frames:
        client = f.src if f.dir == "c2b" else f.dst
        out.setdefault((client, f.dir), []).append(f.data)
    return out


@pytest.mark.parametrize("mss", [1460, 97])
def test_frames_read_back_equal_per_direction_in_order(transcript_file, tmp_path, mss):
    frames = read_transcript(transcript_file)
    assert any(len(f.data) > 4000 for f in frames)          # the Produce spans several segments
    pcap = write_pcap(transcript_file, tmp_path / "case.pcap", mss=mss)
    back = read_pcap(pcap)
    assert len(back) == len(frames)
    assert _per_direction(back) == _per_direction(frames)
    assert [f.data for f in back] == [f.data for f in frames]   # and the global order is kept
    assert {f.dst for f in back if f.dir == "c2b"} == {f"127.0.0.1:{BROKER_PORT}"}


def test_tcp_framing_is_what_a_stack_sends(transcript_file, tmp_path):
    pcap = write_pcap(transcript_file, tmp_path / "case.pcap", mss=500)
    pkts = [p for p in rdpcap(str(pcap)) if TCP in p]
    conns: dict[frozenset, list] = {}
    for p in pkts:
        conns.setdefault(frozenset(((p[IP].src, p[TCP].sport), (p[IP].dst, p[TCP].dport))), []).append(p)
    assert len(conns) == 2
    for seq in conns.values():
        flags = [str(p[TCP].flags) for p in seq]
        assert flags[:3] == ["S", "SA", "A"]
        assert flags[-3:] == ["FA", "FA", "A"]
        client = (seq[0][IP].src, seq[0][TCP].sport)
        nxt = {client: seq[0][TCP].seq, "broker": seq[1][TCP].seq}
        for p in seq:
            me = client if (p[IP].src, p[TCP].sport) == client else "broker"
            peer = "broker" if me == client else client
            t = p[TCP]
            assert t.seq == nxt[me], "sequence numbers continue without gaps"
            if "A" in str(t.flags):
                assert t.ack == nxt[peer], "every ACK acknowledges all the peer sent"
            data = len(bytes(t.payload))
            assert data <= 500
            nxt[me] = (nxt[me] + data + (1 if str(t.flags) in ("S", "SA", "FA") else 0)) & 0xFFFFFFFF
        data_segments = [p for p in seq if bytes(p[TCP].payload)]
        assert all("A" in str(p[TCP].flags) for p in data_segments)
        assert "P" in str(data_segments[-1][TCP].flags)
    times = [float(p.time) for p in pkts]
    assert times == sorted(times)


def test_broker_port_rewritten_to_9092_only_when_asked(transcript_file, tmp_path):
    real = {p[TCP].sport for p in rdpcap(str(write_pcap(transcript_file, tmp_path / "a.pcap"))) if TCP in p}
    moved = {p[TCP].sport for p in rdpcap(str(write_pcap(transcript_file, tmp_path / "b.pcap", broker_port=9092)))
             if TCP in p}
    assert BROKER_PORT in real and 9092 not in real
    assert 9092 in moved and BROKER_PORT not in moved
    assert len(real) == len(moved) == 3          # two client ports and the broker's


def test_kafka_layer_dissects_headers_and_response_errors(transcript_file, tmp_path):
    back = read_pcap(write_pcap(transcript_file, tmp_path / "case.pcap", broker_port=9092))
    got = dissect(back)
    req = got[0][1]
    assert isinstance(req, KafkaRequest)
    assert (req.size, req.api_key, req.api_version, req.correlation_id, req.client_id) == \
           (len(back[0].data) - 4, 18, 3, 1, b"rdkafka")
    assert req.sprintf("%api_key%") == "ApiVersions"
    end_txn_resp = got[-1]
    assert isinstance(end_txn_resp[1], KafkaResponse) and end_txn_resp[1].correlation_id == 4
    info = end_txn_resp[2]
    assert (info.api_name, info.api_version, info.error_codes) == ("EndTxn", 3, [90])
    produce_resp = got[-3][2]
    assert produce_resp.api_name == "Produce" and produce_resp.error_codes == []
    assert produce_resp.nested_error_codes == [47]           # INVALID_PRODUCER_EPOCH per partition
    assert end_txn_resp[1].decode_body(26, 3).error_codes == [90]


def test_transcript_command_prints_one_line_per_frame(transcript_file, tmp_path):
    pcap = write_pcap(transcript_file, tmp_path / "case.pcap")
    buf = io.StringIO()
    assert transcript(pcap, out=buf) == 0
    lines = buf.getvalue().splitlines()
    assert len(lines) == len(read_transcript(transcript_file)) == 14
    assert "-> 127.0.0.1:39092 ApiVersions" in lines[0] and "v3" in lines[0] and "corr=1" in lines[0]
    assert "<- 127.0.0.1:39092 EndTxn" in lines[-1] and "errors=PRODUCER_FENCED" in lines[-1]
    assert "errors=nested: INVALID_PRODUCER_EPOCH" in lines[-3]
    assert [ln.split()[3] for ln in lines] == [ln.split()[3] for ln in transcript_lines(transcript_file)]
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"not a pcap at all")
    assert transcript(bad, out=io.StringIO()) == 1


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark (Debian package) is not installed")
def test_wireshark_kafka_dissector_reads_the_pcap(transcript_file, tmp_path):
    """Wireshark decodes the Kafka headers of every frame on port 9092 (bodies of versions newer
    than the installed Wireshark knows are reported as unsupported, which is Wireshark's limit)."""
    pcap = write_pcap(transcript_file, tmp_path / "case.pcap", broker_port=9092)
    proc = subprocess.run(["tshark", "-r", str(pcap), "-Y", "kafka", "-T", "fields", "-e", "tcp.srcport",
                           "-e", "kafka.len", "-e", "kafka.correlation_id", "-e", "kafka.request_key"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = [ln.split("\t") for ln in proc.stdout.splitlines() if ln.strip()]
    frames = read_transcript(transcript_file)
    assert len(rows) == len(frames)
    for row, f in zip(rows, frames):
        assert int(row[1]) == len(f.data) - 4                  # reassembled across segments
        assert int(row[2]) == int.from_bytes(f.data[8:12] if f.dir == "c2b" else f.data[4:8], "big")
        if f.dir == "c2b":
            assert int(row[3]) == int.from_bytes(f.data[4:6], "big")
        else:
            assert row[0] == "9092"


def test_scapy_tcp_session_reassembles_kafka_frames_on_9092(transcript_file, tmp_path):
    """With the layer bound to 9092, scapy's own TCPSession yields whole frames, big ones too."""
    from scapy.sendrecv import sniff
    from scapy.sessions import TCPSession

    from reports.kafka_layer import bind_kafka_port

    pcap = write_pcap(transcript_file, tmp_path / "case.pcap", broker_port=9092, mss=700)
    bind_kafka_port(9092)
    pkts = sniff(offline=str(pcap), session=TCPSession)
    kafka = [p[KafkaRequest] if KafkaRequest in p else p[KafkaResponse] for p in pkts
             if KafkaRequest in p or KafkaResponse in p]
    frames = read_transcript(transcript_file)
    assert [bytes(k) for k in kafka] == [f.data for f in frames]
