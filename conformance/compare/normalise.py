"""Normalise an outcome so that equal behaviour compares equal across targets.

What is masked and why:
- producer ids, epochs: each broker allocates its own (Kafka's come from the controller, the
  embedded broker's from its own counter); what matters is fencing, which shows as error names.
- timings (elapsed_ms, t, timestamp_ms): wall time differs on every run.
- error messages, client class names, client-internal codes: free text and library internals;
  the error *name* and the client's classification flags (retriable/abortable/fatal/fenced) stay.
- node ids: Tansu calls its node 111, Kafka and the embedded broker 1.
- driver process details (pid, stderr tails).
What is kept: offsets (markers take offsets, so a missing or extra marker shows), keys, values,
partitions, error names and flags, committed group offsets, transaction states, and the whole
decoded response of a raw `request` step -- normalised as `kconform diff` normalises responses
(wire.py: its masks, keyed lists), so a run's structural diff compares every field of it.
"""
from __future__ import annotations

from typing import Any

from .wire import normalise_response

MASKED_KEYS = frozenset({
    "elapsed_ms", "t", "timestamp_ms", "producer_id", "producer_epoch", "message", "client_class",
    "cause_class", "client_code", "pid", "stderr_tail", "returncode", "killed", "node", "coordinator_id",
    "awaited_at", "category", "state_read", "client_id", "timeout_ms", "headers", "observe_errors",
    "group_id", "rule",
})


def mask(value: Any) -> Any:
    """A copy of a JSON value without the MASKED_KEYS, at any depth."""
    if isinstance(value, dict):
        return {k: mask(v) for k, v in value.items() if k not in MASKED_KEYS}
    if isinstance(value, list):
        return [mask(v) for v in value]
    return value


def normalise_outcome(outcome: dict) -> dict:
    """The comparable part of an outcome (docs/results-schema.md `outcome`)."""
    out = mask(outcome)
    # A step's data other than what the case can rely on is client-specific detail.
    steps = []
    for raw, s in zip(outcome.get("steps", []), out.get("steps", [])):
        s = dict(s)
        data = s.get("data")
        response = (raw.get("data") or {}).get("response") if s.get("op") == "request" else None
        if response is not None:
            s["data"] = {"response": normalise_response(response)}
        elif isinstance(data, dict) and s.get("op") not in ("send", "send_many", "poll", "poll_until",
                                                          "transform", "committed", "position",
                                                          "list_offsets", "fault", "send_frame"):
            s.pop("data", None)
        steps.append(s)
    if "steps" in out:
        out["steps"] = steps
    return out
