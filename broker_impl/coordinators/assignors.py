"""Server-side assignors of KIP-848 consumer groups (Kafka's ``UniformAssignor`` and
``RangeAssignor``, group-coordinator module ``assignor`` package).

An assignor maps the group's members to partitions of the topics they subscribe to. Its input
is each member's subscribed topic ids and current target assignment (so that it can be
sticky), and the partition count of every subscribed topic; its output is the new target
assignment, ``{member_id: {topic_id: {partition, ...}}}``. Every member appears in the output,
with an empty assignment if it gets nothing.

- ``uniform`` (Kafka's default): balance the number of partitions per member over all the
  topics, moving as few partitions as possible -- a member keeps what it already had up to
  its quota, the rest goes to the members below theirs. Members with different
  subscriptions each get partitions of their topics only, least loaded first.
- ``range``: per topic, the subscribed members sorted by member id get contiguous ranges,
  the first ``partitions % members`` of them one partition more (the classic
  ``range`` assignor's layout, which co-partitions topics of equal size).

Kafka places partitions with other tie-breaks (rack awareness, its own sticky orders); the
balance and the stickiness are what clients observe and what these keep.
"""

from __future__ import annotations

from dataclasses import dataclass

Assignment = dict[bytes, set[int]]


@dataclass(slots=True)
class MemberSpec:
    subscribed_topic_ids: set[bytes]
    current: Assignment


class UniformAssignor:
    name = "uniform"

    def assign(self, members: dict[str, MemberSpec], partitions: dict[bytes, int]) -> dict[str, Assignment]:
        out: dict[str, Assignment] = {m: {} for m in members}
        if not members:
            return out
        subs = [frozenset(t for t in s.subscribed_topic_ids if t in partitions) for s in members.values()]
        if len(set(subs)) == 1:
            return self._homogeneous(members, partitions, subs[0], out)
        return self._heterogeneous(members, partitions, out)

    @staticmethod
    def _homogeneous(members: dict[str, MemberSpec], partitions: dict[bytes, int], topics: frozenset,
                     out: dict[str, Assignment]) -> dict[str, Assignment]:
        all_parts = [(t, p) for t in sorted(topics) for p in range(partitions[t])]
        n, m = len(all_parts), len(members)
        quota, extra = divmod(n, m)
        order = sorted(members)
        taken: set[tuple[bytes, int]] = set()
        counts: dict[str, int] = {}
        # Keep what each member already has, up to its quota (quota + 1 for the first `extra`
        # members that already held that many, so that no partition moves needlessly).
        for mid in order:
            mine = sorted((t, p) for t, ps in members[mid].current.items() if t in topics
                          for p in ps if p < partitions[t])
            limit = quota + (1 if extra and len(mine) > quota else 0)
            if limit > quota:
                extra -= 1
            kept = mine[:limit]
            for tp in kept:
                out[mid].setdefault(tp[0], set()).add(tp[1])
                taken.add(tp)
            counts[mid] = len(kept)
        free = [tp for tp in all_parts if tp not in taken]
        # Fill members up to their quota; the remaining extra partitions go one each to the
        # members still at quota.
        for mid in order:
            while counts[mid] < quota and free:
                t, p = free.pop(0)
                out[mid].setdefault(t, set()).add(p)
                counts[mid] += 1
        for mid in order:
            if not free or extra <= 0:
                break
            if counts[mid] == quota:
                t, p = free.pop(0)
                out[mid].setdefault(t, set()).add(p)
                counts[mid] += 1
                extra -= 1
        return out

    @staticmethod
    def _heterogeneous(members: dict[str, MemberSpec], partitions: dict[bytes, int],
                       out: dict[str, Assignment]) -> dict[str, Assignment]:
        counts = {mid: 0 for mid in members}
        owner: dict[tuple[bytes, int], str] = {}
        for mid, spec in members.items():
            for t, ps in spec.current.items():
                if t in spec.subscribed_topic_ids and t in partitions:
                    for p in ps:
                        if p < partitions[t]:
                            owner[(t, p)] = mid
        for t in sorted(partitions):
            eligible = sorted(mid for mid, s in members.items() if t in s.subscribed_topic_ids)
            if not eligible:
                continue
            fair = -(-partitions[t] // len(eligible))   # keep at most this many of the topic
            kept_here = {mid: 0 for mid in eligible}
            for p in range(partitions[t]):
                prev = owner.get((t, p))
                if prev in kept_here and kept_here[prev] < fair:
                    mid = prev
                else:
                    mid = min(eligible, key=lambda x: (counts[x], x))
                kept_here[mid] += 1
                counts[mid] += 1
                out[mid].setdefault(t, set()).add(p)
        return out


class RangeAssignor:
    name = "range"

    def assign(self, members: dict[str, MemberSpec], partitions: dict[bytes, int]) -> dict[str, Assignment]:
        out: dict[str, Assignment] = {m: {} for m in members}
        for t in sorted(partitions):
            subscribed = sorted(mid for mid, s in members.items() if t in s.subscribed_topic_ids)
            if not subscribed:
                continue
            quota, extra = divmod(partitions[t], len(subscribed))
            start = 0
            for i, mid in enumerate(subscribed):
                size = quota + (1 if i < extra else 0)
                if size:
                    out[mid][t] = set(range(start, start + size))
                start += size
        return out


ASSIGNORS = {a.name: a for a in (UniformAssignor(), RangeAssignor())}
