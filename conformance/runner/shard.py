"""Sharding: `kconform run --shard I/N` runs the I-th of N parts of the run's plan, so that N CI
machines run one matrix; `kconform report`, `matrix` and `analyze` take the N results
directories as one run (they share the run id: `--run-id`).

The split is deterministic -- every shard computes the same assignment from the same plan and
the same durations, with no coordination -- and balanced by measured durations: each row's
expected seconds come from a durations file (`kconform durations` makes one from earlier runs;
the library's own is cases/durations.json), or, for a row never measured, from the same case
with another client or release, else a guess from the case's shape (runner.cost_class).

The unit of the split is a case with one client on EVERY target of the run: a target's row is
diffed against the reference target's row of the same case and client (runner.attach_diffs),
so both must run in the same shard. Units are handed out longest first, each to the shard with
the least seconds so far (the LPT rule: within 4/3 of the best split, and far closer when the
units are many and small, as they are here).
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from conformance.targets import split_name

from ..results import ResultsFile

#: The library's measured durations (kconform durations --out cases/durations.json).
DEFAULT_DURATIONS = Path(__file__).resolve().parents[2] / "cases" / "durations.json"
#: Seconds of a row never measured, by runner.cost_class (0: quick, 1: waits on faults or
#: timeouts, 2: a multi-node cluster) -- the medians of the library run on embedded + Apache Kafka.
GUESS_SECONDS = {0: 4.0, 1: 12.0, 2: 40.0}
#: A row that cannot run (its plan says not applicable) takes no time worth balancing.
NOT_APPLICABLE_SECONDS = 0.05

SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse_shard(text: str) -> tuple[int, int]:
    """(I, N) of "I/N", 1 <= I <= N; ValueError otherwise."""
    m = SHARD.match(text or "")
    if not m:
        raise ValueError(f"--shard {text!r}: expected I/N, e.g. 2/3")
    index, count = int(m.group(1)), int(m.group(2))
    if count < 1 or not 1 <= index <= count:
        raise ValueError(f"--shard {text!r}: I must be 1..N")
    return index, count


class Durations:
    """Measured seconds per (target, case, client), and the estimate of a row never measured."""

    def __init__(self, seconds: dict[tuple[str, str, str], float] | None = None, source: str = "") -> None:
        self.seconds = dict(seconds or {})
        self.source = source
        self._by_case: dict[tuple[str, str], list[float]] = {}
        for (target, case, _client), s in self.seconds.items():
            self._by_case.setdefault((target, case), []).append(s)
            base = split_name(target)[0]
            if base != target:
                self._by_case.setdefault((base, case), []).append(s)

    @classmethod
    def load(cls, paths: Iterable[str | Path]) -> "Durations":
        """From durations files (JSON: target -> case -> client -> seconds) and results
        directories (their rows' duration_s, averaged over the runs given)."""
        sums: dict[tuple[str, str, str], list[float]] = {}
        names = []
        for p in paths:
            p = Path(p)
            names.append(p.name)
            if p.is_dir() or p.name == ResultsFile.NAME:
                for row in ResultsFile(p if p.is_dir() else p.parent).read():
                    sums.setdefault((row.target, row.case, row.client), []).append(row.duration_s)
            else:
                data = json.loads(p.read_text(encoding="utf-8"))
                for target, cases in (data.get("seconds") or {}).items():
                    for case, clients in cases.items():
                        for client, s in clients.items():
                            sums.setdefault((target, case, client), []).append(float(s))
        return cls({k: sum(v) / len(v) for k, v in sums.items()}, ", ".join(names))

    def to_json(self) -> str:
        nested: dict[str, dict[str, dict[str, float]]] = {}
        for (target, case, client), s in sorted(self.seconds.items()):
            nested.setdefault(target, {}).setdefault(case, {})[client] = round(s, 2)
        return json.dumps({"about": "measured seconds per target, case and client (kconform durations); "
                                    "--shard balances by them", "seconds": nested}, indent=1) + "\n"

    def estimate(self, target: str, case: str, client: str, cost_class: int) -> float:
        exact = self.seconds.get((target, case, client))
        if exact is None:
            exact = self.seconds.get((split_name(target)[0], case, client))
        if exact is not None:
            return exact
        others = self._by_case.get((target, case)) or self._by_case.get((split_name(target)[0], case))
        if others:
            return sum(others) / len(others)
        return GUESS_SECONDS.get(cost_class, GUESS_SECONDS[0])


@dataclass(frozen=True)
class Assignment:
    """Which shard runs each unit (case, client), and the seconds each shard is expected to take."""

    count: int
    shard_of: dict[tuple[str, str], int]
    seconds: list[float]

    def digest(self) -> str:
        """The same for every shard of one split: a merge can tell shards of different splits."""
        text = "\n".join(f"{case}|{client}|{i}" for (case, client), i in sorted(self.shard_of.items()))
        return hashlib.sha1(f"{self.count}\n{text}".encode()).hexdigest()[:12]


def assign(units: dict[tuple[str, str], float], count: int) -> Assignment:
    """Split the units (unit -> seconds) into `count` shards: longest first, each to the shard
    with the least seconds so far (ties: the lower shard); deterministic."""
    loads = [0.0] * count
    shard_of: dict[tuple[str, str], int] = {}
    for unit, s in sorted(units.items(), key=lambda kv: (-kv[1], kv[0])):
        i = min(range(count), key=lambda k: (loads[k], k))
        shard_of[unit] = i + 1
        loads[i] += s
    return Assignment(count, shard_of, [round(x, 1) for x in loads])


def split(rows: list, count: int, durations: Durations, cost_class) -> Assignment:
    """The assignment of a run's planned rows (runner.PlannedRow) to `count` shards."""
    units: dict[tuple[str, str], float] = {}
    for r in rows:
        s = (NOT_APPLICABLE_SECONDS if r.how.not_applicable is not None
             else durations.estimate(r.target, r.case.id, r.client, cost_class(r.case)))
        units[(r.case.id, r.client)] = units.get((r.case.id, r.client), 0.0) + s
    return assign(units, count)
