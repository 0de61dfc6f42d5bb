"""Anomalies of a reference row that a known Apache Kafka bug explains, proved from the broker's log.

A workload row on Apache Kafka can fail for a bug of Kafka itself. Saying so by pattern ("a lost
commit right after a node was killed looks like KAFKA-20734") would hide the next new bug that
looks alike, so an anomaly counts as explained only when the broker wrote down, in its own log,
the step the bug consists of, for the very partitions (and transactional id) the anomaly names.

KAFKA-20734 (Kafka 4.3.0 - 4.4.0): the TransactionMarkerChannelManager finds no leader for a
partition of a transaction it completes (4.3's KRaftMetadataCache answers a partition whose leader
is -1 as if it did not exist, as it is while a restarted single node replays its own fencing),
logs "Couldn't find leader endpoint for partitions Set(...) while trying to send transaction markers
for <transactional id>, these partitions are likely deleted already and hence can be skipped", and
writes CompleteCommit without those markers. A workload never deletes a topic, so that line naming
one of its partitions is the bug. What the checker sees afterwards: the records of the committed
transaction stay undecided on those partitions (`hanging_transaction`) until a later abort of the
same producer closes them as aborted (`lost_write`: acknowledged commits missing from
read_committed). A copier's commit whose marker on __consumer_offsets was skipped leaves its
offsets pending for good: the group shows none of them, while the output is there
(`output_without_offsets`) and the copiers seem never to have copied (`stalled`) -- explained
when the log names a __consumer_offsets partition skipped for a copier's transactional id (stop
36, workloads/mixed seed 504 on Kafka 4.3.1). Only these kinds can come of it; a row with any
other anomaly is not explained, nor one whose anomalies were seen more often than their evidence
shows.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from .checker import Anomaly

#: KAFKA-20734's own log line (TransactionMarkerChannelManager, Kafka 4.3.x / 4.4.0).
SKIPPED_MARKERS = re.compile(   # Scala prints a set of more than four partitions as HashSet(...)
    r"Couldn't find leader endpoint for partitions (?:Hash)?Set\((?P<partitions>[^)]*)\) while trying to send "
    r"transaction markers for (?P<tid>\S+?), these partitions are likely deleted already")
#: The coordinator's line for every InitProducerId: which producer id a transactional id holds.
INITIALIZED = re.compile(r"Initialized transactionalId (?P<tid>\S+) with producerId (?P<pid>\d+)")
#: What the broker-log lines this module reads contain (a filter for reading big logs).
NEEDLES = ("likely deleted already", "Initialized transactionalId")
KAFKA_20734 = "KAFKA-20734"
#: The anomaly kinds a commit without some of its markers can cause.
EXPLAINABLE = frozenset({"lost_write", "hanging_transaction", "output_without_offsets", "stalled"})
#: Those a copier's commit whose marker on __consumer_offsets was skipped causes: its offsets stay
#: pending for good, so the group never shows them (its output is there, its offsets are not).
GROUP_OFFSETS = frozenset({"output_without_offsets", "stalled"})
OFFSETS_TOPIC = "__consumer_offsets"


@dataclass
class Explained:
    """The Kafka bug behind every anomaly of a row, and the log lines that show it."""

    key: str
    #: (transactional id, partition) pairs whose markers the coordinator skipped, as the log says.
    skipped: list[tuple[str, str]] = field(default_factory=list)
    log_lines: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "skipped_markers": [{"transactional_id": t, "partition": p} for t, p in self.skipped],
                "log_lines": self.log_lines[:10]}


def skipped_markers(log_lines: Iterable[str]) -> tuple[set[tuple[str, str]], list[str]]:
    """Every (transactional id, partition) whose marker a coordinator skipped, and those lines.
    Names are as the lines give them: unmap them to the case's names first."""
    pairs: set[tuple[str, str]] = set()
    lines: list[str] = []
    for line in log_lines:
        m = SKIPPED_MARKERS.search(line) if "likely deleted already" in line else None
        if m is None:
            continue
        lines.append(line.rstrip("\n"))
        for p in m.group("partitions").split(","):
            if p.strip():
                pairs.add((m.group("tid"), p.strip()))
    return pairs, lines


def producer_tids(log_lines: Iterable[str]) -> dict[int, set[str]]:
    """producer id -> the transactional ids the coordinator gave it (its INFO line per InitProducerId)."""
    out: dict[int, set[str]] = {}
    for line in log_lines:
        m = INITIALIZED.search(line) if "Initialized transactionalId" in line else None
        if m is not None:
            out.setdefault(int(m.group("pid")), set()).add(m.group("tid"))
    return out


def _worker_tids(events: Iterable[dict[str, Any]]) -> dict[str, set[str]]:
    """The transactional ids each worker initialised (init's invocation names it)."""
    out: dict[str, set[str]] = {}
    for e in events:
        if e.get("f") == "init" and e.get("type") == "invoke" and isinstance(e.get("value"), dict):
            tid = e["value"].get("tid")
            if tid:
                out.setdefault(e.get("worker", ""), set()).add(tid)
    return out


def _copier_workers(events: Iterable[dict[str, Any]]) -> set[str]:
    """The workers that consume in a group (they subscribe) -- a workload's copiers."""
    return {e.get("worker", "") for e in events if e.get("f") == "subscribe"}


def explain(anomalies: list[Anomaly], events: list[dict[str, Any]], log_lines: Iterable[str]) -> Explained | None:
    """KAFKA-20734 when every anomaly is a lost commit or a hanging partition whose markers the log
    says were skipped for that very transaction (a lost commit: its own transactional id; a hanging
    partition: the transactional id of each producer whose open transaction holds it, as the
    coordinator's "Initialized transactionalId" lines name the producer ids); None when there is no
    anomaly, or any one is of another kind, or not proved so."""
    if not anomalies or any(a.kind not in EXPLAINABLE for a in anomalies):
        return None
    log_lines = list(log_lines)
    skipped, lines = skipped_markers(log_lines)
    pids = producer_tids(log_lines)
    if not skipped:
        return None
    tids = _worker_tids(events)
    copier_tids = {t for w in _copier_workers(events) for t in tids.get(w, ())}
    offsets_skipped = {(t, p) for t, p in skipped if t in copier_tids and p.startswith(OFFSETS_TOPIC + "-")}
    used: set[tuple[str, str]] = set()
    for a in anomalies:
        if a.kind in GROUP_OFFSETS:
            # a copier's transaction whose marker on __consumer_offsets was skipped: the group's
            # offsets of it (and of every later commit of that producer) never become visible
            if not offsets_skipped:
                return None
            used |= offsets_skipped
            continue
        if a.count > len(a.evidence):
            return None
        for ev in a.evidence:
            partition = ev.get("partition")
            if a.kind == "hanging_transaction":
                holders = [p["producer_id"] for p in ev.get("producers") or () if p.get("current_txn_start_offset", -1) >= 0]
                if not holders:
                    return None
                for pid in holders:
                    mine = {(t, partition) for t in pids.get(pid, ())} & skipped
                    if not mine:
                        return None
                    used |= mine
                continue
            commit = ev.get("commit")
            if not isinstance(commit, dict) or commit.get("type") != "ok":
                return None     # a plain send's loss, or a commit not answered ok: not this bug
            worker = str(commit.get("process", "")).split("#")[0]
            mine = {(t, partition) for t in tids.get(worker, ())} & skipped
            if not mine:
                return None
            used |= mine
    return Explained(KAFKA_20734, sorted(used), lines)
