"""`check: transcript` -- what crossed the wire, checked against the proxy's transcript of the row.

Why: some behaviour shows only on the wire: "the client sent InitProducerId with its current
producer id and epoch", "the client retried EndTxn after CONCURRENT_TRANSACTIONS", "the
coordinator sent WriteTxnMarkers once". Reading transcripts by hand does not scale to every
target and client; here a case names the frames it expects.

A frame pattern is ``{api, direction (request), from? (client|broker), version?, fields?}``.
``fields`` is matched against the frame's decoded body like `expect` data (a mapping needs
those keys, lists item by item, comparisons and "${...}" references allowed); error codes are
read as Kafka's error names (``error_code: CONCURRENT_TRANSACTIONS``) and case names as the
case's (the row's unique suffix is taken off). ``count`` (default ``{at_least: 1}``) is how
many frames match one pattern; ``sequence`` asks for frames matching each pattern in that
order, others may come between.

Frames are decoded with the project's codec from the bytes the transcript kept (64 KiB of
each frame): a frame whose body was cut short matches on api/direction/version only, never on
fields.
"""
from __future__ import annotations

from typing import Any, Callable

from ..proxy.transcript import decode_line
from ..refs import compare, data_matches, describe_comparison, is_comparison

def decode_transcript(lines: list[dict], unmap: Callable[[Any], Any]) -> list[dict]:
    """The row's transcript lines as frames, in the order the proxy saw them, with case names."""
    out = []
    for line in lines:
        frame = decode_line(line)
        if frame is not None:
            if frame["fields"] is not None:
                frame["fields"] = unmap(frame["fields"])
            out.append(frame)
    return out


def matches(frame: dict, pattern: dict) -> bool:
    if frame["api"] != pattern["api"] or frame["direction"] != pattern["direction"]:
        return False
    if "from" in pattern and frame["from"] != pattern["from"]:
        return False
    if "version" in pattern:
        want = pattern["version"]
        ok = all(compare(frame["version"], op, w) for op, w in want.items()) if is_comparison(want) \
            else frame["version"] == want
        if not ok:
            return False
    if pattern.get("fields"):
        return frame["fields"] is not None and data_matches(frame["fields"], pattern["fields"])
    return True


def _describe(pattern: dict) -> str:
    src = f" from {pattern['from']}" if "from" in pattern else ""
    fields = f" with {pattern['fields']}" if pattern.get("fields") else ""
    return f"{pattern['api']} {pattern['direction']}{src}{fields}"


def _seen(frames: list[dict], api: str) -> str:
    same = [f for f in frames if f["api"] == api]
    shown = [f"{f['direction']} v{f['version']}" + (f" {_short(f['fields'])}" if f["fields"] else "") for f in same[:6]]
    more = f" (+{len(same) - 6} more)" if len(same) > 6 else ""
    return f"{len(same)} {api} frame(s): " + "; ".join(shown) + more if same else f"no {api} frame crossed the proxy"


def _short(fields: dict) -> str:
    text = repr({k: v for k, v in fields.items() if k not in ("records",)})
    return text if len(text) <= 200 else text[:200] + "..."


def check_transcript(c, frames: list[dict] | None, resolve: Callable[[Any], Any] | None) -> tuple[bool, str]:
    if frames is None:
        return False, "no transcript: the proxy did not stand in front of the target in this row"
    p = c.params
    if "frame" in p:
        pattern = dict(p["frame"], fields=resolve(p["frame"].get("fields")) if resolve else p["frame"].get("fields"))
        n = sum(1 for f in frames if matches(f, pattern))
        want = p["count"]
        ok = all(compare(n, op, w) for op, w in want.items()) if is_comparison(want) else n == want
        text = describe_comparison(want) if is_comparison(want) else str(want)
        if ok:
            return True, f"{n} frame(s) {_describe(pattern)}"
        return False, f"{n} frame(s) {_describe(pattern)}, expected {text}; {_seen(frames, pattern['api'])}"
    pos = 0
    for i, raw in enumerate(p["sequence"]):
        pattern = dict(raw, fields=resolve(raw.get("fields")) if resolve else raw.get("fields"))
        while pos < len(frames) and not matches(frames[pos], pattern):
            pos += 1
        if pos == len(frames):
            return False, (f"frame {i + 1} of the sequence ({_describe(pattern)}) did not follow the ones before; "
                           f"{_seen(frames, pattern['api'])}")
        pos += 1
    return True, f"the {len(p['sequence'])} frames in order"

