"""Anomalies a client's own requests explain, proved from the proxy's transcript.

The checker names what the system of broker and clients did wrong; whose fault it is needs the
wire. Some anomalies come of a client breaking the protocol in a way no broker can detect, and
the proxy saw the client do it. Saying so by pattern ("Sarama and misattributed_ack again")
would hide the next broker bug that looks alike, so an anomaly counts as the client's only when
the requests that prove it are in the transcript, for the very records the anomaly names:

- `reused_sequence` (explains `misattributed_ack`): the producer sent a batch of new records
  with the producer id, epoch and base sequence of a batch of other records it had sent to the
  same partition before, and the earlier one is in the log. A broker keys its deduplication on
  exactly those three numbers (Kafka's ProducerStateManager): it answers the second batch as a
  duplicate of the first, with the first one's offset, and the client reports its new record
  written where the old one sits. Sarama 1.60.2 did so after reconnecting (seed 303).
- `sent_after_end` (explains `aborted_read`): every Produce request carrying the records of a
  transaction reached the wire after the client had reported that transaction's abort done (or
  the broker had answered its EndTxn(abort), whichever came first). The
  records then belong to whatever transaction the producer has open when they land -- under
  transaction version 1 a batch names no transaction, so a broker cannot tell -- and become
  visible when that one commits. KafkaJS 2.2.4 answered abort() while a send of the aborted
  transaction was still being retried against a restarted node (seed 301).
- `commit_across_rebalance` (explains `duplicate` of a copier's output): the copier's first
  transaction holding the copy began before its group rebalanced and committed its offsets
  (TxnOffsetCommit) in the new generation, which had restarted from the offsets committed
  before -- so the same input was copied again by a later transaction. KIP-447's rule is to
  abort a transaction whose input partitions were revoked; Sarama 1.60.2 commits it under the
  new generation (seed 502: generation 41's JoinGroup answered 8 s into a transaction begun in
  generation 40).
- `unstable_offsets_read` (explains `duplicate` of a copier's output): before the copier's second
  copy began, its group's offsets were fetched without RequireStable and answered at or before
  the input record, though the first copy's transaction had committed offsets past it and its
  EndTxn(commit) had been answered: offsets whose markers were not yet written (a restarted
  coordinator completing the commit), which Kafka answers without RequireStable as the older
  committed ones -- KIP-447's RequireStable exists for exactly this. Sarama 1.60.2 never sets it.

A row whose anomalies are all explained so fails with the client's flaw as its reason
(Row.client_flaw); one with any other anomaly stays an unexplained failure, and the flaws found
are kept beside it.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from broker_impl.codec import API

from .asked import Asked
from .batches import Batch, request_batches
from .checker import Anomaly
from .history import pairs

REUSED_SEQUENCE = "reused_sequence"
SENT_AFTER_END = "sent_after_end"
COMMIT_ACROSS_REBALANCE = "commit_across_rebalance"
UNSTABLE_OFFSETS_READ = "unstable_offsets_read"
#: Which anomaly kind each flaw can cause.
EXPLAINS = {"misattributed_ack": REUSED_SEQUENCE, "aborted_read": SENT_AFTER_END,
            "duplicate": COMMIT_ACROSS_REBALANCE}
#: What each flaw is, for the row's reason and the docs.
MEANING = {
    REUSED_SEQUENCE: "sent new records under the producer id, epoch and base sequence of a batch already "
                     "written (the broker answers it as that batch's duplicate)",
    SENT_AFTER_END: "sent records of a transaction after reporting its abort done (they land in the "
                    "producer's next transaction)",
    COMMIT_ACROSS_REBALANCE: "committed a transaction begun before its group rebalanced, under the new "
                             "generation, which had restarted from older offsets (its input copied twice)",
    UNSTABLE_OFFSETS_READ: "resumed from offsets fetched without RequireStable while its own committed "
                           "transaction's offsets were not yet materialised (its input copied twice)",
}
JOIN_KEY = API["JoinGroup"].key
OFFSET_FETCH_KEY = API["OffsetFetch"].key
END_TXN_KEY = API["EndTxn"].key
TXN_OFFSET_COMMIT_KEY = API["TxnOffsetCommit"].key
PRODUCE_KEY = API["Produce"].key


@dataclass
class Flaw:
    """A client's protocol violation behind some anomalies, and the requests that show it."""

    kind: str
    client: str
    worker: str
    anomaly: str
    evidence: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "client": self.client, "worker": self.worker, "anomaly": self.anomaly,
                "meaning": MEANING[self.kind], "evidence": self.evidence[:10]}


@dataclass
class Explanation:
    """The flaws found, and whether they account for every anomaly of the row."""

    flaws: list[Flaw]
    complete: bool

    def reason(self) -> str:
        """`<client> <flaw>` for each flaw, e.g. `sarama reused_sequence`."""
        return ", ".join(sorted({f"{f.client} {f.kind}" for f in self.flaws}))


def produce_batches(lines: Iterable[dict], decode: Callable[[dict], dict | None], wanted: set[str],
                    unmap: Callable[[str], str]) -> dict[str, list[Batch]]:
    """value -> every batch that carried it, in the order the requests reached the proxy, for
    the values in `wanted` (the records whose story an anomaly tells)."""
    out: dict[str, list[Batch]] = defaultdict(list)
    for line in lines:
        if line.get("dir") != "c2b" or line.get("api_key") != PRODUCE_KEY:
            continue
        frame = decode(line)
        if frame is None or frame["fields"] is None:
            continue
        for b in request_batches(frame["fields"], t=float(line.get("t") or 0.0), unmap=unmap, values=True):
            for v in b.values:
                if v in wanted:
                    out[v].append(b)
    return out


def _reused(ev: dict[str, Any], sent: dict[str, list[Batch]]) -> dict[str, Any] | None:
    """The two batches proving `reused_sequence` for one misattributed_ack evidence item."""
    value, there, partition = ev.get("value"), ev.get("there"), ev.get("partition")
    for new in sent.get(value, ()):
        for old in sent.get(there, ()):
            if (old.t <= new.t and old.partition == new.partition == partition and value not in old.values
                    and (old.producer_id, old.epoch, old.base_sequence) == (new.producer_id, new.epoch,
                                                                             new.base_sequence)):
                return {"value": value, "partition": partition, "offset": ev.get("offset"),
                        "producer_id": new.producer_id, "epoch": new.epoch, "base_sequence": new.base_sequence,
                        "written": {"t": old.t, "values": list(old.values[:5])},
                        "reused": {"t": new.t, "values": list(new.values[:5])}}
    return None


def _after_end(txn_ev: dict[str, Any], sent: dict[str, list[Batch]], aborts: dict[str, float],
               groups: "_Groups") -> dict[str, Any] | None:
    """The requests proving `sent_after_end` for one aborted transaction's visible records: each
    first sent after the abort was done -- as the client reported it (its abort answered ok,
    or, for a transaction whose commit was never sent, the abort the worker sent then), or as
    the broker answered the producer's EndTxn(abort), whichever came first."""
    completion = txn_ev.get("completion") or {}
    invoke = txn_ev.get("invoke") or {}
    values = txn_ev.get("values") or []
    if not values or txn_ev.get("count", len(values)) > len(values):
        return None
    if completion.get("type") == "ok":
        ended = float(completion.get("time", 0.0))
    elif txn_ev.get("txn") in aborts:
        ended = aborts[txn_ev["txn"]]
    else:
        return None
    tid = (invoke.get("value") or {}).get("tid")
    answered = [t for t in groups.aborted.get(tid, ()) if float(invoke.get("time", 0.0)) <= t <= ended]
    if answered:
        ended = min(answered)
    first = {}
    for v in values:
        times = [b.t for b in sent.get(v, ())]
        if not times or min(times) <= ended:
            return None
        first[v] = round(min(times), 4)
    return {"txn": txn_ev.get("txn"), "abort_done_at": ended, "first_sent_at": first}


def _aborts(events: list[dict]) -> dict[str, float]:
    """transaction name -> when an abort the worker sent for it (end_txn, commit false) was
    answered ok."""
    out: dict[str, float] = {}
    for inv, done in pairs(events):
        v = inv.get("value") or {}
        if inv.get("f") == "end_txn" and done is not None and done["type"] == "ok" and v.get("commit") is False:
            out.setdefault(str(v.get("txn")), done["time"])
    return out


@dataclass
class _Groups:
    """What the transcript says of the groups: when each generation began (JoinGroup answered),
    and every TxnOffsetCommit (transactional id -> [(time, group, generation)])."""

    began: dict[tuple[str, int], float] = field(default_factory=dict)
    commits: dict[str, list[tuple[float, str, int]]] = field(default_factory=dict)
    #: transactional id -> when each EndTxn(abort) of it was answered NONE
    aborted: dict[str, list[float]] = field(default_factory=dict)
    #: transactional id -> when each EndTxn(commit) of it was answered NONE
    committed: dict[str, list[float]] = field(default_factory=dict)
    #: OffsetFetch answers: (time, group, require_stable, {(topic, partition): offset})
    fetched: list[tuple[float, str, bool, dict[tuple[str, int], int]]] = field(default_factory=list)


def group_timeline(lines: Iterable[dict], decode: Callable[[dict], dict | None],
                   unmap: Callable[[str], str]) -> _Groups:
    out = _Groups()
    asked: Asked[Any] = Asked()
    for line in lines:
        key = line.get("api_key")
        if key not in (JOIN_KEY, TXN_OFFSET_COMMIT_KEY, END_TXN_KEY, OFFSET_FETCH_KEY):
            continue
        frame = decode(line)
        if frame is None or frame["fields"] is None:
            continue
        f, t = frame["fields"], float(line.get("t") or 0.0)
        if key == END_TXN_KEY:
            if line.get("dir") == "c2b":
                asked.ask(line, (
                    unmap(str(f.get("transactional_id"))), bool(f.get("committed"))))
            else:
                tid, commit = asked.answered(line, (None, False))
                if tid is not None and f.get("error_code") == "NONE":
                    (out.committed if commit else out.aborted).setdefault(tid, []).append(t)
        elif key == OFFSET_FETCH_KEY:
            if line.get("dir") == "c2b":
                groups = [g.get("group_id") for g in f.get("groups") or ()] or [f.get("group_id")]
                asked.ask(line, (
                    unmap(str(groups[0])), bool(f.get("require_stable"))))
            else:
                group, stable = asked.answered(line, (None, False))
                answered = {(unmap(str(tp.get("name"))), p.get("partition_index")): p.get("committed_offset")
                            for g in (f.get("groups") or [f]) for tp in g.get("topics") or ()
                            for p in tp.get("partitions") or () if p.get("error_code") == "NONE"}
                if group is not None and answered:
                    out.fetched.append((t, group, stable, answered))
        elif key == TXN_OFFSET_COMMIT_KEY:
            if line.get("dir") == "c2b":
                out.commits.setdefault(unmap(str(f.get("transactional_id"))), []).append(
                    (t, unmap(str(f.get("group_id"))), int(f.get("generation_id", -1))))
        elif line.get("dir") == "c2b":
            asked.ask(line, unmap(str(f.get("group_id"))))
        else:
            group = asked.answered(line)
            if group is not None and f.get("error_code") == "NONE":
                out.began.setdefault((group, int(f.get("generation_id", -1))), t)
    return out


def _copies(events: list[dict]) -> dict[str, list[dict]]:
    """copy value -> the committed transactions (invoke time, completion time, name, transactional
    id) whose records hold it, oldest first."""
    out: dict[str, list[dict]] = defaultdict(list)
    for inv, done in pairs(events):
        if inv.get("f") != "txn" or done is None or done["type"] != "ok" or (done.get("value") or {}).get("end") != "commit":
            continue
        for r in (inv.get("value") or {}).get("records") or []:
            if isinstance(r[0], str) and "@" in r[0]:
                out[r[0]].append({"invoked": inv["time"], "done": done["time"], "txn": inv["value"].get("txn"),
                                  "tid": inv["value"].get("tid"), "group": inv["value"].get("group"),
                                  "consumed": inv["value"].get("consumed") or []})
    return out


def _across(ev: dict[str, Any], copies: dict[str, list[dict]], groups: _Groups) -> dict[str, Any] | None:
    """The transaction and the rebalance proving `commit_across_rebalance` for one duplicate copy."""
    value, writers = ev.get("value"), ev.get("writers") or []
    made = copies.get(value) or []
    if not isinstance(value, str) or "@" not in value or len(writers) != 1 or len(made) < 2:
        return None
    first = made[0]
    mine = [c for c in groups.commits.get(first["tid"], ()) if first["invoked"] <= c[0] <= first["done"]]
    if not mine:
        return None
    committed_at, group, generation = mine[-1]
    began = groups.began.get((group, generation))
    if began is None or not first["invoked"] < began < committed_at:
        return None
    return {"value": value, "txn": first["txn"], "invoked_at": first["invoked"], "group": group,
            "generation": generation, "generation_began_at": began, "offsets_committed_at": committed_at,
            "copied_again_by": made[1]["txn"]}


def _unstable(ev: dict[str, Any], copies: dict[str, list[dict]], groups: _Groups) -> dict[str, Any] | None:
    """The OffsetFetch proving `unstable_offsets_read` for one duplicate copy: before the copier's
    second copy began, its group's offsets were fetched without RequireStable and answered at or
    before the input record, although the first copy's transaction had committed offsets past
    it (TxnOffsetCommit) and its EndTxn(commit) had been answered -- offsets not yet
    materialised, which only RequireStable waits for."""
    value, writers = ev.get("value"), ev.get("writers") or []
    made = copies.get(value) or []
    if not isinstance(value, str) or "@" not in value or len(writers) != 1 or len(made) < 2:
        return None
    first, again = made[0], made[1]
    where = value.rpartition("@")[2]
    partition, _, offset = where.partition(":")
    topics = {c[0] for c in first["consumed"] if str(c[1]) == partition and str(c[2]) == offset}
    if len(topics) != 1 or not offset.isdigit():
        return None
    tp, off = (topics.pop(), int(partition)), int(offset)
    done = [t for t in groups.committed.get(first["tid"], ()) if first["invoked"] <= t <= first["done"] + 1.0]
    moved = [(t, g) for t, g, _gen in groups.commits.get(first["tid"], ()) if first["invoked"] <= t <= first["done"]]
    if not done or not moved:
        return None
    group = moved[-1][1]
    reads = [(t, stable, answered[tp]) for t, g, stable, answered in groups.fetched
             if g == group and tp in answered and min(done) < t < again["invoked"]]
    if not reads:
        return None
    t, stable, got = reads[-1]
    if stable or got is None or got > off:
        return None
    return {"flaw": UNSTABLE_OFFSETS_READ, "value": value, "txn": first["txn"], "commit_answered_at": min(done),
            "group": group,
            "partition": f"{tp[0]}-{tp[1]}", "fetched_at": t, "require_stable": stable, "answered": got,
            "copied_again_by": again["txn"]}


def explain(anomalies: list[Anomaly], lines: Iterable[dict], decode: Callable[[dict], dict | None],
            clients: dict[str, str], unmap: Callable[[str], str] = str,
            events: Iterable[dict] = ()) -> Explanation | None:
    """The client flaws behind the row's anomalies (`clients`: worker -> client name; `lines`:
    the transcript; `events`: the history); None when no anomaly is of a kind a flaw can cause
    or none was proved."""
    candidates = [a for a in anomalies if a.kind in EXPLAINS]
    if not candidates:
        return None
    lines, events = list(lines), list(events)
    copies = _copies(events) if any(a.kind == "duplicate" for a in candidates) else {}
    aborts = _aborts(events)
    groups = group_timeline(lines, decode, unmap)
    wanted: set[str] = set()
    for a in candidates:
        for ev in a.evidence:
            if a.kind != "duplicate":
                wanted |= {x for x in (ev.get("value"), ev.get("there")) if isinstance(x, str)}
            wanted |= {x for x in ev.get("values") or () if isinstance(x, str)}
    sent = produce_batches(lines, decode, wanted, unmap)
    flaws: dict[tuple[str, str], Flaw] = {}
    explained_all = True
    for a in candidates:
        proved_txns: set[str] = set()
        proofs: list[tuple[str, dict]] = []
        for ev in a.evidence:
            if a.kind == "misattributed_ack":
                proof = _reused(ev, sent)
            elif a.kind == "duplicate":
                proof = _across(ev, copies, groups) or _unstable(ev, copies, groups)
            elif "values" in ev:
                proof = _after_end(ev, sent, aborts, groups)
                if proof is not None:
                    proved_txns.add(str(ev.get("txn")))
            else:
                proof = None      # a live read of the same transaction: judged below
            if proof is not None:
                proofs.append((_worker(ev), proof))
        # a reader's live read of an aborted transaction is explained with that transaction
        unexplained = [ev for ev in a.evidence
                       if not (a.kind == "aborted_read" and "values" not in ev and ev.get("txn") in proved_txns)
                       and not any(p is not None and _matches(ev, p) for _, p in proofs)]
        if unexplained or a.count > len(a.evidence):
            explained_all = False
        for worker, proof in proofs:
            kind = proof.pop("flaw", EXPLAINS[a.kind])
            f = flaws.get((worker, kind)) or flaws.setdefault((worker, kind), Flaw(kind, clients.get(worker, "?"),
                                                                                   worker, a.kind))
            f.evidence.append(proof)
    if not flaws:
        return None
    complete = explained_all and all(a.kind in EXPLAINS for a in anomalies)
    return Explanation(list(flaws.values()), complete)


def _worker(ev: dict[str, Any]) -> str:
    """Whose record an evidence item names: a copy's writer; values are `<worker>-<n>`;
    transactions `<worker>/<n>`."""
    if len(ev.get("writers") or ()) == 1:
        return ev["writers"][0]
    if isinstance(ev.get("value"), str):
        return ev["value"].rsplit("-", 1)[0]
    return str(ev.get("txn", "")).split("/")[0]


def _matches(ev: dict[str, Any], proof: dict[str, Any]) -> bool:
    if "copied_again_by" in proof:
        return ev.get("value") == proof["value"]
    if "value" in proof:
        return ev.get("value") == proof["value"] and ev.get("partition") == proof["partition"]
    return ev.get("txn") == proof.get("txn") and "values" in ev
