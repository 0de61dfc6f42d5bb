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
  transaction reached the wire after the client had reported that transaction's abort done. The
  records then belong to whatever transaction the producer has open when they land -- under
  transaction version 1 a batch names no transaction, so a broker cannot tell -- and become
  visible when that one commits. KafkaJS 2.2.4 answered abort() while a send of the aborted
  transaction was still being retried against a restarted node (seed 301).

A row whose anomalies are all explained so fails with the client's flaw as its reason
(Row.client_flaw); one with any other anomaly stays an unexplained failure, and the flaws found
are kept beside it.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from broker_impl.codec import API

from .batches import Batch, request_batches
from .checker import Anomaly

REUSED_SEQUENCE = "reused_sequence"
SENT_AFTER_END = "sent_after_end"
#: Which anomaly kind each flaw can cause.
EXPLAINS = {"misattributed_ack": REUSED_SEQUENCE, "aborted_read": SENT_AFTER_END}
#: What each flaw is, for the row's reason and the docs.
MEANING = {
    REUSED_SEQUENCE: "sent new records under the producer id, epoch and base sequence of a batch already "
                     "written (the broker answers it as that batch's duplicate)",
    SENT_AFTER_END: "sent records of a transaction after reporting its abort done (they land in the "
                    "producer's next transaction)",
}
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


def _after_end(txn_ev: dict[str, Any], sent: dict[str, list[Batch]]) -> dict[str, Any] | None:
    """The requests proving `sent_after_end` for one aborted transaction's visible records."""
    completion = txn_ev.get("completion") or {}
    values = txn_ev.get("values") or []
    if completion.get("type") != "ok" or not values or txn_ev.get("count", len(values)) > len(values):
        return None
    ended = float(completion.get("time", 0.0))
    first = {}
    for v in values:
        times = [b.t for b in sent.get(v, ())]
        if not times or min(times) <= ended:
            return None
        first[v] = round(min(times), 4)
    return {"txn": txn_ev.get("txn"), "abort_done_at": ended, "first_sent_at": first}


def explain(anomalies: list[Anomaly], lines: Iterable[dict], decode: Callable[[dict], dict | None],
            clients: dict[str, str], unmap: Callable[[str], str] = str) -> Explanation | None:
    """The client flaws behind the row's anomalies (`clients`: worker -> client name; `lines`:
    the transcript); None when no anomaly is of a kind a flaw can cause or none was proved."""
    candidates = [a for a in anomalies if a.kind in EXPLAINS]
    if not candidates:
        return None
    wanted: set[str] = set()
    for a in candidates:
        for ev in a.evidence:
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
            elif "values" in ev:
                proof = _after_end(ev, sent)
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
            key = (worker, a.kind)
            f = flaws.get(key) or flaws.setdefault(key, Flaw(EXPLAINS[a.kind], clients.get(worker, "?"), worker,
                                                             a.kind))
            f.evidence.append(proof)
    if not flaws:
        return None
    complete = explained_all and all(a.kind in EXPLAINS for a in anomalies)
    return Explanation(list(flaws.values()), complete)


def _worker(ev: dict[str, Any]) -> str:
    """Whose record an evidence item names: values are `<worker>-<n>`; transactions `<worker>/<n>`."""
    if isinstance(ev.get("value"), str):
        return ev["value"].rsplit("-", 1)[0]
    return str(ev.get("txn", "")).split("/")[0]


def _matches(ev: dict[str, Any], proof: dict[str, Any]) -> bool:
    if "value" in proof:
        return ev.get("value") == proof["value"] and ev.get("partition") == proof["partition"]
    return ev.get("txn") == proof.get("txn") and "values" in ev
