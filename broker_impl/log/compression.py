"""Compression codecs of record batch v2 (attributes bits 0-2), for reading and building records.

Never used on the produce/fetch hot path: the broker stores batches as sent. Only internal topics,
ListOffsets by timestamp, tests and tools look inside a batch.

Formats, as Kafka's clients write them:
- gzip (1): RFC 1952 stream (Java's GZIPOutputStream); zlib handles it natively.
- snappy (2): Java writes xerial snappy-java framing (magic ``\\x82SNAPPY\\x00``, two int32
  versions, then [int32 length][raw snappy block]...); librdkafka writes either that or one raw
  snappy block. Both are accepted.
- lz4 (3): the LZ4 frame format with independent blocks (KafkaLZ4BlockOutputStream).
- zstd (4): a zstd frame, possibly without the content size (streaming encoders).
"""

from __future__ import annotations

import struct
import zlib

import cramjam

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_LEN = 16  # magic (8) + version int32 + min compatible version int32
_XERIAL_BLOCK = 32 * 1024


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """Decompress the records section of a batch compressed with ``codec``."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        # wbits 47 = auto-detect gzip or zlib header.
        return zlib.decompress(bytes(data), 47)
    if codec == SNAPPY:
        return _snappy_decompress(bytes(data))
    if codec == LZ4:
        return bytes(cramjam.lz4.decompress(bytes(data)))
    if codec == ZSTD:
        return bytes(cramjam.zstd.decompress(bytes(data)))
    raise ValueError(f"unknown compression codec {codec}")


def compress(codec: int, data: bytes) -> bytes:
    """Compress ``data`` the way the Java producer does for ``codec``."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        c = zlib.compressobj(6, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        # Kafka's KafkaLZ4BlockInputStream reads independent blocks only.
        c = cramjam.lz4.Compressor(block_linked=False)
        c.compress(data)
        return bytes(c.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"unknown compression codec {codec}")


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    out = []
    pos = _XERIAL_HEADER_LEN
    end = len(data)
    while pos < end:
        if pos + 4 > end:
            raise ValueError("truncated xerial snappy block length")
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise ValueError("truncated xerial snappy block")
        out.append(bytes(cramjam.snappy.decompress_raw(data[pos:pos + n])))
        pos += n
    return b"".join(out)


def _xerial_compress(data: bytes) -> bytes:
    parts = [_XERIAL_MAGIC, struct.pack(">ii", 1, 1)]
    for i in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[i:i + _XERIAL_BLOCK]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)
