"""The checker: named anomalies in a workload's history and final state.

What it reads:
- the history (history.py): `send` (plain and idempotent producers), `txn` (a transaction of a
  transactional worker or a copier: its planned records at invocation, their offsets at
  completion), `end_txn` (the commit or abort request, so "was the commit ever sent" is known
  even when the process died), `poll` (what a reader or copier got), `init`
  (init_transactions), `lso` (the last stable offsets the runner sampled);
- the final state: both isolation levels read from offset 0 to the end by a fresh client once
  the workload settled (`reads`), the high watermarks and LSOs (`offsets`), and the copier
  groups' committed offsets (`group_offsets`) -- the shapes observe.py gives.

What a record is: every value a workload writes is unique (`<worker>-<n>`); a copier's output is
`<input value>@<partition>:<offset>`, unique per input position. So "the same record twice" and
"where did this record go" need no guessing.

A transaction's fate: committed when its commit answered ok; aborted when its abort answered ok
or its commit was never sent (`fail`, or a process that died first) -- a transaction can only
commit through an EndTxn(commit); unknown when the commit was sent and the answer was an error
or never came (`info`). Unknown transactions may end either way, but all of their records the
same way.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable

from .history import pairs

#: The anomalies, with what each means. A workload row passes when it has none.
ANOMALIES: dict[str, str] = {
    "lost_write": "an acknowledged write is not in the final read: a send answered ok, or a record of a "
                  "transaction whose commit answered ok",
    "duplicate": "a record is in the final read_committed read more than once (idempotent and transactional "
                 "writes, copier outputs), or an idempotent write is in the log twice",
    "aborted_read": "a read_committed read holds a record of a transaction that was aborted or whose commit "
                    "was never sent",
    "undecided_read": "a read_committed reader got a record before its transaction's commit was even sent",
    "torn_transaction": "some records of one transaction are visible to read_committed and others are not",
    "vanished_read": "a record a reader got during the run is not in the final read of that isolation level",
    "wrong_offset": "a record is not at the offset its acknowledgement gave",
    "misattributed_ack": "a client acknowledged a record with the offset where another record of the same producer "
                         "sits, and the acknowledged record is nowhere in the log (the client mixed up its "
                         "deliveries)",
    "offsets_without_output": "a copier group committed past an input record whose output is not in the "
                              "output topic",
    "output_without_offsets": "an output record exists for an input record the group's committed offset has "
                              "not passed",
    "nonmonotonic_read": "a reader's offsets on a partition went backwards or repeated within one process",
    "nonmonotonic_lso": "the last stable offset of a partition went backwards",
    "hanging_transaction": "at the end a partition's last stable offset stays below its high watermark: a "
                           "transaction nobody ends",
    "unexpected_error": "a broker answered an error code that cannot happen there outside a fault",
    "unexpected_fencing": "a transactional producer was fenced while no newer process held its "
                          "transactional.id and its transaction had not timed out",
    "stalled": "a copier group did not copy all of its input by the end (its committed offset stays below "
               "the last input record)",
}
#: Evidence kept per anomaly kind (the count goes on). Enough that a client's flaw behind a few
#: dozen anomalies can be proved for each (history/client_flaws.py: one item unkept, no proof).
MAX_EVIDENCE = 100
FENCED_ERRORS = frozenset({"PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"})


@dataclass
class Anomaly:
    kind: str
    message: str
    #: The operations and records that prove it (history events, final records, frames).
    evidence: list[dict[str, Any]] = field(default_factory=list)
    time: float | None = None
    #: How many times it was seen (the evidence keeps the first MAX_EVIDENCE).
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        d = {"kind": self.kind, "count": self.count, "message": self.message, "evidence": self.evidence}
        if self.time is not None:
            d["time"] = self.time
        return d


@dataclass
class Write:
    """One record a worker wrote (or tried to)."""

    value: str
    worker: str
    kind: str
    topic: str
    partition: int
    offset: int | None = None   # the acknowledgement's
    acked: bool = False
    txn: str | None = None      # "t1/4"
    event: int | None = None    # the invocation that wrote it


@dataclass
class Txn:
    name: str
    worker: str
    process: str
    tid: str | None
    start: float
    fate: str = "aborted"       # committed | aborted | unknown
    commit_sent_at: float | None = None
    commit_sent_index: int | None = None
    invoke: dict | None = None
    completion: dict | None = None
    values: list[str] = field(default_factory=list)
    consumed: list[list] = field(default_factory=list)


class _Found:
    def __init__(self) -> None:
        self.by_kind: dict[str, Anomaly] = {}

    def add(self, kind: str, message: str, evidence: dict[str, Any], time: float | None = None) -> None:
        a = self.by_kind.get(kind)
        if a is None:
            a = self.by_kind[kind] = Anomaly(kind, "", [], time, count=0)
        a.count += 1
        if len(a.evidence) < MAX_EVIDENCE:
            a.evidence.append({"what": message, **evidence})
        if a.time is None or (time is not None and time < a.time):
            a.time = time

    def result(self) -> list[Anomaly]:
        out = []
        for kind in ANOMALIES:
            a = self.by_kind.get(kind)
            if a is not None:
                a.message = f"{a.count} x {ANOMALIES[kind]}; first: {a.evidence[0]['what']}"
                out.append(a)
        return out


def check(events: list[dict], workers: dict[str, Any], final: dict[str, Any], *,
          extra: Iterable[Anomaly] = (),
          copier_groups: dict[str, tuple[list[str], str]] | None = None) -> list[Anomaly]:
    """Every anomaly of the history `events` against the `final` state (module doc).

    `workers`: worker name -> its WorkerDef (kind, config). `copier_groups`: group -> (input
    topics, output topic). `extra`: anomalies found elsewhere (the wire profile, the end phase's
    hanging transactions) to report with these."""
    found = _Found()
    writes, txns = _writes(events, workers)
    reads = final.get("reads") or {}
    committed = _positions(reads.get("read_committed") or {})
    uncommitted = _positions(reads.get("read_uncommitted") or {})
    shadowed = _behind_hanging(uncommitted, final.get("offsets") or {}) if "read_uncommitted" in reads else set()
    _lost_and_misplaced(found, writes, txns, committed, uncommitted, "read_uncommitted" in reads, shadowed)
    _duplicates(found, writes, reads, workers)
    _aborted_and_torn(found, writes, txns, committed, shadowed)
    _live_reads(found, events, writes, txns, committed, uncommitted, workers)
    _fencing(found, events, workers, txns)
    _lso(found, events)
    if copier_groups:
        _copies(found, copier_groups, reads.get("read_committed") or {}, final.get("group_offsets") or {})
    out = found.result()
    known = {a.kind for a in out}
    for a in extra:
        if a.kind in known:
            mine = next(x for x in out if x.kind == a.kind)
            mine.evidence += a.evidence[:MAX_EVIDENCE]
            mine.count += a.count
        else:
            out.append(a)
    return sorted(out, key=lambda a: list(ANOMALIES).index(a.kind) if a.kind in ANOMALIES else 99)


# ----------------------------------------------------------------------------- extraction
def _tp(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def _writes(events: list[dict], workers: dict[str, Any]) -> tuple[dict[str, list[Write]], dict[str, Txn]]:
    """value -> every attempt to write it (a copier writes an input record's copy again after an
    abort or a crash), and the transactions by name."""
    writes: dict[str, list[Write]] = defaultdict(list)
    txns: dict[str, Txn] = {}
    commits_sent: dict[str, dict] = {}
    for inv, done in pairs(events):
        f = inv["f"]
        if f == "end_txn" and (inv.get("value") or {}).get("commit"):
            commits_sent.setdefault(inv["value"]["txn"], inv)
        if f == "send":
            v = inv["value"]
            kind = getattr(workers.get(inv["worker"]), "kind", "producer")
            w = Write(v["v"], inv["worker"], kind, v["topic"], v["partition"], event=inv["index"])
            if done is not None and done["type"] == "ok":
                w.acked = True
                w.offset = (done.get("value") or {}).get("offset")
            writes[w.value].append(w)
        elif f == "txn":
            v = inv["value"] or {}
            t = Txn(v["txn"], inv["worker"], inv["process"], v.get("tid"), inv["time"], invoke=inv,
                    completion=done, consumed=v.get("consumed") or [])
            kind = getattr(workers.get(inv["worker"]), "kind", "transactional")
            offsets = {}
            if done is not None:
                for rec in (done.get("value") or {}).get("records") or []:
                    offsets[rec[0]] = rec[3]
            for value, topic, partition in v.get("records") or []:
                w = Write(value, inv["worker"], kind, topic, partition, txn=t.name, event=inv["index"])
                if offsets.get(value) is not None:
                    w.acked, w.offset = True, offsets[value]
                writes[value].append(w)
                t.values.append(value)
            txns[t.name] = t
    for t in txns.values():
        sent = commits_sent.get(t.name)
        if sent is not None:
            t.commit_sent_at, t.commit_sent_index = sent["time"], sent["index"]
        done = t.completion
        end = (done.get("value") or {}).get("end") if done is not None else None
        if done is not None and done["type"] == "ok" and end == "commit":
            t.fate = "committed"
        elif done is not None and done["type"] == "ok" and end == "abort":
            t.fate = "aborted"
        elif t.commit_sent_at is not None:
            t.fate = "unknown"
        else:
            t.fate = "aborted"  # its commit was never sent: it cannot have committed
    return dict(writes), txns


def _fates(value: str, writes: dict[str, list[Write]], txns: dict[str, Txn]) -> set[str]:
    """How the writes of `value` ended: `plain` for a write outside transactions, else the fates
    of the transactions that wrote it."""
    out = set()
    for w in writes.get(value, ()):
        out.add("plain" if w.txn is None else txns[w.txn].fate)
    return out


def _positions(reads: dict[str, list[dict]]) -> dict[str, list[tuple[str, int]]]:
    """value -> [(topic-partition, offset), ...] in a final read."""
    out: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for tp, records in reads.items():
        for r in records:
            v = r.get("value")
            if isinstance(v, str):
                out[v].append((tp, r.get("offset")))
    return out


def _ev(event: dict | None) -> dict[str, Any]:
    """An event as evidence: what an anomaly's reader needs, not the whole record list."""
    if event is None:
        return {}
    keep = {k: event[k] for k in ("index", "time", "process", "type", "f") if k in event}
    value = event.get("value")
    if isinstance(value, dict):
        keep["value"] = {k: (x if not isinstance(x, list) or len(x) <= 8 else f"{len(x)} items")
                         for k, x in value.items()}
    if "error" in event:
        keep["error"] = {k: event["error"].get(k) for k in ("name", "message") if k in event["error"]}
    return keep


# ----------------------------------------------------------------------------- anomalies
def _behind_hanging(uncommitted: dict, offsets: dict[str, dict]) -> set[str]:
    """The values the log has (read_uncommitted) at or past the final last stable offset of a
    partition whose LSO stays below its high watermark: a transaction nobody ends holds them from
    every read_committed reader. They are not lost, nor is a transaction with some of them torn:
    `hanging_transaction` reports the partition, and counting each record behind it again would
    bury real losses in the hang's shadow."""
    stuck = {tp: o["last_stable"] for tp, o in offsets.items()
             if isinstance(o, dict) and o.get("last_stable") is not None and o.get("high_watermark") is not None
             and o["last_stable"] < o["high_watermark"]}
    return {v for v, places in uncommitted.items()
            if any(tp in stuck and o is not None and o >= stuck[tp] for tp, o in places)}


def _lost_and_misplaced(found: _Found, writes: dict[str, list[Write]], txns: dict[str, Txn],
                        committed: dict, uncommitted: dict, have_uncommitted: bool,
                        shadowed: set[str] = frozenset()) -> None:
    log = uncommitted if have_uncommitted else committed
    at = {place: value for value, places in log.items() for place in places}   # (tp, offset) -> value
    for value, attempts in writes.items():
        for w in attempts:
            txn = txns.get(w.txn) if w.txn else None
            where = f"{w.topic}-{w.partition}"
            if txn is None and w.acked:
                there = at.get((where, w.offset))
                if not log.get(value) and there is not None and any(x.worker == w.worker for x in writes.get(there, ())):
                    found.add("misattributed_ack", f"{value} acknowledged at {where}@{w.offset} by {w.worker}, where "
                                                   f"its own {there} sits; {value} is not in the log",
                              {"value": value, "partition": where, "offset": w.offset, "there": there})
                elif have_uncommitted and not uncommitted.get(value):
                    found.add("lost_write", f"{value} acknowledged at {where}@{w.offset} by {w.worker} is not in "
                                            "the final read_uncommitted read",
                              {"value": value, "partition": where, "offset": w.offset})
                elif not committed.get(value) and value not in shadowed:
                    found.add("lost_write", f"{value} acknowledged at {where}@{w.offset} by {w.worker} (not in a "
                                            "transaction) is not in the final read_committed read",
                              {"value": value, "partition": where, "offset": w.offset})
            elif txn is not None and txn.fate == "committed" and not committed.get(value) and value not in shadowed:
                found.add("lost_write", f"{value} of transaction {txn.name}, whose commit answered ok, is not in "
                                        "the final read_committed read",
                          {"value": value, "partition": where, "offset": w.offset, "commit": _ev(txn.completion)},
                          txn.completion["time"] if txn.completion else None)
            # where the acknowledgement said it went: in the read_uncommitted read (every attempt
            # stays in the log), or without one in read_committed for what it must show
            if w.acked and w.offset is not None and (have_uncommitted or txn is None or txn.fate == "committed"):
                found_at = [o for tp, o in (log.get(value) or []) if tp == where]
                if found_at and w.offset not in found_at:
                    found.add("wrong_offset", f"{value} was acknowledged at {where}@{w.offset} but is at "
                                              f"{where}@{found_at[0]}", {"value": value, "acked": w.offset,
                                                                           "found": found_at})


def _duplicates(found: _Found, writes: dict[str, list[Write]], reads: dict, workers: dict[str, Any]) -> None:
    for iso in ("read_committed", "read_uncommitted"):
        seen: dict[str, list] = defaultdict(list)
        for tp, records in (reads.get(iso) or {}).items():
            for r in records:
                if isinstance(r.get("value"), str):
                    seen[r["value"]].append((tp, r.get("offset")))
        for value, where in seen.items():
            if len(where) < 2 or value not in writes:
                continue
            kinds = {w.kind for w in writes[value]}
            if "producer" in kinds:
                continue  # a plain producer's retries may write a record twice: allowed
            if iso == "read_uncommitted" and any(w.txn is not None for w in writes[value]):
                continue  # an aborted attempt stays in the log; read_committed is what counts
            found.add("duplicate", f"{value} is {len(where)} times in the final {iso} read: {where[:4]}",
                      {"value": value, "isolation": iso, "at": where[:8],
                       "writers": sorted({w.worker for w in writes[value]})})


def _aborted_and_torn(found: _Found, writes: dict[str, list[Write]], txns: dict[str, Txn], committed: dict,
                      shadowed: set[str] = frozenset()) -> None:
    for t in txns.values():
        # records of this transaction visible because no other write of them can explain it
        visible = [v for v in t.values if committed.get(v) and _fates(v, writes, txns) <= {"aborted", t.fate}]
        if t.fate == "aborted" and visible:
            why = "its abort answered ok" if t.completion and t.completion["type"] == "ok" else \
                "its commit was never sent"
            found.add("aborted_read", f"{len(visible)} record(s) of transaction {t.name} ({why}) are in the final "
                                      f"read_committed read, e.g. {visible[0]} at {committed[visible[0]][0]}",
                      {"txn": t.name, "values": visible[:5], "count": len(visible), "invoke": _ev(t.invoke),
                       "completion": _ev(t.completion)},
                      t.start)
        if t.fate == "unknown" and visible:
            acked = [v for v in t.values if any(w.acked and w.txn == t.name for w in writes[v])]
            missing = [v for v in acked if not committed.get(v) and v not in shadowed]
            if missing:
                found.add("torn_transaction", f"transaction {t.name}: {len(visible)} record(s) visible, "
                                              f"{len(missing)} acknowledged record(s) not, e.g. {missing[0]}",
                          {"txn": t.name, "visible": visible[:5], "missing": missing[:5],
                           "completion": _ev(t.completion)}, t.start)


def _live_reads(found: _Found, events: list[dict], writes: dict[str, list[Write]], txns: dict[str, Txn],
                committed: dict, uncommitted: dict, workers: dict[str, Any]) -> None:
    last: dict[tuple[str, str], int] = {}
    for e in events:
        if e["f"] != "poll" or e["type"] != "ok":
            continue
        wk = workers.get(e["worker"])
        if getattr(wk, "kind", None) != "reader":
            continue
        iso = wk.isolation
        final = committed if iso == "read_committed" else uncommitted
        for topic, partition, offset, value in (e.get("value") or {}).get("records") or []:
            tp = _tp(topic, partition)
            key = (e["process"], tp)
            if key in last and offset <= last[key]:
                found.add("nonmonotonic_read", f"{e['process']} read {tp}@{offset} after {tp}@{last[key]}",
                          {"poll": _ev(e), "partition": tp, "offset": offset, "previous": last[key]}, e["time"])
            last[key] = max(offset, last.get(key, -1))
            if not isinstance(value, str) or value not in writes:
                continue
            if not final.get(value):
                found.add("vanished_read", f"{e['process']} ({iso}) read {value} at {tp}@{offset}; the final "
                                           f"{iso} read has no such record",
                          {"poll": _ev(e), "value": value, "partition": tp, "offset": offset}, e["time"])
            if iso != "read_committed":
                continue
            mine = [txns[w.txn] for w in writes[value] if w.txn]
            if not mine or any(w.txn is None for w in writes[value]):
                continue
            if all(t.fate == "aborted" for t in mine):
                found.add("aborted_read", f"{e['process']} read {value} at {tp}@{offset}, a record of transaction "
                                          f"{mine[0].name}, which aborted", {"poll": _ev(e), "txn": mine[0].name},
                          e["time"])
            elif not any(t.commit_sent_index is not None and t.commit_sent_index < e["index"] for t in mine):
                sent = [t.commit_sent_at for t in mine if t.commit_sent_at is not None]
                found.add("undecided_read", f"{e['process']} read {value} at {tp}@{offset} at {e['time']:.3f} s; the "
                                            f"commit of its transaction {mine[0].name} was sent at "
                                            f"{min(sent) if sent else 'no time'}",
                          {"poll": _ev(e), "txn": mine[0].name, "commit_sent_at": sent}, e["time"])


def _fencing(found: _Found, events: list[dict], workers: dict[str, Any], txns: dict[str, Txn]) -> None:
    """A fenced error on process P of transactional id X is legitimate only when a newer process
    of X asked for its producer id after P did, or P's transaction outlived its timeout (the
    coordinator aborts it and bumps the epoch)."""
    inits: dict[str, list[tuple[int, str]]] = defaultdict(list)   # worker -> [(invocation index, process)]
    for inv, done in pairs(events):
        if inv["f"] == "init":
            inits[inv["worker"]].append((inv["index"], inv["process"]))
    starts: dict[str, list[Txn]] = {}
    for t in sorted(txns.values(), key=lambda t: t.start):
        starts.setdefault(t.process, []).append(t)
    for e in events:
        if e["type"] == "invoke" or not isinstance(e.get("error"), dict):
            continue
        errors = [e["error"]] + [d.get("error") for d in (e.get("value") or {}).get("deliveries") or []
                                 if isinstance(d, dict) and isinstance(d.get("error"), dict)]
        name = next((x["name"] for x in errors if x.get("name") in FENCED_ERRORS), None)
        if name is None:
            continue
        wk = workers.get(e["worker"])
        if wk is None or wk.kind not in ("transactional", "copier"):
            continue
        mine = [i for i, p in inits[e["worker"]] if p == e["process"]]
        if not mine:
            continue
        newer = [(i, p) for i, p in inits[e["worker"]] if p != e["process"] and mine[0] < i < e["index"]]
        if newer:
            continue
        timeout_s = int(wk.config.get("transaction.timeout.ms", 60000)) / 1000
        running = [t for t in starts.get(e["process"], []) if t.start <= e["time"]]
        if running and e["time"] - running[-1].start >= timeout_s * 0.9:
            continue
        found.add("unexpected_fencing", f"{e['process']} got {name} at {e['time']:.3f} s ({e['f']}); no newer "
                                        f"process of {e['worker']} asked for its producer id, its transaction "
                                        f"was {e['time'] - running[-1].start if running else 0:.1f} s old "
                                        f"(timeout {timeout_s:g} s)",
                  {"event": _ev(e), "inits": inits[e["worker"]][:6]}, e["time"])


def _lso(found: _Found, events: list[dict]) -> None:
    last: dict[str, tuple[int, float]] = {}
    for e in events:
        if e["f"] != "lso" or e["type"] != "ok":
            continue
        for tp, lso in (e.get("value") or {}).items():
            if tp in last and lso < last[tp][0]:
                found.add("nonmonotonic_lso", f"the LSO of {tp} went from {last[tp][0]} (at {last[tp][1]:.3f} s) "
                                              f"to {lso} (at {e['time']:.3f} s)",
                          {"partition": tp, "before": last[tp][0], "after": lso, "time": e["time"]}, e["time"])
            last[tp] = (max(lso, last.get(tp, (lso, 0))[0]), e["time"])


def _copies(found: _Found, groups: dict[str, tuple[list[str], str]], committed_reads: dict[str, list[dict]],
            group_offsets: dict[str, dict[str, int | None]]) -> None:
    for group, (inputs, output) in groups.items():
        outputs: dict[str, int] = defaultdict(int)
        for tp, records in committed_reads.items():
            if tp.rsplit("-", 1)[0] != output:
                continue
            for r in records:
                v = r.get("value")
                if isinstance(v, str) and "@" in v:
                    outputs[v] += 1
        sources = {f"{r['value']}@{tp.rpartition('-')[2]}:{r['offset']}" for tp, records in committed_reads.items()
                   if tp.rpartition("-")[0] in inputs for r in records if isinstance(r.get("value"), str)}
        for copy in sorted(set(outputs) - sources):
            found.add("aborted_read", f"group {group}'s output {output} holds {copy}, a copy of a record that is not "
                                      f"in the input's read_committed read (the copier read an aborted or "
                                      f"undecided record)", {"group": group, "copy": copy})
        offsets = group_offsets.get(group) or {}
        for tp, records in committed_reads.items():
            topic, _, part = tp.rpartition("-")
            if topic not in inputs:
                continue
            upto = offsets.get(tp)
            data = [r for r in records if isinstance(r.get("value"), str)]
            if data and (upto is None or upto <= data[-1]["offset"]):
                left = [r for r in data if upto is None or r["offset"] >= upto]
                found.add("stalled", f"group {group} committed {tp} up to {upto}: {len(left)} input record(s) "
                                     f"from {left[0]['offset']} were never copied", {"group": group, "partition": tp,
                                                                                    "committed": upto,
                                                                                    "last_input": data[-1]["offset"]})
            for r in data:
                v = r["value"]
                copy = f"{v}@{part}:{r['offset']}"
                n = outputs.get(copy, 0)
                if upto is not None and r["offset"] < upto and n == 0:
                    found.add("offsets_without_output", f"group {group} committed {tp} up to {upto}, but input "
                                                        f"{v} at {tp}@{r['offset']} has no output in {output}",
                              {"group": group, "partition": tp, "committed": upto, "input": v,
                               "offset": r["offset"]})
                elif (upto is None or r["offset"] >= upto) and n > 0:
                    found.add("output_without_offsets", f"input {v} at {tp}@{r['offset']} has {n} output(s) in "
                                                        f"{output}, but group {group} committed {tp} only up to "
                                                        f"{upto}", {"group": group, "partition": tp,
                                                                    "committed": upto, "input": v,
                                                                    "offset": r["offset"]})
