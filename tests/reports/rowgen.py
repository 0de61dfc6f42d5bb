"""Run directories that look like the runner's, for testing and measuring reports.

The rows follow docs/results-schema.md: 35 transaction cases from the
scenario catalogue, three targets (Apache Kafka as the reference, the
embedded broker, Tansu) and three clients. Transcripts hold real Kafka
frames encoded with ``broker_impl.codec`` (the same bytes a client and
broker exchange), so pcap and transcript tests read real protocol.

Outcomes are made the way the runner makes them: each target's outcome is
computed, then compared with the reference's to fill ``diff``. Tansu is
made to keep aborted records out of read_uncommitted on the abort cases —
the kind of divergence the suite exists to find.
"""

from __future__ import annotations

import json
import zlib
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

from broker_impl.codec import API
from reports.transcripts import Frame, write_transcript

CASES: list[tuple[str, str, list[str]]] = [
    ("txn/basic_commit", "Basic commit across two topics", ["transactions"]),
    ("txn/basic_abort", "Basic abort: read_uncommitted still sees aborted records", ["transactions", "abort"]),
    ("txn/open_txn_lso", "Open transaction holds the LSO", ["transactions", "lso"]),
    ("txn/timeout_expiry", "Transaction timeout fences and aborts", ["transactions", "timeout"]),
    ("txn/zombie_init_ongoing", "New instance inits while the old txn is Ongoing", ["transactions", "zombie"]),
    ("txn/zombie_produce", "Zombie produce after fence", ["transactions", "zombie"]),
    ("txn/zombie_add_partitions", "Zombie AddPartitionsToTxn after fence", ["transactions", "zombie"]),
    ("txn/zombie_send_offsets", "Zombie sendOffsetsToTransaction after fence", ["transactions", "zombie"]),
    ("txn/coordinator_crash_after_prepare", "Coordinator crash after PrepareCommit is durable",
     ["transactions", "failover", "multi-node"]),
    ("txn/coordinator_crash_before_prepare", "Coordinator crash before PrepareCommit is durable",
     ["transactions", "failover", "multi-node"]),
    ("txn/stale_coordinator_markers", "Markers from a stale coordinator epoch are fenced",
     ["transactions", "multi-node"]),
    ("txn/abort_then_commit", "Abort followed by a commit on the same producer", ["transactions", "abort"]),
    ("txn/empty_commit", "Commit of a transaction with no records", ["transactions"]),
    ("txn/empty_abort", "Abort of a transaction with no records", ["transactions", "abort"]),
    ("txn/multi_partition_commit", "Commit across six partitions", ["transactions"]),
    ("txn/send_offsets_commit", "Consume-transform-produce commits group offsets", ["transactions", "groups"]),
    ("txn/send_offsets_abort", "Aborted sendOffsetsToTransaction leaves offsets", ["transactions", "groups", "abort"]),
    ("txn/concurrent_transactions_retry", "EndTxn during PrepareCommit answers CONCURRENT_TRANSACTIONS",
     ["transactions"]),
    ("txn/invalid_txn_state", "Produce outside a transaction on a transactional producer", ["transactions"]),
    ("txn/epoch_bump_on_abort", "KIP-890: epoch bump on every EndTxn", ["transactions", "kip-890"]),
    ("txn/implicit_add_partition", "KIP-890: partitions added implicitly by Produce", ["transactions", "kip-890"]),
    ("txn/describe_transactions", "DescribeTransactions reports CompleteCommit", ["transactions", "admin"]),
    ("txn/list_transactions", "ListTransactions filters by state", ["transactions", "admin"]),
    ("txn/abort_markers_offsets", "Abort markers take offsets", ["transactions", "abort"]),
    ("txn/read_committed_fetch_max", "read_committed fetch stops at the LSO", ["transactions", "lso"]),
    ("txn/producer_restart_same_id", "Producer restart with the same transactional.id", ["transactions", "zombie"]),
    ("txn/long_txn_many_batches", "Long transaction of 200 batches", ["transactions"]),
    ("txn/idempotent_dedup", "Idempotent producer duplicates are dropped", ["idempotence"]),
    ("txn/out_of_order_sequence", "Out-of-order sequence is rejected", ["idempotence"]),
    ("txn/unknown_producer_id", "UNKNOWN_PRODUCER_ID after log truncation", ["idempotence"]),
    ("txn/transactional_id_authorization", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED without ACL",
     ["transactions", "security"]),
    ("txn/fenced_consumer_group", "Group generation fencing of TxnOffsetCommit", ["transactions", "groups"]),
    ("txn/max_timeout_exceeded", "INVALID_TRANSACTION_TIMEOUT above the broker maximum", ["transactions", "timeout"]),
    ("txn/coordinator_load_in_progress", "COORDINATOR_LOAD_IN_PROGRESS after failover",
     ["transactions", "failover", "multi-node"]),
    ("txn/two_producers_interleaved", "Two producers interleave transactions on one partition", ["transactions"]),
]
TARGETS = [("apache-kafka", "4.1.0"), ("embedded", "dev"), ("tansu", "0.1.2")]
CLIENTS = [("confluent", "2.16.1"), ("kafka-python", "3.0.12"), ("java", "4.1.0")]
REFERENCE = "apache-kafka"

_ERR = {
    "PRODUCER_FENCED": (90, False, False, True, True),
    "INVALID_PRODUCER_EPOCH": (47, False, True, False, True),
    "CONCURRENT_TRANSACTIONS": (51, True, False, False, False),
    "INVALID_TXN_STATE": (48, False, False, True, False),
    "INVALID_TRANSACTION_TIMEOUT": (50, False, False, True, False),
}


def _error(name: str) -> dict:
    code, retriable, abortable, fatal, fenced = _ERR[name]
    return {"name": name, "code": code, "retriable": retriable, "abortable": abortable,
            "fatal": fatal, "fenced": fenced}


def outcome_for(case: str, target: str) -> dict:
    """The normalised outcome of ``case`` on ``target`` (what the runner would record)."""
    topic = "topic-0"
    committed = [{"offset": i, "key": f"k{i}", "value": f"v{i}"} for i in range(3)]
    aborted = [{"offset": 4 + i, "key": f"a{i}", "value": f"x{i}"} for i in range(2)]
    steps = [{"step": 0, "actor": "p1", "op": "init_transactions", "ok": True},
             {"step": 1, "actor": "p1", "op": "begin_transaction", "ok": True},
             {"step": 2, "actor": "p1", "op": "send", "ok": True, "topic": topic, "count": 3},
             {"step": 3, "actor": "p1", "op": "commit_transaction", "ok": True}]
    reads = {"read_committed": {topic: committed}, "read_uncommitted": {topic: committed}}
    state = "CompleteCommit"
    if "abort" in case:
        steps += [{"step": 4, "actor": "p1", "op": "begin_transaction", "ok": True},
                  {"step": 5, "actor": "p1", "op": "send", "ok": True, "topic": topic, "count": 2},
                  {"step": 6, "actor": "p1", "op": "abort_transaction", "ok": True}]
        reads["read_uncommitted"] = {topic: committed + ([] if target == "tansu" else aborted)}
        state = "CompleteAbort"
    if "zombie" in case or "fence" in case:
        steps += [{"step": len(steps), "actor": "p2", "op": "init_transactions", "ok": True},
                  {"step": len(steps) + 1, "actor": "p1", "op": "commit_transaction", "ok": False,
                   "error": _error("PRODUCER_FENCED")}]
    if "timeout" in case:
        steps.append({"step": len(steps), "actor": "p1", "op": "send", "ok": False,
                      "error": _error("INVALID_PRODUCER_EPOCH" if target == "embedded" and "max" not in case
                                      else "PRODUCER_FENCED")})
    out = {"steps": steps, "reads": reads, "transactions": {"txn-1": {"state": state, "topic_partitions": [topic]}}}
    if "offsets" in case or "groups" in case:
        out["group_offsets"] = {"group": {topic: 3}}
    return out


def structural_diff(ref, actual, path: str = "") -> list[dict]:
    """The runner's comparison, in little: paths where ``actual`` differs from ``ref``."""
    if isinstance(ref, dict) and isinstance(actual, dict):
        out = []
        for k in sorted(set(ref) | set(actual), key=str):
            out += structural_diff(ref.get(k), actual.get(k), f"{path}.{k}" if path else str(k))
        return out
    if isinstance(ref, list) and isinstance(actual, list) and len(ref) == len(actual):
        out = []
        for i, (a, b) in enumerate(zip(ref, actual)):
            out += structural_diff(a, b, f"{path}[{i}]")
        return out
    return [] if ref == actual else [{"path": path, "reference": ref, "actual": actual}]


def transcript_frames(fenced: bool, seed: int = 0, broker_port: int = 39092,
                      record_bytes: int = 4000) -> list[Frame]:
    """A producer's transactional session, as real request/response frames on two connections."""
    rnd = random.Random(seed)
    broker = f"127.0.0.1:{broker_port}"
    c1, c2 = f"127.0.0.1:{50000 + rnd.randrange(1000)}", f"127.0.0.1:{51000 + rnd.randrange(1000)}"
    frames: list[Frame] = []
    t = 0.0

    def exchange(conn, client, api, version, corr, req, resp):
        nonlocal t
        t += 0.0004 + rnd.random() * 0.001
        frames.append(Frame(round(t, 6), conn, "c2b", client, broker,
                            API[api].request_frame(version, corr, "rdkafka", req)))
        t += 0.0002 + rnd.random() * 0.002
        frames.append(Frame(round(t, 6), conn, "b2c", broker, client,
                            API[api].response_frame(version, corr, resp)))

    A = {n: API[n] for n in ("ApiVersions", "Metadata", "FindCoordinator", "InitProducerId",
                              "AddPartitionsToTxn", "Produce", "EndTxn")}
    av = A["ApiVersions"].Response
    exchange("1", c1, "ApiVersions", 3, 1, A["ApiVersions"].Request(client_software_name="librdkafka",
                                                                     client_software_version="2.16.1"),
             av(error_code=0, api_keys=[av.ApiVersion(api_key=k, min_version=a.min_version, max_version=a.max_version)
                                        for k, a in sorted((a.key, a) for a in A.values())]))
    md = A["Metadata"].Response
    exchange("1", c1, "Metadata", 12, 2, A["Metadata"].Request(topics=[A["Metadata"].Request.MetadataRequestTopic(name="topic")]),
             md(brokers=[md.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=broker_port)], cluster_id="kc",
                controller_id=1, topics=[md.MetadataResponseTopic(name="topic", partitions=[
                    API['Metadata'].response.classes['MetadataResponsePartition'](partition_index=0, leader_id=1, replica_nodes=[1], isr_nodes=[1])])]))
    fc = A["FindCoordinator"].Response
    exchange("1", c1, "FindCoordinator", 4, 3,
             A["FindCoordinator"].Request(key_type=1, coordinator_keys=["txn-1"]),
             fc(coordinators=[fc.Coordinator(key="txn-1", node_id=1, host="127.0.0.1", port=broker_port)]))
    exchange("2", c2, "InitProducerId", 4, 1,
             A["InitProducerId"].Request(transactional_id="txn-1", transaction_timeout_ms=60000, producer_id=-1,
                                         producer_epoch=-1),
             A["InitProducerId"].Response(producer_id=1000, producer_epoch=0))
    ap = A["AddPartitionsToTxn"]
    exchange("2", c2, "AddPartitionsToTxn", 3, 2,
             ap.Request(v3_and_below_transactional_id="txn-1", v3_and_below_producer_id=1000,
                        v3_and_below_producer_epoch=0,
                        v3_and_below_topics=[ap.Request.AddPartitionsToTxnTopic(name="topic", partitions=[0])]),
             ap.Response(results_by_topic_v3_and_below=[ap.Response.AddPartitionsToTxnTopicResult(
                 name="topic", results_by_partition=[ap.response.classes['AddPartitionsToTxnPartitionResult'](partition_index=0)])]))
    pr = A["Produce"]
    records = bytes(rnd.randrange(256) for _ in range(record_bytes))   # a big batch: several TCP segments
    exchange("2", c2, "Produce", 9, 3,
             pr.Request(transactional_id="txn-1", acks=-1, timeout_ms=30000, topic_data=[
                 pr.Request.TopicProduceData(name="topic", partition_data=[
                     pr.request.classes['PartitionProduceData'](index=0, records=records)])]),
             pr.Response(responses=[pr.Response.TopicProduceResponse(name="topic", partition_responses=[
                 pr.response.classes['PartitionProduceResponse'](index=0, error_code=47 if fenced else 0, base_offset=0)])]))
    exchange("2", c2, "EndTxn", 3, 4,
             A["EndTxn"].Request(transactional_id="txn-1", producer_id=1000, producer_epoch=0, committed=True),
             A["EndTxn"].Response(error_code=90 if fenced else 0))
    return frames


def write_run(root: Path, run_id: str, started: datetime, *, artifacts: bool = True,
              cases=CASES, targets=TARGETS, clients=CLIENTS, verdict_overrides: dict | None = None,
              seed: int = 0) -> Path:
    """One run directory under ``root`` with ``results.jsonl`` (and artifacts if asked)."""
    rnd = random.Random(seed)
    run_dir = root / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    overrides = verdict_overrides or {}
    rows = []
    t = started
    for case, title, tags in cases:
        ref_outcome = outcome_for(case, REFERENCE)
        for target, target_version in targets:
            outcome = outcome_for(case, target)
            diff = None if target == REFERENCE else (structural_diff(ref_outcome, outcome) or None)
            for client, client_version in clients:
                fenced = "zombie" in case
                checks = [{"name": "read_committed sees only committed records", "passed": True, "message": ""},
                          {"name": "zombie is fenced", "passed": True, "message": ""}] if fenced else [
                          {"name": "read_committed sees only committed records", "passed": True, "message": ""}]
                verdict, reason = "pass", None
                if "multi-node" in tags and target == "tansu":
                    verdict, reason = "not_applicable", "tansu target runs a single node; case needs 3 brokers"
                elif "security" in tags and client == "kafka-python":
                    verdict, reason = "error", "kafka-python driver: SASL/SCRAM handshake timed out after 10000 ms"
                elif diff and target == "tansu" and "abort" in case:
                    verdict = "fail"
                    checks.append({"name": "read_uncommitted sees aborted records", "passed": False,
                                   "message": "expected 5 records in topic-0, read 3"})
                verdict = overrides.get((case, target, client), verdict)
                if verdict == "fail" and all(c["passed"] for c in checks):
                    checks.append({"name": "commit is visible", "passed": False,
                                   "message": "read_committed read 0 of 3 records within 5000 ms"})
                duration = round({"apache-kafka": 2.4, "embedded": 0.6, "tansu": 1.1}[target.partition("@")[0]]
                                 * (0.7 + rnd.random() * 0.8) * (3 if "timeout" in case else 1), 3)
                slug = f"{case.replace('/', '__')}.{target}.{client}"
                arts: dict = {"logs": []}
                if artifacts:
                    adir = run_dir / "artifacts"
                    adir.mkdir(exist_ok=True)
                    write_transcript(adir / f"{slug}.transcript.jsonl",
                                     transcript_frames(fenced, seed=zlib.crc32(slug.encode()),
                                                       record_bytes=1500 + rnd.randrange(3000)))
                    (adir / f"{slug}.broker.log").write_text(
                        f"[{t.isoformat()}] INFO [TransactionCoordinator id=1] Initialized transactionalId txn-1 "
                        f"with producerId 1000 and producer epoch 0 on partition __transaction_state-3\n"
                        f"[{t.isoformat()}] INFO [TransactionCoordinator id=1] Completed rollback of ongoing "
                        f"transaction for transactionalId txn-1 due to fencing\n")
                    (adir / f"{slug}.steps.json").write_text(json.dumps(outcome["steps"], indent=1))
                    arts = {"transcript": f"artifacts/{slug}.transcript.jsonl",
                            "logs": [f"artifacts/{slug}.broker.log"], "steps": f"artifacts/{slug}.steps.json"}
                rows.append({
                    "run_id": run_id, "started_at": t.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                    "case": case, "case_title": title, "tags": tags,
                    "target": target, "target_version": target_version,
                    "client": client, "client_version": client_version,
                    "verdict": verdict, "checks": checks, "outcome": outcome, "diff": diff,
                    "reference_target": None if target == REFERENCE else REFERENCE,
                    "duration_s": duration, "reason": reason, "artifacts": arts,
                })
                t += timedelta(seconds=duration)
    with open(run_dir / "results.jsonl", "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    return run_dir


def run_id_for(i: int, start: datetime | None = None) -> tuple[str, datetime]:
    start = start or datetime(2026, 11, 1, 10, 0, tzinfo=timezone.utc)
    t = start + timedelta(hours=6 * i)
    return t.strftime("%Y%m%dT%H%M%SZ") + f"-{i:06x}", t
