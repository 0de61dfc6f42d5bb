"""Admin ops the runner answers itself, with the codec, where the client library has no API for them.

Why: `describe_transactions` and `describe_producers` read broker state (a transaction's state
at its coordinator, a partition's producers at its leader) that a case must be able to check
with every client -- librdkafka, aiokafka and KafkaJS have no DescribeTransactions, several
clients no DescribeProducers. The answer is a broker fact, not a client behaviour, so where the
driver's `hello` does not list the op, the runner asks the broker the way an admin client
would (FindCoordinator / Metadata, then the request at that node) and returns the data in the
op's own shape (ops.yaml), with ``answered_by: runner`` so a reader knows the client did not.
This is the ONE fallback: a driver never answers such an op itself with hand-made requests.
"""
from __future__ import annotations

import time
from typing import Any

from conformance.clients.protocol import ErrorInfo, Outcome
from conformance.targets import Target

from ..raw import send_request

#: Ops the runner answers with the codec when the driver does not implement them.
RUNNER_ANSWERS = frozenset({"describe_transactions", "describe_producers"})
#: What a coordinator or leader lookup may take (a fresh transactional.id, a topic just created).
LOOKUP_TIMEOUT_S = 10.0


def _error(name: str, message: str) -> dict:
    return ErrorInfo(name=name, message=message, origin="runner", client_class="").to_dict()


def _address(target: Target, node: int) -> tuple[str, int] | None:
    return dict(target.live_addresses()).get(node)


def describe_transactions(target: Target, ids: list[str], deadline_ms: int) -> Outcome:
    """DescribeTransactions v0 at each id's TransactionCoordinator."""
    t0 = time.monotonic()
    rows = []
    for txn_id in ids:
        try:
            node = target.transaction_coordinator(txn_id, timeout=min(LOOKUP_TIMEOUT_S, deadline_ms / 1000))
        except (TimeoutError, RuntimeError, OSError) as exc:
            rows.append({"transactional_id": txn_id, "error": _error("COORDINATOR_NOT_AVAILABLE", str(exc))})
            continue
        address = _address(target, node)
        if address is None:
            rows.append({"transactional_id": txn_id, "error": _error("COORDINATOR_NOT_AVAILABLE", f"node {node} is down")})
            continue
        out = send_request(address, "DescribeTransactions", 0, {"transactional_ids": [txn_id]})
        if not out.ok:
            return Outcome(op="describe_transactions", ok=False, error=out.error, elapsed_ms=(time.monotonic() - t0) * 1000)
        [state] = out.data["response"]["transaction_states"]
        if state["error_code"]:
            rows.append({"transactional_id": txn_id, "error": _error(out.data["error"], "DescribeTransactions")})
            continue
        rows.append({
            "transactional_id": txn_id, "state": state["transaction_state"], "producer_id": state["producer_id"],
            "producer_epoch": state["producer_epoch"], "timeout_ms": state["transaction_timeout_ms"],
            "coordinator_id": node,
            "partitions": sorted(({"topic": t["topic"], "partition": p} for t in state["topics"] for p in t["partitions"]),
                                 key=lambda r: (r["topic"], r["partition"])),
        })
    return Outcome(op="describe_transactions", ok=True, data={"transactions": rows, "answered_by": "runner"},
                   elapsed_ms=(time.monotonic() - t0) * 1000)


def describe_producers(target: Target, partitions: list[dict], deadline_ms: int) -> Outcome:
    """DescribeProducers v0 at each partition's leader."""
    t0 = time.monotonic()
    rows = []
    for tp in partitions:
        topic, partition = tp["topic"], int(tp["partition"])
        try:
            node = target.partition_leader(topic, partition)
        except (KeyError, RuntimeError, OSError) as exc:
            rows.append({"topic": topic, "partition": partition, "error": _error("UNKNOWN_TOPIC_OR_PARTITION", str(exc))})
            continue
        address = _address(target, node) if node >= 0 else None
        if address is None:
            rows.append({"topic": topic, "partition": partition,
                         "error": _error("LEADER_NOT_AVAILABLE", f"partition {topic}-{partition} has no live leader")})
            continue
        out = send_request(address, "DescribeProducers", 0,
                           {"topics": [{"name": topic, "partition_indexes": [partition]}]})
        if not out.ok:
            return Outcome(op="describe_producers", ok=False, error=out.error, elapsed_ms=(time.monotonic() - t0) * 1000)
        [answer] = out.data["response"]["topics"][0]["partitions"]
        if answer["error_code"]:
            rows.append({"topic": topic, "partition": partition, "error": _error(out.data["error"], "DescribeProducers")})
            continue
        rows.append({"topic": topic, "partition": partition, "producers": [producer_row(p) for p in answer["active_producers"]]})
    return Outcome(op="describe_producers", ok=True, data={"partitions": rows, "answered_by": "runner"},
                   elapsed_ms=(time.monotonic() - t0) * 1000)


def producer_row(p: dict) -> dict:
    """One active producer as the op returns it (ops.yaml): Kafka's fields, -1 for "none"."""
    return {"producer_id": p["producer_id"], "producer_epoch": p["producer_epoch"],
            "last_sequence": p["last_sequence"], "last_timestamp_ms": p["last_timestamp"],
            "coordinator_epoch": p["coordinator_epoch"], "current_txn_start_offset": p["current_txn_start_offset"]}


def answer_by_runner(op: str, target: Target, args: dict[str, Any], deadline_ms: int, client: str) -> Outcome:
    """The op answered with the codec, for a driver of `client` that does not implement it."""
    if op == "describe_transactions":
        return describe_transactions(target, list(args["ids"]), deadline_ms)
    if op == "describe_producers":
        return describe_producers(target, list(args["partitions"]), deadline_ms)
    raise ValueError(f"the runner does not answer {op!r} (client {client})")
