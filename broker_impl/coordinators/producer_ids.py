"""Producer id allocation that never hands out the same id twice.

Kafka's controller hands brokers blocks of producer ids and records each
block in its metadata log before a broker uses it. We do the same with a
file: the end of the current block is made durable *before* any id of the
block is returned, so a crash (even kill -9) can only skip ids, never reuse
one — reuse would make an old producer's state apply to a new producer.
"""

from __future__ import annotations

from pathlib import Path

from ..cluster.durable_file import replace_durably

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, data_dir: Path):
        self._file = Path(data_dir) / "producer_id_block"
        self._next = 0
        self._block_end = 0
        if self._file.exists():
            text = self._file.read_text().strip()
            if text:
                # Everything below the recorded end may have been handed out.
                self._next = self._block_end = int(text)

    def _reserve(self) -> None:
        end = self._next + BLOCK_SIZE
        replace_durably(self._file, str(end))
        self._block_end = end

    def generate(self) -> int:
        if self._next >= self._block_end:
            self._reserve()
        pid = self._next
        self._next += 1
        return pid
