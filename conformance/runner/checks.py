"""Evaluate a case's checks -- invariants that must hold on every target -- on an outcome.

The outcome is already in the case's own names (namespace.unmap). Every check is a
conformance.results.Check (name, passed, message); the message says what was seen when it
fails, so a report reader needs no other file to understand a failure.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Any, Callable

from ..dsl.model import Case, CheckDef, Expect
from ..refs import data_matches, describe_comparison, is_comparison
from ..results import Check
from .transcript_check import check_transcript

#: Resolves the "${...}" references inside an expected value (identity when there are none).
Resolve = Callable[[Any], Any]


def _records(outcome: dict, iso: str, topic: str, partition: int | None) -> list[dict]:
    reads = outcome.get("reads", {}).get(iso)
    if reads is None:
        raise KeyError(f"no {iso} reads were observed")
    keys = sorted((k for k in reads if k.rpartition("-")[0] == topic), key=lambda k: int(k.rpartition("-")[2]))
    if partition is not None:
        keys = [k for k in keys if int(k.rpartition("-")[2]) == partition]
    out = []
    for k in keys:
        out.extend(reads[k])
    return out


def _short(values: list, limit: int = 20) -> str:
    if len(values) <= limit:
        return repr(values)
    return repr(values[:limit])[:-1] + f", ... ({len(values)} in all)]"


def check_records(c: CheckDef, outcome: dict) -> tuple[bool, str]:
    p = c.params
    recs = _records(outcome, p["isolation"], p["topic"], p.get("partition"))
    problems = []
    if "count" in p and len(recs) != p["count"]:
        problems.append(f"expected {p['count']} records, read {len(recs)}")
    for field, key in (("values", "value"), ("keys", "key")):
        if field in p:
            want = [None if x is None else str(x) for x in p[field]]
            got = [r.get(key) for r in recs]
            if got != want:
                problems.append(f"expected {field} {_short(want)}, read {_short(got)}")
    if problems:
        return False, "; ".join(problems)
    return True, f"{len(recs)} records as expected"


def check_no_duplicates(c: CheckDef, outcome: dict) -> tuple[bool, str]:
    p = c.params
    topics = list(p["topics"]) if isinstance(p.get("topics"), list) else (
        [p["topics"]] if p.get("topics") else ([p["topic"]] if p.get("topic") else None))
    reads = outcome.get("reads", {}).get(p["isolation"], {})
    if topics is None:
        topics = sorted({k.rpartition("-")[0] for k in reads})
    dups = {}
    for t in topics:
        counts = Counter((r.get("key"), r.get("value")) for r in _records(outcome, p["isolation"], t, None))
        d = {kv: n for kv, n in counts.items() if n > 1}
        if d:
            dups[t] = d
    if dups:
        return False, f"duplicates (key, value) -> times: {dups}"
    return True, "no duplicates"


def check_same_records(c: CheckDef, outcome: dict) -> tuple[bool, str]:
    p = c.params
    src = _records(outcome, p["isolation"], p["from"], None)
    dst = _records(outcome, p["isolation"], p["to"], None)
    a = Counter((r.get("key"), r.get("value")) for r in src)
    b = Counter((r.get("key"), r.get("value")) for r in dst)
    if a != b:
        missing = a - b
        extra = b - a
        return False, (f"{p['to']} differs from {p['from']}: missing {dict(missing) or 'none'}, "
                       f"extra {dict(extra) or 'none'}")
    if p.get("order") == "per_key":
        def order(recs):
            seq: dict[Any, list] = {}
            for r in recs:
                seq.setdefault(r.get("key"), []).append(r.get("value"))
            return seq
        if order(src) != order(dst):
            return False, f"same records but not in the same order per key: {order(src)} vs {order(dst)}"
    return True, f"{sum(a.values())} records in both"


def check_offsets(c: CheckDef, outcome: dict) -> tuple[bool, str]:
    p = c.params
    key = f"{p['topic']}-{p.get('partition', 0)}"
    got = outcome.get("offsets", {}).get(key)
    if got is None:
        return False, f"no offsets observed for {key}"
    hw, lso = got.get("high_watermark"), got.get("last_stable")
    problems = []
    if "high_watermark" in p and hw != p["high_watermark"]:
        problems.append(f"high watermark {hw}, expected {p['high_watermark']}")
    if "last_stable" in p and lso != p["last_stable"]:
        problems.append(f"last stable offset {lso}, expected {p['last_stable']}")
    if "open" in p:
        if hw is None or lso is None:
            problems.append(f"cannot tell open records: high watermark {hw}, last stable offset {lso}")
        elif hw - lso != p["open"]:
            problems.append(f"high watermark - last stable offset = {hw - lso}, expected {p['open']}")
    if problems:
        return False, "; ".join(problems)
    return True, f"high watermark {hw}, last stable offset {lso}"


def check_group_offset(c: CheckDef, outcome: dict) -> tuple[bool, str]:
    p = c.params
    key = f"{p['topic']}-{p.get('partition', 0)}"
    groups = outcome.get("group_offsets", {})
    if p["group"] not in groups:
        return False, f"group {p['group']} offsets were not observed"
    got = groups[p["group"]].get(key)
    want = p.get("offset")
    if got != want:
        return False, f"committed offset of {p['group']} on {key} is {got}, expected {want}"
    return True, f"committed offset {got}"


def _short_repr(v: Any, limit: int = 300) -> str:
    r = repr(v)
    return r if len(r) <= limit else r[:limit] + "..."


def unspecified_check(name: str, step: dict, client: str | None) -> Check:
    """The check of a step whose case specifies nothing for this client: it holds (nothing was
    expected), says `unspecified`, and shows what the client did."""
    what = "ok" if step.get("ok") else (step.get("error") or {}).get("name", "an error")
    return Check(name, True, f"not specified for client {client}: the step returned {what}", unspecified=True)


def _want_text(k: str, want: Any) -> str:
    return f"{k} {describe_comparison(want)}" if is_comparison(want) else f"{k}={want!r}"


def expect_matches(expect: Expect, step: dict, client: str | None = None,
                   resolve: Resolve | None = None) -> tuple[bool, str]:
    """Does a recorded step outcome satisfy the case's expectation (``client``'s, when it is per
    client)? The caller has checked that the expectation exists for that client. ``resolve``
    turns the references in expected data into values (RefError when one cannot be)."""
    expect = expect.for_client(client)
    if expect.any:
        return True, "any outcome accepted"
    err = step.get("error")
    if expect.ok:
        if not step.get("ok"):
            return False, f"expected ok, got {err.get('name') if err else 'an error'}: {(err or {}).get('message', '')}"
        data = step.get("data") or {}
        want_data = resolve(expect.data) if resolve is not None else expect.data
        for k, want in want_data.items():
            got = data.get(k)
            if not data_matches(got, want):
                return False, f"expected {_want_text(k, want)}, got {_short_repr(got)}"
        return True, "ok"
    if step.get("ok"):
        return False, f"expected {expect.describe()}, but the step succeeded"
    name = err.get("name") if err else None
    message = (err or {}).get("message") or ""
    if expect.errors and name not in expect.errors:
        return False, f"expected {expect.describe()}, got {name}: {message}"
    for flag, want in expect.flags.items():
        if bool(err.get(flag)) != want:
            return False, f"expected {flag}={want} for {name}, the client said {flag}={err.get(flag)}"
    if expect.message is not None and expect.message not in message:
        return False, f"expected the message of {name} to say {expect.message!r}, it says {message!r}"
    if expect.message_regex is not None and not re.search(expect.message_regex, message):
        return False, f"expected the message of {name} to match /{expect.message_regex}/, it says {message!r}"
    return True, name or "error"


def check_step(c: CheckDef, outcome: dict, client: str | None = None, resolve: Resolve | None = None) -> Check:
    """A step's outcome checked again: its latest record (a step in a repeat keeps its first and
    last iteration; the last is what it came to). Per-client maps are keyed by the run's client."""
    for s in reversed(outcome.get("steps", [])):
        if s.get("id") == c.params["step"]:
            if c.params["expect"].for_client(client) is None:
                return unspecified_check(c.name, s, client)
            try:
                passed, message = expect_matches(c.params["expect"], s, client, resolve)
            except ValueError as exc:  # a reference that cannot be resolved
                passed, message = False, f"cannot evaluate: {exc}"
            return Check(c.name, passed, message)
    return Check(c.name, False, f"step {c.params['step']} did not run")


CHECKERS = {
    "records": check_records,
    "no_duplicates": check_no_duplicates,
    "same_records": check_same_records,
    "offsets": check_offsets,
    "group_offset": check_group_offset,
}


def evaluate(case: Case, outcome: dict, client: str | None = None, resolve: Resolve | None = None,
             frames: list[dict] | None = None) -> list[Check]:
    """The case's checks that apply to ``client`` (the run's client), evaluated on the outcome.
    ``resolve``: the row's references (case names); ``frames``: the row's transcript, decoded
    (transcript_check.decode_transcript; None when no proxy stood in front)."""
    results = []
    for c in case.checks:
        if not c.applies_to(client):
            continue
        if c.kind == "step":
            results.append(check_step(c, outcome, client, resolve))
            continue
        try:
            if c.kind == "transcript":
                passed, message = check_transcript(c, frames, resolve)
            else:
                passed, message = CHECKERS[c.kind](c, outcome)
        except KeyError as exc:
            passed, message = False, f"cannot evaluate: {exc}"
        except ValueError as exc:  # a reference that cannot be resolved
            passed, message = False, f"cannot evaluate: {exc}"
        results.append(Check(c.name, bool(passed), message))
    return results
