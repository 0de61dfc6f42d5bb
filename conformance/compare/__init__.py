"""Comparing outcomes across targets: normalisation (what is masked) and a structural diff.

    from conformance.compare import normalise_outcome, structural_diff, render
    diff = structural_diff(normalise_outcome(kafka), normalise_outcome(embedded))

normalise_response (wire.py) is the same for one decoded Kafka response: `kconform diff` uses it.
"""
from .diff import MISSING, render, structural_diff
from .normalise import MASKED_KEYS, mask, normalise_outcome
from .wire import WIRE_MASKS, normalise_response

__all__ = ["MASKED_KEYS", "MISSING", "WIRE_MASKS", "mask", "normalise_outcome", "normalise_response", "render",
           "structural_diff"]
