"""Baselines: per target (and release), the rows known to diverge from Apache Kafka, with why and
where it is tracked -- so that a broker team's CI is green on its known divergences and red on
new ones.

The conventions users know: ceph/s3-tests' `fails_on_*` tags, CockroachDB's per-driver
blocklists naming an issue, WPT's expectation files. Here one YAML file per target, named by
the target (`baselines/kfake.yaml`, `baselines/apache-kafka@3.9.1.yaml`):

    target: kfake                      # NAME or NAME@VERSION: the rows it judges
    version: v0.0.0-... (franz-go ...) # what it was measured on (a run on another says so)
    link: https://...                  # an entry's default link (the tracker, the page)
    expected:
      txn/zombie_produce:              # a case id, or a glob (`wire/*`)
        verdict: fail                  # fail | crash | [fail, crash] | [fail, pass] (flaky)
        clients: [confluent, java]     # default: every client
        checks: ["step[4] p1.send: PRODUCER_FENCED"]   # the failed checks known (default: any)
        reason: kfake lets the fenced producer write
        link: https://github.com/...
      groups/x:                        # several entries of one case: a list
      - {clients: [java], verdict: crash, reason: ...}
      - {clients: [confluent], verdict: fail, reason: ...}

A row the file names carries its entry (`Row.expected`) and every row gets its status
(conformance.results.judge_status): `expected_fail`, `fail` (new), `unexpected_pass` (stale
entry), ... `kconform run` exits 0 when no row newly fails, newly passes or errors.

Updating (`update`, `kconform run --update-baseline`, `kconform baseline`): every failing row of
the run becomes (or stays) an entry -- its verdict and failed checks as measured, the reason and
link an existing entry has kept, else the case's documented difference or the failed check;
a row that now passes leaves its entry (unless the entry allows a pass); entries of rows the run
did not have (other cases, other clients) and glob entries stay as they are.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import yaml

from .dsl.loader import CASES_ROOT, CaseError, load_case
from .results import CLIENT_FLAW_PREFIX, EXPECTABLE, KNOWN_REFERENCE_BUG_PREFIX, Expected, Row, Status, Verdict, judge_status

#: The baselines kconform ships (today kfake's; any target may have one here).
BASELINES_ROOT = Path(__file__).resolve().parents[1] / "baselines"
SUFFIXES = (".yaml", ".yml")


class BaselineError(ValueError):
    """A baseline file kconform cannot use; the message names the file and what is wrong."""


@dataclass
class Entry:
    """One entry: the rows of `case` (an id or a glob) with `clients` (empty: any)."""

    case: str
    verdicts: list[Verdict]
    reason: str
    link: str = ""
    clients: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)

    def matches(self, case: str, client: str) -> bool:
        return (self.case == case or fnmatch.fnmatchcase(case, self.case)) and (not self.clients or client in self.clients)

    @property
    def is_glob(self) -> bool:
        return any(ch in self.case for ch in "*?[")

    def expected(self, source: str) -> Expected:
        return Expected(list(self.verdicts), self.reason, self.link, list(self.checks), source)

    def to_yaml(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.clients:
            out["clients"] = _Flow(sorted(self.clients))
        out["verdict"] = self.verdicts[0].value if len(self.verdicts) == 1 else _Flow(v.value for v in self.verdicts)
        if self.checks:
            out["checks"] = list(self.checks)
        out["reason"] = self.reason
        if self.link:
            out["link"] = self.link
        return out


class _Flow(list):
    """A list written on one line (`clients: [confluent, java]`)."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Flow, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))


@dataclass
class Baseline:
    """One target's expectations file."""

    target: str
    entries: list[Entry] = field(default_factory=list)
    version: str = ""
    link: str = ""
    path: Path | None = None
    #: Free text kept at the top of the file (how it was measured).
    note: str = ""

    @property
    def source(self) -> str:
        """How rows name the file: its path relative to the working directory when inside it."""
        if self.path is None:
            return f"baseline of {self.target}"
        try:
            return str(self.path.resolve().relative_to(Path.cwd().resolve()))
        except ValueError:
            return self.path.name

    def entry_for(self, case: str, client: str) -> Entry | None:
        """The entry of this row: an exact case id wins over a glob, the first in the file wins."""
        found = [e for e in self.entries if e.matches(case, client)]
        exact = [e for e in found if not e.is_glob]
        return (exact or found or [None])[0]

    def expected_for(self, case: str, client: str) -> Expected | None:
        entry = self.entry_for(case, client)
        if entry is None:
            return None
        expected = entry.expected(self.source)
        expected.link = expected.link or self.link
        return expected

    # ------------------------------------------------------------------ file
    @classmethod
    def load(cls, path: str | Path) -> "Baseline":
        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise BaselineError(f"{path}: {exc}") from None
        return cls.from_data(data, path)

    @classmethod
    def from_data(cls, data: dict, path: Path | None = None) -> "Baseline":
        where = str(path) if path else "baseline"
        if not isinstance(data, dict) or not data.get("target"):
            raise BaselineError(f"{where}: needs `target: NAME` (the target whose rows it judges)")
        unknown = sorted(set(data) - {"target", "version", "link", "note", "expected"})
        if unknown:
            raise BaselineError(f"{where}: unknown key(s) {unknown}")
        out = cls(str(data["target"]), version=str(data.get("version") or ""), link=str(data.get("link") or ""),
                  path=path, note=str(data.get("note") or ""))
        expected = data.get("expected") or {}
        if not isinstance(expected, dict):
            raise BaselineError(f"{where}: `expected` maps case ids (or globs) to entries")
        for case, items in expected.items():
            for item in items if isinstance(items, list) else [items]:
                out.entries.append(_entry(str(case), item, where))
        return out

    def dump(self) -> str:
        """The file's text: the header, then the entries by case (several of a case: a list)."""
        head: dict[str, Any] = {"target": self.target}
        if self.version:
            head["version"] = self.version
        if self.link:
            head["link"] = self.link
        if self.note:
            head["note"] = self.note
        by_case: dict[str, list[dict]] = {}
        for e in sorted(self.entries, key=lambda e: (e.case, sorted(e.clients))):
            by_case.setdefault(e.case, []).append(e.to_yaml())
        body = {"expected": {c: (items[0] if len(items) == 1 else items) for c, items in by_case.items()}}
        text = (f"# kconform baseline of target {self.target}: the rows known to diverge from Apache Kafka.\n"
                "# A row it names fails as known (expected_fail); a row that fails otherwise, or passes where\n"
                "# an entry expects a failure, makes `kconform run` exit 1. Format: conformance/baseline.py.\n")
        text += yaml.dump(head, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=110)
        if self.entries:
            text += yaml.dump(body, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=110)
        else:
            text += "expected: {}\n"
        return text

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.dump(), encoding="utf-8")
        self.path = path
        return path


def _entry(case: str, item: Any, where: str) -> Entry:
    if isinstance(item, str):  # `case: reason` -- a failure, any client, any check
        item = {"reason": item}
    if not isinstance(item, dict):
        raise BaselineError(f"{where}: {case}: an entry is a mapping (verdict, clients, checks, reason, link)")
    unknown = sorted(set(item) - {"verdict", "clients", "checks", "reason", "link"})
    if unknown:
        raise BaselineError(f"{where}: {case}: unknown key(s) {unknown}")
    raw = item.get("verdict", "fail")
    names = raw if isinstance(raw, list) else [raw]
    try:
        verdicts = [Verdict(str(v)) for v in names]
    except ValueError:
        raise BaselineError(f"{where}: {case}: verdict {raw!r}: one or more of "
                            f"{[v.value for v in EXPECTABLE]}") from None
    bad = [v.value for v in verdicts if v not in EXPECTABLE]
    if bad or not any(v is not Verdict.PASS for v in verdicts):
        raise BaselineError(f"{where}: {case}: a baseline expects a fail or crash (pass only beside one, for a "
                            f"flaky row); an error is kconform's own failure and never expected: {raw!r}")
    if not item.get("reason"):
        raise BaselineError(f"{where}: {case}: an entry needs a `reason`")
    clients = item.get("clients") or []
    clients = [clients] if isinstance(clients, str) else [str(c) for c in clients]
    return Entry(case, verdicts, str(item["reason"]).strip(), str(item.get("link") or ""), clients,
                 [str(c) for c in item.get("checks") or []])


def file_name(target: str) -> str:
    return f"{target}.yaml"


def load(paths: Iterable[str | Path]) -> dict[str, Baseline]:
    """Target -> its baseline, from files and directories (every *.yaml in one). A target named
    twice is an error: which file judges its rows must never be a question."""
    out: dict[str, Baseline] = {}
    for p in paths:
        p = Path(p)
        if p.is_dir():
            files = sorted(f for f in p.iterdir() if f.suffix in SUFFIXES and f.is_file())
        elif p.is_file():
            files = [p]
        else:
            raise BaselineError(f"{p}: no such baseline file or directory")
        for f in files:
            b = Baseline.load(f)
            if b.target in out:
                raise BaselineError(f"{f}: target {b.target!r} already has a baseline: {out[b.target].path}")
            out[b.target] = b
    return out


def apply(rows: Iterable[Row], baselines: dict[str, Baseline]) -> None:
    """Judge every row against its target's baseline (rows of a target without one: no entry)."""
    for row in rows:
        b = baselines.get(row.target)
        row.apply_baseline(b.expected_for(row.case, row.client) if b is not None else None)


def version_warnings(rows: Iterable[Row], baselines: dict[str, Baseline]) -> list[str]:
    """A line per target whose baseline was measured on another version than the one that ran."""
    seen: dict[str, str] = {}
    for r in rows:
        if r.target in baselines and r.target_version not in ("", "unknown"):
            seen.setdefault(r.target, r.target_version)
    return [f"baseline {b.source} was measured on {b.target} {b.version}; this run has {seen[t]}"
            for t, b in baselines.items() if t in seen and b.version and b.version != seen[t]]


# ============================================================================ updating
#: Where a Kafka bug a row names (Row.known_reference_bug) is tracked.
KAFKA_JIRA = "https://issues.apache.org/jira/browse/"


def _reason(row: Row) -> str:
    """A new entry's reason: the Kafka bug the case names for a failing Apache Kafka row (as
    the row's own reason says it), else the case's documented difference, else what failed."""
    if row.known_reference_bug and row.verdict is Verdict.FAIL:
        return f"{KNOWN_REFERENCE_BUG_PREFIX}{row.known_reference_bug}"
    if row.client_flaw and row.verdict is Verdict.FAIL:
        return f"{CLIENT_FLAW_PREFIX}{row.client_flaw}"
    if row.known_difference:
        return row.known_difference
    if row.verdict is Verdict.CRASH:
        return row.reason or "the target died"
    failed = row.failed_checks
    if failed:
        text = f"{failed[0].name}: {failed[0].message}".strip()
        text = re.sub(r"\s+", " ", text)
        return text if len(text) <= 300 else text[:299] + "…"
    return row.reason or "a check failed"


def _link(row: Row) -> str:
    """A new entry's link: the case file, when it documents the divergence (its
    `known_differences` says what the target does and what Kafka does); else none (the
    baseline's own link stands for it). For a Kafka bug the case names: the bug's JIRA page."""
    if row.known_reference_bug and row.verdict is Verdict.FAIL:
        return f"{KAFKA_JIRA}{row.known_reference_bug}"
    path = CASES_ROOT / f"{row.case}.yaml"
    if not row.known_difference or not path.is_file():
        return ""
    try:
        case = load_case(path)
    except CaseError:
        return ""
    return f"cases/{row.case}.yaml" if row.known_difference in case.known_differences.values() else ""


def update(baseline: Baseline | None, target: str, rows: Iterable[Row], link: str = "") -> Baseline:
    """The baseline of `target` after this run's rows (module doc); `baseline` is not changed.

    An entry stays as it is while the rows it names still fail as it says (no churn in the
    file); a client whose row now passes leaves it, a client whose row fails otherwise gets an
    entry as measured (keeping the reason and link). An entry for any client that loses a
    client becomes one for the clients of this run it still describes."""
    rows = [r for r in rows if r.target == target]
    old = baseline or Baseline(target, link=link)
    new = Baseline(target, version=old.version, link=old.link or link, path=old.path, note=old.note)
    versions = sorted({r.target_version for r in rows if r.target_version not in ("", "unknown")})
    if versions:
        new.version = versions[0]
    ran = {(r.case, r.client): r for r in rows}
    handled: set[tuple[str, str]] = set()

    def status(r: Row, e: Entry) -> Status:
        return judge_status(r.verdict, [c.name for c in r.failed_checks], e.expected(""))[0]

    for e in old.entries:
        if e.is_glob:
            new.entries.append(e)
            handled |= {k for k, r in ran.items() if e.matches(*k) and old.entry_for(*k) is e
                        and status(r, e) is not Status.FAIL}
            continue
        keep, drop = [], []
        for (case, client), r in ran.items():
            if not e.matches(case, client) or old.entry_for(case, client) is not e:
                continue
            if status(r, e) in (Status.FAIL, Status.UNEXPECTED_PASS):
                drop.append(client)  # a new failure gets its entry below; a pass leaves
            else:
                keep.append(client)
                handled.add((case, client))
        if not e.clients:
            if not drop:
                new.entries.append(e)
            elif keep:
                new.entries.append(dataclasses.replace(e, clients=sorted(keep)))
        elif [c for c in e.clients if c not in drop]:
            new.entries.append(dataclasses.replace(e, clients=[c for c in e.clients if c not in drop]))
    groups: dict[tuple, list[str]] = {}
    for (case, client), r in sorted(ran.items()):
        if (case, client) in handled or not r.verdict.diverges:
            continue
        prev = old.entry_for(case, client)
        prev = prev if prev is not None and not prev.is_glob else None
        verdicts = [r.verdict] + ([Verdict.PASS] if prev is not None and Verdict.PASS in prev.verdicts else [])
        checks = tuple(c.name for c in r.failed_checks) if r.verdict is Verdict.FAIL else ()
        reason, link_ = (prev.reason, prev.link) if prev is not None else (_reason(r), _link(r))
        groups.setdefault((case, tuple(verdicts), checks, reason, link_), []).append(client)
    for (case, verdicts, checks, reason, link_), clients in groups.items():
        new.entries.append(Entry(case, list(verdicts), reason, link_, sorted(clients), list(checks)))
    _merge_clients(new)
    return new


def _merge_clients(b: Baseline) -> None:
    """Entries of one case that say the same thing become one entry with their clients."""
    merged: dict[tuple, Entry] = {}
    for e in b.entries:
        key = (e.case, tuple(e.verdicts), tuple(e.checks), e.reason, e.link, bool(e.clients))
        if key in merged and e.clients:
            merged[key].clients = sorted(set(merged[key].clients) | set(e.clients))
        else:
            merged[key] = Entry(e.case, list(e.verdicts), e.reason, e.link, list(e.clients), list(e.checks))
    b.entries = list(merged.values())


def write_updated(rows: list[Row], baselines: dict[str, Baseline], out_dir: str | Path,
                  link: str = "") -> list[Path]:
    """Write the updated baseline of every target of `rows` into out_dir/<target>.yaml."""
    out_dir = Path(out_dir)
    written = []
    for target in dict.fromkeys(r.target for r in rows):
        b = update(baselines.get(target), target, rows, link)
        written.append(b.write(out_dir / file_name(target)))
    return written
