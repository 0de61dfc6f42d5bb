"""Comparing outcomes across targets: normalisation (what is masked) and a structural diff.

    from conformance.compare import normalise_outcome, structural_diff, render
    diff = structural_diff(normalise_outcome(kafka), normalise_outcome(embedded))
"""
from .diff import MISSING, render, structural_diff
from .normalise import MASKED_KEYS, mask, normalise_outcome

__all__ = ["MASKED_KEYS", "MISSING", "mask", "normalise_outcome", "render", "structural_diff"]
