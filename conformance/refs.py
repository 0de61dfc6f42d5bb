"""References in case data: ``"${step_id.field}"`` and ``"${name}"``, and comparisons on values.

Why one module: a case refers to what an earlier step returned in raw request bodies, in client
op arguments, in `expect` data, in transcript checks and in captures -- and every one of those
must read a reference the same way and say the same thing when it cannot. This is a leaf (no
conformance imports) so the loader (which checks references at load time), the raw actor
(which builds bodies with them) and the runner (which resolves them) share it.

- ``"${init.producer_id}"`` (the whole string): field ``producer_id`` of the data of the latest
  ok step whose id is ``init``; ``"${d.transactions.0.state}"`` walks into mappings and lists.
- ``"${pid}"``: the value a step captured under that name (``capture: {pid: producer_id}``).
- The value keeps its type: a number stays a number.

Comparisons (`expect` data, transcript fields): a mapping whose keys are all operators compares
the value it stands for instead of requiring keys: ``{greater_than: "${first.producer_epoch}"}``.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Iterator

REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_-]*)(?:\.([A-Za-z0-9_.-]+))?\}$")

#: Comparison operators a value may be held to, and what each means (got OP want).
OPERATORS: dict[str, str] = {
    "equals": "equal to",
    "not_equals": "not equal to",
    "greater_than": "greater than",
    "less_than": "less than",
    "at_least": "at least",
    "at_most": "at most",
    "matches": "matching the regular expression",
    "contains": "containing",
}


class RefError(ValueError):
    """A reference that cannot be resolved (no such step, capture or field)."""


def parse(value: Any) -> tuple[str, str | None] | None:
    """(name, path) of a reference string, None for anything else."""
    if not isinstance(value, str):
        return None
    m = REF.match(value)
    return (m.group(1), m.group(2)) if m else None


def refs_in(value: Any) -> Iterator[tuple[str, str | None]]:
    """Every reference inside a JSON-like value, depth first."""
    ref = parse(value)
    if ref is not None:
        yield ref
    elif isinstance(value, list):
        for v in value:
            yield from refs_in(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from refs_in(v)


def dig(data: Any, path: str | None, what: str) -> Any:
    """``data`` followed along a dotted ``path`` (list items by number); RefError names ``what``."""
    cur = data
    for part in (path.split(".") if path else ()):
        if isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        elif isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            known = sorted(cur) if isinstance(cur, dict) else f"a list of {len(cur)}" if isinstance(cur, list) else cur
            raise RefError(f"{what} has no {path!r} ({part!r} not in {known})")
    return cur


Lookup = Callable[[str, "str | None"], Any]


def step_lookup(data_of: Callable[[str], Any]) -> Lookup:
    """A lookup of "${id.field}" references in the data ``data_of(id)`` gives (None: no such ok
    step yet), for callers that keep step data by id and have no captures (the wire diff)."""
    def lookup(name: str, path: str | None) -> Any:
        data = data_of(name)
        if data is None:
            raise RefError(f"${{{name}.{path}}}: no ok step with id {name!r} before this one")
        return dig(data, path, f"step {name!r}")
    return lookup


def resolve(value: Any, lookup: Lookup) -> Any:
    """``value`` with every reference replaced by what ``lookup(name, path)`` gives."""
    ref = parse(value)
    if ref is not None:
        return lookup(*ref)
    if isinstance(value, list):
        return [resolve(v, lookup) for v in value]
    if isinstance(value, dict):
        return {k: resolve(v, lookup) for k, v in value.items()}
    return value


def is_comparison(want: Any) -> bool:
    return isinstance(want, dict) and bool(want) and all(k in OPERATORS for k in want)


def compare(got: Any, op: str, want: Any) -> bool:
    """``got OP want``; an ordering of values that cannot be ordered (None, a string and a
    number) is false, never an exception."""
    if op == "equals":
        return got == want
    if op == "not_equals":
        return got != want
    if op == "matches":
        return isinstance(got, str) and re.search(str(want), got) is not None
    if op == "contains":
        if isinstance(got, str):
            return isinstance(want, str) and want in got
        return isinstance(got, (list, dict)) and want in got
    try:
        if op == "greater_than":
            return got > want
        if op == "less_than":
            return got < want
        if op == "at_least":
            return got >= want
        if op == "at_most":
            return got <= want
    except TypeError:
        return False
    raise ValueError(f"unknown operator {op!r}")


def describe_comparison(want: dict) -> str:
    return " and ".join(f"{OPERATORS[op]} {w!r}" for op, w in want.items())


def data_matches(got: Any, want: Any) -> bool:
    """An op's data against the case's: a number against a list is its length; a mapping needs
    those keys (recursively, others are ignored); a list needs as many items, each matching; a
    comparison ({greater_than: 3}, conformance/refs) holds for the value (a list's length)."""
    if is_comparison(want):
        value = len(got) if isinstance(got, list) and not {"contains", "equals", "not_equals"} & set(want) else got
        return all(compare(value, op, w) for op, w in want.items())
    if isinstance(got, list) and isinstance(want, int) and not isinstance(want, bool):
        return len(got) == want
    if isinstance(want, dict):
        return isinstance(got, dict) and all(k in got and data_matches(got[k], w) for k, w in want.items())
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(map(data_matches, got, want))
    return got == want
