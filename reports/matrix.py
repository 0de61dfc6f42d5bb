"""The compatibility matrix: every case on every target with every client, and how each target
diverges from Apache Kafka -- read from results files, for the page a broker team can link to
(reports/matrix_page.py renders it).

Why a matrix of its own (besides Allure): Allure shows one run test by test; a broker team needs
the whole picture at once -- which cases their broker passes, which it fails and *how*, and
what Kafka does instead.

What it says per cell (`one_line`): the failed check (its name and what was seen), the crash
(after which step the target was seen dead), the not-applicable reason, kconform's error, or --
for a pass whose outcome still differs from Kafka's -- the first differing path. Per target
(`Divergence`): each failing or crashing case with what the target did, what the reference
did (the same checks hold there), the first differences of what the case left behind, the
target's last log lines for a crash, and the case's documented `known_differences` entry.

Everything comes from results files (docs/results-schema.md) and the run.json beside them; this
module never imports the runner. Several results directories make one matrix (the peers' run
and the Kafka releases' run): a later row for the same case x target x client wins; the shards
of one run (`kconform run --shard I/N`, one run id) are one run.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from conformance.results import DIVERGING, Verdict

from .results import read_runs, theme

#: How results files write a value one side of a diff lacks (conformance.compare.MISSING).
MISSING = "<missing>"

#: A cell's line is cut to this many characters (the full text is in the target's section).
CELL_CHARS = 90
#: Characters of one check message or crash reason in a target's divergence list.
DETAIL_CHARS = 400
#: Diff entries and failed checks shown per divergence.
DIFF_LINES = 3
CHECK_LINES = 3
#: A divergence that is no verdict: the row passes, its outcome differs from the reference's.
DIFFERS = "differs"
KNOWN_PREFIX = "known difference: "


def shorten(text: str | None, limit: int) -> str:
    """One line of at most `limit` characters (whitespace collapsed, cut with an ellipsis)."""
    one = re.sub(r"\s+", " ", str(text or "")).strip()
    return one if len(one) <= limit else one[: max(1, limit - 1)].rstrip() + "…"


def failed_checks(row: dict) -> list[dict]:
    return [c for c in row.get("checks") or [] if not c.get("passed")]


def _check_label(name: str) -> str:
    """`step[3] p1.commit_transaction: PRODUCER_FENCED` -> `step[3] p1.commit_transaction`: the
    expectation follows in the message anyway."""
    return name.split(": ", 1)[0] if name.startswith("step[") else name


def documented(row: dict) -> str | None:
    """The case's `known_differences` entry for this row's target, as the runner recorded it."""
    if row.get("known_difference"):
        return row["known_difference"]
    reason = row.get("reason") or ""
    return reason[len(KNOWN_PREFIX):] if reason.startswith(KNOWN_PREFIX) else None


def one_line(row: dict, limit: int = CELL_CHARS) -> str:
    """The divergence of one row from Apache Kafka in one line ("" for a plain pass)."""
    verdict = row["verdict"]
    if verdict == Verdict.FAIL:
        failed = failed_checks(row)
        if not failed:
            return shorten(row.get("reason") or "a check failed", limit)
        first = failed[0]
        more = f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
        return shorten(f"{_check_label(first['name'])}: {first.get('message', '')}", limit - len(more)) + more
    if verdict == Verdict.CRASH:
        reason = (row.get("reason") or "the target died").removeprefix("the target died ")
        return shorten(f"died {reason}", limit)
    if verdict in (Verdict.NOT_APPLICABLE, Verdict.ERROR):
        # The column names the target already.
        reason = re.sub(r"^target '[^']+' ", "", row.get("reason") or "no reason given")
        return shorten(reason, limit)
    diff = row.get("diff") or []
    if diff:
        more = f" (+{len(diff) - 1})" if len(diff) > 1 else ""
        return shorten(f"outcome differs at {diff[0]['path']}", limit - len(more)) + more
    return ""


def crash_excerpt(row: dict, run_dir: Path | None, lines: int = 3) -> str:
    """The telling lines of the target's last words, from the row's crash artifact: what
    killed it (a Go panic, a signal, an exception) and the first source location named; ""
    when there is none."""
    rel = (row.get("artifacts") or {}).get("crash")
    if not rel or run_dir is None:
        return ""
    try:
        text = (run_dir / rel).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    log = text.split("\n\n", 1)[1] if "\n\n" in text else text
    found = [ln.strip() for ln in log.splitlines() if re.search(r"panic|fatal|exception|signal", ln, re.I)][:lines]
    where = next((ln.strip() for ln in log.splitlines() if re.search(r"\.(go|java|rs|py|c|cc|scala):\d+", ln)), None)
    if where:
        where = "/".join(where.split()[0].split("/")[-2:])  # the module and the file:line
    return " / ".join(found + ([where] if where and found else []))


@dataclass
class Divergence:
    """One case on one target that diverges from Kafka, for the clients named."""

    case: str
    title: str
    kind: str  # Verdict.FAIL | Verdict.CRASH | DIFFERS (a pass whose outcome differs)
    clients: list[str]
    target_does: list[str]
    kafka_does: list[str]
    #: The first differences of the outcome from the reference's.
    diff: list[str]
    documented: str | None = None


@dataclass
class Matrix:
    reference: str | None
    columns: list[tuple[str, str]]
    #: theme -> case ids, in order.
    themes: dict[str, list[str]]
    titles: dict[str, str]
    #: (case, target, client) -> row
    rows: dict[tuple[str, str, str], dict]
    #: row id -> the run directory it came from (for its artifacts)
    run_dirs: dict[int, Path]
    runs: list[dict]
    versions: dict[str, str]
    client_versions: dict[str, str]
    #: (case, target, client) -> verdicts over the runs, oldest first (analytics across runs)
    history: dict[tuple[str, str, str], list[str]] = field(default_factory=dict)
    divergences: dict[str, list[Divergence]] = field(default_factory=dict)
    not_applicable: dict[str, list[tuple[str, list[str]]]] = field(default_factory=dict)
    errors: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    #: cells whose documented difference came from the case library, not the row (build)
    documented_later: int = 0

    @property
    def reference_label(self) -> str:
        """`apache-kafka 4.3.1`: how the page names what Kafka did."""
        if not self.reference:
            return "Kafka"
        return f"{self.reference} {self.versions.get(self.reference, '')}".strip()

    @property
    def targets(self) -> list[str]:
        return list(dict.fromkeys(t for t, _ in self.columns))


def _ordered(values, first=None) -> list:
    out = list(dict.fromkeys(values))
    if first in out:
        out.remove(first)
        out.insert(0, first)
    return out


#: (case, target, client) -> the documented difference the runner would record for that row now.
KnownLookup = Callable[[str, str, str], "str | None"]


def build(results_dirs: list[Path], known: KnownLookup | None = None) -> Matrix:
    """The matrix of every row in these run directories (later directories win per cell).

    `known`: for rows written before the runner recorded `known_difference` (the field is
    absent, not null), the case library's documented difference for the row, so a run that
    found the divergences the library documents afterwards still shows them as documented;
    the page says how many rows took it so (Matrix.documented_later)."""
    read = read_runs(results_dirs)   # the shards of one run are one run
    filled: set[int] = set()
    for r in read.rows:
        if known is not None and "known_difference" not in r and r["verdict"] == Verdict.FAIL:
            r["known_difference"] = known(r["case"], r["target"], r["client"])
            if r["known_difference"]:
                filled.add(id(r))
    rows, runs, run_dirs = read.rows, read.runs, read.dirs
    m = from_rows(rows, runs, run_dirs)
    m.documented_later = sum(1 for r in m.rows.values() if id(r) in filled)
    return m


def client_column(client: str, group_protocol: str | None = None, security_protocol: str | None = None) -> str:
    """The client as the page's columns name it: tagged with how the run drove it where that is
    not the default -- KIP-848 consumer groups (`--group-protocol consumer`), a secured listener
    (`--security`) -- so such rows get columns of their own beside the classic plaintext ones,
    and each is compared with the reference's row of the same kind: ``java (group.protocol=consumer)``."""
    tags = []
    if group_protocol and group_protocol != "classic":
        tags.append(f"group.protocol={group_protocol}")
    if security_protocol and security_protocol != "PLAINTEXT":
        tags.append(security_protocol)
    return f"{client} ({', '.join(tags)})" if tags else client


def from_rows(rows: list[dict], runs: list[dict], run_dirs: dict[int, Path] | None = None,
              history: dict[tuple[str, str, str], list[str]] | None = None) -> Matrix:
    """The matrix of these rows (a later row wins per case x target x client). `runs`: the
    runs' run.json contents (their order orders the targets and clients); `run_dirs`: the
    directory each row (by id) came from, for its artifacts; `history`: per cell, its verdicts
    over earlier runs, oldest first (the analytics across runs)."""
    cells: dict[tuple[str, str, str], dict] = {}
    targets = [t for meta in runs for t in meta.get("targets") or []]
    clients = [client_column(c, meta.get("group_protocol"), meta.get("security_protocol"))
               for meta in runs for c in meta.get("clients") or []]
    reference = next((meta["reference_target"] for meta in runs if meta.get("reference_target")), None)
    for r in rows:
        # the row's client as its column names it (in place: callers keep the row objects)
        r["client"] = client_column(r["client"], r.get("group_protocol"), r.get("security_protocol"))
        cells[(r["case"], r["target"], r["client"])] = r
        targets.append(r["target"])
        clients.append(r["client"])
        reference = reference or r.get("reference_target")
    targets = _ordered(targets, reference)
    themes: dict[str, list[str]] = {}
    for c in sorted({k[0] for k in cells}):
        themes.setdefault(theme(c), []).append(c)
    m = Matrix(reference=reference, columns=[(t, c) for t in targets for c in _ordered(clients)
                                             if any(k[1:] == (t, c) for k in cells)],
               themes=themes, titles={r["case"]: r.get("case_title") or r["case"] for r in cells.values()},
               rows=cells, run_dirs=run_dirs or {}, runs=runs,
               versions={r["target"]: r.get("target_version") or "" for r in cells.values()},
               client_versions={r["client"]: r.get("client_version") or "" for r in cells.values()},
               history=history or {})
    for t in m.targets:
        if t != reference:
            m.divergences[t] = _divergences(m, t)
        m.not_applicable[t] = _not_applicable(m, t)
        m.errors[t] = [(case, client, shorten(r.get("reason"), DETAIL_CHARS))
                       for (case, tt, client), r in sorted(cells.items()) if tt == t and r["verdict"] == Verdict.ERROR]
    return m


def _kafka_side(m: Matrix, row: dict) -> list[str]:
    """What the reference target did in the same case with the same client: the same checks
    (they hold there; the first CHECK_LINES), or its own verdict when it did not pass."""
    ref = m.rows.get((row["case"], m.reference, row["client"])) if m.reference else None
    if ref is None:
        return ["not in these runs"]
    if ref["verdict"] != Verdict.PASS:
        return [f"{ref['verdict']} -- {one_line(ref, DETAIL_CHARS)}"]
    by_name = {c["name"]: c for c in ref.get("checks") or []}
    out = []
    for c in failed_checks(row)[:CHECK_LINES]:
        same = by_name.get(c["name"])
        if same is not None and same.get("passed"):
            # A step check's name carries the expectation, its message only "ok" or the error name.
            seen = shorten(same.get("message"), DETAIL_CHARS)
            out.append(f"{c['name']} -- holds ({seen})" if c["name"].startswith("step[")
                       else f"{c['name']}: {seen}")
    return out or [Verdict.PASS.value]


def _target_side(m: Matrix, row: dict) -> list[str]:
    if row["verdict"] == Verdict.CRASH:
        out = [shorten(row.get("reason"), DETAIL_CHARS)]
        excerpt = crash_excerpt(row, m.run_dirs.get(id(row)))
        if excerpt:
            out.append("its log: " + shorten(excerpt, DETAIL_CHARS))
        return out
    if row["verdict"] == Verdict.FAIL:
        failed = failed_checks(row)
        out = [f"{_check_label(c['name'])}: {shorten(c.get('message'), DETAIL_CHARS)}" for c in failed[:CHECK_LINES]]
        if len(failed) > CHECK_LINES:
            out.append(f"... {len(failed) - CHECK_LINES} more failed checks")
        return out
    return []


def _value(v) -> str:
    return "(missing)" if v == MISSING else shorten(repr(v), 80)


def _diff_lines(row: dict, steps: bool = True) -> list[str]:
    """The first differences from the reference's outcome; without the steps' (`steps=False`)
    where the failed checks already say what the steps did."""
    diff = [d for d in row.get("diff") or [] if steps or not d["path"].startswith("steps")]
    out = [f"`{d['path']}`: Kafka {_value(d.get('reference'))}, {row['target']} {_value(d.get('actual'))}"
           for d in diff[:DIFF_LINES]]
    if len(diff) > DIFF_LINES:
        out.append(f"... {len(diff) - DIFF_LINES} more differences")
    return out


def _union(parts: list[tuple[str, list[str]]]) -> list[str]:
    """Lines of several clients as one list: as they are when the clients agree, else each
    client's own, prefixed with its name."""
    if len({tuple(lines) for _, lines in parts}) <= 1:
        return parts[0][1] if parts else []
    return [f"{client}: {line}" for client, lines in parts for line in lines]


def _divergences(m: Matrix, target: str) -> list[Divergence]:
    """The target's diverging cases. Clients of one case share an entry when the case documents
    their divergence (one explanation), or when they diverge in exactly the same words."""
    out: list[Divergence] = []
    for case in (c for cs in m.themes.values() for c in cs):
        groups: dict[tuple, list[tuple[str, str, list[str], list[str], list[str]]]] = {}
        for _, client in (col for col in m.columns if col[0] == target):
            row = m.rows.get((case, target, client))
            if row is None:
                continue
            if row["verdict"] in DIVERGING:
                kind = Verdict(row["verdict"])
                does, kafka = _target_side(m, row), _kafka_side(m, row)
                diff = _diff_lines(row, steps=False) if kind is Verdict.FAIL else []
            elif row["verdict"] == Verdict.PASS and row.get("diff"):
                kind, does, kafka, diff = DIFFERS, [], [], _diff_lines(row)
            else:
                continue
            doc = documented(row)
            key = (kind, doc) if doc else (kind, None, tuple(does), tuple(kafka), tuple(diff))
            groups.setdefault(key, []).append((client, doc, does, kafka, diff))
        for (kind, *_), members in groups.items():
            clients = [c for c, *_ in members]
            out.append(Divergence(case, m.titles.get(case, case), kind, clients,
                                  _union([(c, does) for c, _, does, _, _ in members]),
                                  _union([(c, kafka) for c, _, _, kafka, _ in members]),
                                  _union([(c, diff) for c, _, _, _, diff in members]), members[0][1]))
    return out


#: Divergences documented by the same text in at least this many cases are listed as one.
GROUP_AT = 3


def by_documented(divs: list[Divergence]) -> tuple[list[Divergence], list[tuple[str, list[Divergence]]]]:
    """(the divergences on their own, [(documented text, the divergences it explains)]): a
    difference that many cases meet the same way (a target's client difference, say) is one
    finding, listed once with its cases."""
    counts: dict[str, int] = {}
    for d in divs:
        if d.documented:
            counts[d.documented] = counts.get(d.documented, 0) + 1
    shared = [doc for doc, n in counts.items() if n >= GROUP_AT]
    return ([d for d in divs if d.documented not in shared],
            [(doc, [d for d in divs if d.documented == doc]) for doc in shared])


def _not_applicable(m: Matrix, target: str) -> list[tuple[str, list[str]]]:
    """(reason, cases) for the target's not-applicable rows, the most common reason first."""
    by_reason: dict[str, list[str]] = {}
    for (case, t, _client), r in sorted(m.rows.items()):
        if t == target and r["verdict"] == Verdict.NOT_APPLICABLE:
            cases = by_reason.setdefault(shorten(r.get("reason"), DETAIL_CHARS), [])
            if case not in cases:
                cases.append(case)
    return sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0]))
