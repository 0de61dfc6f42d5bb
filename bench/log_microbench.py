"""Micro-benchmark of the storage hot paths (broker_impl.log): append of produce batches and
fetch reads. Prints records/s and MB/s. Run: python bench/log_microbench.py [--records N]

Batches are built once with kafka-python-compatible v2 encoding (idempotent producer fields,
100-byte values) and appended with fresh sequence numbers patched in (re-CRC'd outside the
timed loop), so the timed loop is exactly what the Produce handler pays per batch.
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from broker_impl.log import PartitionLog  # noqa: E402
from broker_impl.log import compression  # noqa: E402
from broker_impl.log import records as rec  # noqa: E402


def make_batches(n_batches: int, per_batch: int, codec: int) -> list[bytes]:
    value = b"x" * 100
    template = [(b"key-%d" % i, value, (), 1_700_000_000_000 + i) for i in range(per_batch)]
    out = []
    base = rec.build_batch(template, producer_id=1000, producer_epoch=0, base_sequence=0,
                           compression_codec=codec)
    for b in range(n_batches):
        buf = bytearray(base)
        struct.pack_into(">i", buf, 53, (b * per_batch) % (rec.INT32_MAX + 1))
        struct.pack_into(">I", buf, rec.CRC_OFFSET, rec.compute_crc(buf))
        out.append(bytes(buf))
    return out


def bench(per_batch: int, n_records: int, codec: int, segment_bytes: int) -> None:
    n_batches = max(1, n_records // per_batch)
    batches = make_batches(n_batches, per_batch, codec)
    d = tempfile.mkdtemp(prefix="kconform-bench-")
    try:
        log = PartitionLog(d, {"segment.bytes": segment_bytes})
        now = 1_700_000_000_000
        t0 = time.perf_counter()
        for b in batches:
            log.append(b, now_ms=now)
        t1 = time.perf_counter()
        total_bytes = sum(len(b) for b in batches)
        recs = n_batches * per_batch
        name = compression.CODEC_NAMES[codec]
        print(f"append  codec={name:6} batch={per_batch:5} "
              f"records: {recs / (t1 - t0):12,.0f} rec/s "
              f"{n_batches / (t1 - t0):10,.0f} batch/s {total_bytes / (t1 - t0) / 1e6:8.1f} MB/s "
              f"({(t1 - t0) / n_batches * 1e6:.1f} us/batch)")
        # fetch: 1 MiB reads from the start to the end, like a consumer catching up
        t0 = time.perf_counter()
        off = 0
        fetched = 0
        reads = 0
        while off < log.log_end_offset:
            r = log.read(off, 1 << 20, max_offset=log.high_watermark)
            fetched += len(r.records)
            off = r.next_offset
            reads += 1
        t1 = time.perf_counter()
        print(f"fetch   codec={name:6} batch={per_batch:5} "
              f"records: {recs / (t1 - t0):12,.0f} rec/s "
              f"{reads / (t1 - t0):10,.0f} reads/s {fetched / (t1 - t0) / 1e6:8.1f} MB/s "
              f"({(t1 - t0) / reads * 1e6:.1f} us/read of <=1MiB)")
        t0 = time.perf_counter()
        log.close()
        PartitionLog(d, {"segment.bytes": segment_bytes}).close()
        t1 = time.perf_counter()
        print(f"close + clean reopen: {(t1 - t0) * 1e3:.1f} ms")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--segment-bytes", type=int, default=64 << 20)
    a = ap.parse_args()
    for per_batch in (1, 100, 1000):
        n = a.records if per_batch > 1 else min(a.records, 100_000)
        bench(per_batch, n, compression.NONE, a.segment_bytes)
    bench(1000, a.records, compression.LZ4, a.segment_bytes)


if __name__ == "__main__":
    main()
