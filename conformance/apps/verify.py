"""What the applications' outputs are checked with: the values Kafka's tools printed, and a read
compared with the input (duplicates, losses, values never input, order) -- transactions_test.py's
assertions, counted."""
from __future__ import annotations

import json
from collections import Counter
from typing import Any, Iterable


def acked_values(lines: Iterable[str]) -> list[int]:
    """The values VerifiableProducer reports acked (`producer_send_success`), in ack order."""
    out = []
    for line in lines:
        if '"producer_send_success"' not in line:
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if obj.get("name") == "producer_send_success":
            out.append(int(obj["value"]))
    return out


def compare(inputs: list[int], outputs: list[int], check_order: bool = False) -> dict[str, Any]:
    """What transactions_test.py asserts, counted: duplicates (reads beyond the first of a value),
    losses (input values never read), unexpected (values read that were never input) and, with
    `check_order`, whether the read is the input in order."""
    seen = Counter(outputs)
    wanted = set(inputs)
    out = {"read": len(outputs), "distinct": len(seen),
           "duplicates": sum(n - 1 for n in seen.values() if n > 1),
           "losses": len(wanted - seen.keys()),
           "unexpected": len(seen.keys() - wanted)}
    if check_order:
        out["in_order"] = outputs == inputs
        first = next((i for i, (a, b) in enumerate(zip(inputs, outputs)) if a != b), None)
        if first is None and len(inputs) != len(outputs):
            first = min(len(inputs), len(outputs))
        out["first_out_of_order"] = first
    return out


def consumed_values(lines) -> tuple[list[int], int]:
    """The record values ConsoleConsumer printed (one a line), and how many lines were not an
    integer (ducktape's is_int validator drops them; here they are counted as unexpected)."""
    out, other = [], 0
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            out.append(int(line))
        except ValueError:
            other += 1
    return out, other
