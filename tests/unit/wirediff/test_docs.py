"""docs/wirediff.md lists every mask and every intended difference with its reason."""
from __future__ import annotations

from pathlib import Path

from conformance.compare import WIRE_MASKS
from conformance.wirediff.known import KNOWN

DOC = (Path(__file__).resolve().parents[3] / "docs" / "wirediff.md").read_text(encoding="utf-8")


def test_every_mask_is_documented_with_its_reason():
    for m in WIRE_MASKS:
        assert f"| `{m.field}` |" in DOC and m.reason in DOC, m.field


def test_every_intended_difference_is_documented_with_its_reason():
    for k in KNOWN:
        assert k.reason in DOC, k.reason[:60]
