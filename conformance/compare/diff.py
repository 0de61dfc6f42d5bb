"""A readable structural diff of two normalised outcomes.

Why not a text diff: outcomes are nested JSON, and what a reader needs is "at
reads.read_committed.t1-0[2].value the reference read '3' and this target read nothing", one
line per difference, with the path saying where. Lists are compared by position (offsets
order records); a list that is longer on one side shows the extra elements as missing on the
other.
"""
from __future__ import annotations

from typing import Any

MISSING = "<missing>"
MAX_ENTRIES = 200


def structural_diff(reference: Any, actual: Any, path: str = "") -> list[dict]:
    """[{path, reference, actual}] for every leaf that differs; [] when equal."""
    out: list[dict] = []
    _walk(reference, actual, path, out)
    if len(out) > MAX_ENTRIES:
        more = len(out) - MAX_ENTRIES
        out = out[:MAX_ENTRIES] + [{"path": "...", "reference": f"{more} more differences", "actual": ""}]
    return out


def _join(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def _walk(a: Any, b: Any, path: str, out: list[dict]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            _walk(a.get(k, MISSING), b.get(k, MISSING), _join(path, k), out)
        return
    if isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            _walk(a[i] if i < len(a) else MISSING, b[i] if i < len(b) else MISSING, _join(path, i), out)
        return
    if a != b:
        out.append({"path": path, "reference": a, "actual": b})


def render(diff: list[dict] | None, reference: str = "reference", actual: str = "actual") -> str:
    """Human text, one difference per line."""
    if not diff:
        return "no differences"
    width = max(len(d["path"]) for d in diff)
    lines = [f"{'path':<{width}}  {reference}  ->  {actual}"]
    for d in diff:
        lines.append(f"{d['path']:<{width}}  {_fmt(d['reference'])}  ->  {_fmt(d['actual'])}")
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    if v == MISSING:
        return "(missing)"
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."
