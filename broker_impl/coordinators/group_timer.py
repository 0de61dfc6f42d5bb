"""Keyed one-shot timers on a single trio task (Kafka's ``CoordinatorTimer``).

The group coordinator needs many deadlines (one heartbeat expiry per member,
one join and one sync deadline per group) that are rescheduled on every
heartbeat. One task per deadline would make every heartbeat spawn and cancel
a task; instead a heap of ``(deadline, seq, key)`` is kept and entries that
were replaced or cancelled are dropped lazily when they reach the top. A
heartbeat then costs one dict write and one heap push, and the loop wakes
only when the earliest deadline is due (or an earlier one is scheduled).

Deadlines use ``trio.current_time()`` (monotonic), so tests may run them on
``trio.testing.MockClock``.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from typing import Awaitable, Callable, Hashable

import trio

log = logging.getLogger("kconform.broker.group.timer")

TimerCallback = Callable[[], Awaitable[None] | None]


class CoordinatorTimer:
    def __init__(self) -> None:
        self._entries: dict[Hashable, tuple[float, int, TimerCallback]] = {}
        self._heap: list[tuple[float, int, Hashable]] = []
        self._seq = itertools.count()
        self._wakeup = trio.Event()

    def schedule(self, key: Hashable, delay_ms: float, fn: TimerCallback) -> None:
        """Run ``fn`` after ``delay_ms`` unless ``key`` is scheduled again or cancelled first."""
        deadline = trio.current_time() + max(0.0, delay_ms) / 1000.0
        seq = next(self._seq)
        self._entries[key] = (deadline, seq, fn)
        earliest = self._heap[0][0] if self._heap else None
        heapq.heappush(self._heap, (deadline, seq, key))
        if earliest is None or deadline < earliest:
            self._wakeup.set()
        # Bound the heap: lazily-dropped entries would otherwise accumulate with
        # every heartbeat when deadlines are long.
        if len(self._heap) > 64 and len(self._heap) > 4 * len(self._entries):
            self._heap = [(d, s, k) for k, (d, s, _f) in self._entries.items()]
            heapq.heapify(self._heap)

    def cancel(self, key: Hashable) -> None:
        self._entries.pop(key, None)

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._entries

    def clear(self) -> None:
        self._entries.clear()
        self._heap.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap:
            deadline, seq, key = heap[0]
            entry = self._entries.get(key)
            if entry is not None and entry[1] == seq:
                return
            heapq.heappop(heap)

    async def run(self) -> None:
        """Fire due callbacks forever (run it in a nursery)."""
        while True:
            self._drop_stale()
            if self._heap:
                with trio.move_on_at(self._heap[0][0]):
                    await self._wakeup.wait()
            else:
                await self._wakeup.wait()
            self._wakeup = trio.Event()
            now = trio.current_time()
            while True:
                self._drop_stale()
                if not self._heap or self._heap[0][0] > now:
                    break
                _deadline, _seq, key = heapq.heappop(self._heap)
                _d, _s, fn = self._entries.pop(key)
                try:
                    res = fn()
                    if res is not None:
                        await res
                except trio.Cancelled:
                    raise
                except Exception:  # one bad callback must not stop every other deadline
                    log.exception("group coordinator timer %r failed", key)
