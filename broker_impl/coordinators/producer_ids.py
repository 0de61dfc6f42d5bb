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
from ..protocol.errors import Errors, KafkaError

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


class RPCProducerIdManager:
    """A cluster's broker asks the controller for blocks (AllocateProducerIds; Kafka's
    RPCProducerIdManager): the controller records each block in its metadata before handing it
    out, so no two brokers -- and no restarted broker -- ever hand out the same id.

    ``generate`` stays synchronous, as the coordinators call it in the middle of a decision: the
    next block is fetched in the background once 90 % of the current one is used, and while no
    block is at hand the caller gets COORDINATOR_LOAD_IN_PROGRESS (a retriable error), exactly
    Kafka's behaviour.
    """

    PREFETCH_AT = 0.9

    def __init__(self, request_block, spawn):
        """``request_block()``: an async call returning (first id, block size) or raising;
        ``spawn(async_fn)``: runs it in the background."""
        self._request_block = request_block
        self._spawn = spawn
        self._next = 0
        self._end = 0
        self._block_size = 0
        self._prefetched: tuple[int, int] | None = None
        self._fetching = False

    def prefetch(self) -> None:
        """Ask for a block now (at start: the first InitProducerId need not wait)."""
        self._maybe_prefetch()

    def _maybe_prefetch(self) -> None:
        if self._fetching or self._prefetched is not None:
            return
        if self._end and self._next < self._end - self._block_size * (1 - self.PREFETCH_AT):
            return
        self._fetching = True
        self._spawn(self._fetch)

    async def _fetch(self) -> None:
        try:
            self._prefetched = await self._request_block()
        except Exception:  # noqa: BLE001 - asked again at the next generate()
            pass
        finally:
            self._fetching = False

    def generate(self) -> int:
        if self._next >= self._end and self._prefetched is not None:
            (self._next, self._block_size), self._prefetched = self._prefetched, None
            self._end = self._next + self._block_size
        self._maybe_prefetch()
        if self._next >= self._end:
            raise KafkaError(Errors.COORDINATOR_LOAD_IN_PROGRESS)
        pid = self._next
        self._next += 1
        return pid
