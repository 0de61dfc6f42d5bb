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

KAFKA-20357 (Kafka up to 4.4.0; apache/kafka#22096, merged 2026-04-19, in no release yet): under
transaction version 2 an EndTxn bumps the producer epoch when the coordinator writes
PrepareCommit/PrepareAbort, and the coordinator recognises a producer that retries with the epoch
it had (InitProducerId with its producer id and that epoch, KIP-360/KIP-890) by the previous epoch
it keeps -- in memory only: TransactionLogValue has no field for it. A producer whose EndTxn was
never answered (its coordinator died after writing Prepare*) retries at the new coordinator, which
loaded the transaction from the log without the previous epoch, and is answered PRODUCER_FENCED:
`unexpected_fencing`. Proved on the wire (``explain_on_wire``), not from a broker log, so on any
target: the embedded broker keeps the transaction log Kafka 4.3.1 writes and fails the same way
(stop 37, workloads/cluster seed 604); a row so explained fails with the bug as its reason.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from .asked import Asked
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
KAFKA_20357 = "KAFKA-20357"
#: EndTxn from this version on is transaction version 2 (TransactionVersion.transactionVersionForEndTxn).
END_TXN_TV2 = 5
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
    #: KAFKA-20357: per fenced process, the unanswered EndTxn and the InitProducerId fenced after it.
    fenced_retries: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key}
        if self.fenced_retries:
            out["fenced_retries"] = self.fenced_retries
        else:
            out["skipped_markers"] = [{"transactional_id": t, "partition": p} for t, p in self.skipped]
            out["log_lines"] = self.log_lines[:10]
        return out


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


# ============================================================================ KAFKA-20357
def _int(value: Any) -> int:
    return value if isinstance(value, int) else -1


def _epoch_retries(lines: Iterable[dict], decode: Callable[[dict], dict | None], unmap: Callable[[str], str]
                   ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """From the transcript: every TV2 EndTxn with whether it was answered NONE, and every
    InitProducerId that named a producer id and epoch (a retry, KIP-360) with its answer."""
    ends: list[dict[str, Any]] = []
    inits: list[dict[str, Any]] = []
    asked: Asked[dict[str, Any]] = Asked()
    for line in lines:
        api = line.get("api_name")
        if api not in ("EndTxn", "InitProducerId"):
            continue
        frame = decode(line)
        if frame is None or frame.get("fields") is None:
            continue
        f = frame["fields"]
        if line.get("dir") == "c2b":
            if api == "EndTxn" and int(line.get("api_version") or 0) >= END_TXN_TV2:
                ask = {"t": float(line.get("t") or 0.0), "node": line.get("node"), "answer": None,
                       "tid": unmap(f.get("transactional_id") or ""), "producer_id": f.get("producer_id"),
                       "epoch": f.get("producer_epoch"), "commit": f.get("committed")}
                ends.append(ask)
                asked.ask(line, ask)
            elif api == "InitProducerId" and _int(f.get("producer_id")) >= 0:
                ask = {"t": float(line.get("t") or 0.0), "node": line.get("node"), "answer": None,
                       "tid": unmap(f.get("transactional_id") or ""), "producer_id": f.get("producer_id"),
                       "epoch": f.get("producer_epoch")}
                inits.append(ask)
                asked.ask(line, ask)
        else:
            ask = asked.answered(line)
            if ask is not None:
                ask["answer"] = f.get("error_code")
                ask["answered_at"] = float(line.get("t") or 0.0)
    return ends, inits


def _lost_end_then_fenced(tids: set[str], at: float, ends: list[dict[str, Any]], inits: list[dict[str, Any]]
                          ) -> dict[str, Any] | None:
    """The proof for one fenced process: its last InitProducerId retry before ``at`` (the time it
    reported PRODUCER_FENCED) was answered PRODUCER_FENCED, and an earlier TV2 EndTxn of the same
    producer id and epoch got no answer at all (its coordinator went away, maybe after writing
    Prepare*) and none of them was answered NONE -- so the epoch the coordinator bumped to, the
    producer never learnt. An EndTxn answered with an error wrote nothing: it proves nothing."""
    fenced = [i for i in inits if i["tid"] in tids and i["answer"] == "PRODUCER_FENCED" and i["t"] <= at]
    if not fenced:
        return None
    init = fenced[-1]
    same = [e for e in ends if e["tid"] == init["tid"] and e["t"] < init["t"]
            and (e["producer_id"], e["epoch"]) == (init["producer_id"], init["epoch"])]
    lost = [e for e in same if e["answer"] is None]
    if not lost or any(e["answer"] == "NONE" for e in same):
        return None
    end = lost[-1]
    return {"transactional_id": init["tid"], "producer_id": init["producer_id"], "epoch": init["epoch"],
            "end_txn": {"t": round(end["t"], 4), "node": end["node"], "commit": end["commit"], "answer": None},
            "init_producer_id": {"t": round(init["t"], 4), "node": init["node"], "answer": init["answer"]}}


def explain_on_wire(anomalies: list[Anomaly], events: list[dict[str, Any]], lines: Iterable[dict],
                    decode: Callable[[dict], dict | None], unmap: Callable[[str], str] = str) -> Explained | None:
    """KAFKA-20357 when every anomaly is an `unexpected_fencing` whose fenced process the transcript
    shows retrying, after a TV2 EndTxn that was never answered, with InitProducerId at that
    EndTxn's producer id and epoch, answered PRODUCER_FENCED; None otherwise."""
    if not anomalies or any(a.kind != "unexpected_fencing" or a.count > len(a.evidence) for a in anomalies):
        return None
    events = list(events)
    tids = _worker_tids(events)
    ends, inits = _epoch_retries(lines, decode, unmap)
    proofs = []
    for a in anomalies:
        for ev in a.evidence:
            event = ev.get("event") or {}
            if (event.get("error") or {}).get("name") != "PRODUCER_FENCED":
                return None
            process = str(event.get("process", ""))
            proof = _lost_end_then_fenced(tids.get(process.split("#")[0], set()), float(event.get("time") or 0.0),
                                          ends, inits)
            if proof is None:
                return None
            proofs.append({"process": process, **proof})
    return Explained(KAFKA_20357, fenced_retries=proofs)
