"""Kafka's LeaderEpochFileCache: which leader epoch started at which offset of a partition's log,
kept in ``leader-epoch-checkpoint`` (Kafka's text format: version 0, the entry count, then one
``epoch start_offset`` line per entry).

Why: after a leader change a follower may hold records the new leader never had (written by an
old leader and never replicated). The follower tells the leader its latest epoch with each Fetch
(``last_fetched_epoch``; clients ask with OffsetForLeaderEpoch), the leader answers where that
epoch ended in its log and the follower truncates there (KIP-101/KIP-279); the leader answers
from this cache (``end_offset_for``). Every batch carries the epoch of the leader
that appended it (partitionLeaderEpoch), so a follower fills its cache from the batches it
copies, and a leader adds its new epoch, at its log end offset, when it takes over.
"""

from __future__ import annotations

import os
from bisect import bisect_right

from ..cluster.durable_file import replace_durably

CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
_VERSION = 0


class LeaderEpochFileCache:
    def __init__(self, directory: str):
        self.path = os.path.join(directory, CHECKPOINT_FILE)
        self.epochs: list[int] = []
        self.start_offsets: list[int] = []
        if os.path.exists(self.path):
            self._read()

    def _read(self) -> None:
        lines = open(self.path).read().split("\n")
        try:
            if int(lines[0]) != _VERSION:
                raise ValueError(f"unknown version {lines[0]}")
            n = int(lines[1])
            entries = [tuple(int(x) for x in line.split()) for line in lines[2:2 + n]]
        except (ValueError, IndexError):
            entries = []   # unreadable: rebuilt from the batches the log replays
        self.epochs = [e for e, _ in entries]
        self.start_offsets = [o for _, o in entries]

    def _write(self) -> None:
        body = [str(_VERSION), str(len(self.epochs))]
        body += [f"{e} {o}" for e, o in zip(self.epochs, self.start_offsets)]
        replace_durably(self.path, "\n".join(body) + "\n")

    # ------------------------------------------------------------------ questions
    @property
    def latest_epoch(self) -> int | None:
        return self.epochs[-1] if self.epochs else None

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self.epochs, self.start_offsets))

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as the leader answers OffsetForLeaderEpoch: the requested epoch
        (or the largest one below it) and the start offset of the first larger epoch -- the log
        end offset for the latest epoch; (UNDEFINED, UNDEFINED) for an unknown or larger one."""
        if requested_epoch == UNDEFINED_EPOCH or not self.epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self.epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect_right(self.epochs, requested_epoch)
        if higher == len(self.epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self.start_offsets[0]
        return self.epochs[higher - 1], self.start_offsets[higher]

    # ------------------------------------------------------------------ changes
    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (LeaderEpochFileCache.assign): nothing
        to do for the latest epoch at or after its start; otherwise every entry that would no
        longer be monotonic (an epoch >= this one, or a start >= this one) goes first."""
        if epoch < 0:
            return
        if self.epochs and epoch == self.epochs[-1] and start_offset >= self.start_offsets[-1]:
            return
        keep = [(e, o) for e, o in zip(self.epochs, self.start_offsets) if e < epoch and o < start_offset]
        self.epochs = [e for e, _ in keep] + [epoch]
        self.start_offsets = [o for _, o in keep] + [start_offset]
        self._write()

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to ``end_offset``: forget the epochs that start at or after it."""
        keep = bisect_right(self.start_offsets, end_offset - 1)
        if keep < len(self.epochs):
            del self.epochs[keep:]
            del self.start_offsets[keep:]
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset`` (DeleteRecords, LeaderEpochFileCache.truncateFromStart):
        the epochs that started at or before it go, except the last of them, which now starts there."""
        below = bisect_right(self.start_offsets, start_offset)
        if below == 0 or (below == 1 and self.start_offsets[0] == start_offset):
            return
        del self.epochs[:below - 1]
        del self.start_offsets[:below - 1]
        self.start_offsets[0] = start_offset
        self._write()

    def clear(self) -> None:
        self.epochs, self.start_offsets = [], []
        self._write()
