"""Kafka's history as a page: published bugs x releases, clients x releases, and which cases
changed outcome between consecutive releases -- from the rows of release sweeps.

Why a page of its own (beside the compatibility page): the compatibility page compares targets
with ONE reference release; this one compares Kafka with itself. A regression case
(cases/regressions/) fails on the releases that shipped its bug and passes on those that fixed
it, so the bug x release matrix shows, per bug, where it was measured and the first release
measured to be fixed; the library x release section is a regression detector for Kafka itself
(a case whose verdict changed from one release to the next).

Inputs: results directories of `kconform run --target apache-kafka@V ...` (any number of
releases per run, any number of runs; a later row wins per case x target x client, as on the
compatibility page), and a lookup of each case's `regression:` section in the case library
(reports never import the runner: the CLI hands the lookup in). Releases are the Apache Kafka
targets' versions; every other target (the embedded broker) is a column after them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from conformance.dsl.model import client_of
from conformance.results import Verdict
from conformance.targets.kafka_releases import metadata_mode
from conformance.targets.maven import DEFAULT_KAFKA_VERSION

from .matrix import one_line, shorten
from .matrix_page import run_command, shards_note
from .results import read_runs

#: case id -> its regression section as a dict (key, component, affected, fixed, summary), or None.
RegressionLookup = Callable[[str], "dict | None"]

MARK = {Verdict.PASS: "✅ pass", Verdict.FAIL: "❌ fail", Verdict.CRASH: "💥 crash",
        Verdict.NOT_APPLICABLE: "➖ n/a", Verdict.ERROR: "⚠️ error"}
KAFKA = "apache-kafka"
BASIC_CASES = ("txn/basic_commit", "txn/basic_abort")


def version_key(version: str) -> tuple:
    """Sort key of a release label ("3.5.2", "3.5.2-zk", "4.4.0"): numerically, a -zk variant
    right after its release."""
    nums = tuple(int(x) for x in re.findall(r"\d+", version.split("-")[0]))
    return nums + ((1,) if version.endswith("-zk") else (0,))


def release_of(row: dict) -> str | None:
    """The Kafka release a row ran on (its target is apache-kafka or apache-kafka@V), else None."""
    base, _, version = row["target"].partition("@")
    if base != KAFKA:
        return None
    started = row.get("target_version")
    # A row not applicable before its target started has no version ("unknown"): plain
    # apache-kafka is the default release.
    return version or (started if started and started != "unknown" else DEFAULT_KAFKA_VERSION)


@dataclass
class History:
    #: Kafka releases in version order, then the other targets.
    releases: list[str]
    others: list[str]
    #: (case, column, client) -> row; column is a release label or another target's name
    cells: dict[tuple[str, str, str], dict]
    clients: list[str]
    regressions: dict[str, dict]
    runs: list[dict]
    titles: dict[str, str] = field(default_factory=dict)

    @property
    def columns(self) -> list[str]:
        return self.releases + self.others

    def verdict(self, case: str, column: str, client: str) -> str | None:
        row = self.cells.get((case, column, client))
        return row["verdict"] if row else None

    def cases(self) -> list[str]:
        return sorted({k[0] for k in self.cells})


def build(results_dirs: list[Path], regression_of: RegressionLookup) -> History:
    cells: dict[tuple[str, str, str], dict] = {}
    releases, others, clients = set(), [], []
    read = read_runs(results_dirs)   # the shards of one run are one run
    for r in read.rows:
        rel = release_of(r)
        column = rel if rel is not None else r["target"]
        if rel is not None:
            releases.add(rel)
        elif column not in others:
            others.append(column)
        if r["client"] not in clients:
            clients.append(r["client"])
        cells[(r["case"], column, r["client"])] = r
    regressions = {}
    for case in {k[0] for k in cells}:
        reg = regression_of(case)
        if reg:
            regressions[case] = reg
    return History(releases=sorted(releases, key=version_key), others=others, cells=cells, clients=clients,
                   regressions=regressions, runs=read.runs,
                   titles={k[0]: r.get("case_title") or k[0] for k, r in cells.items()})


def first_fixed(verdicts: list[tuple[str, str | None]]) -> str | None:
    """The first release measured fixed: it passes, some earlier release failed, and no later
    release fails again (n/a, error and unmeasured releases say nothing either way)."""
    ran = [(rel, v) for rel, v in verdicts if v in (Verdict.PASS, Verdict.FAIL, Verdict.CRASH)]
    for i, (rel, v) in enumerate(ran):
        if v == Verdict.PASS and any(w != Verdict.PASS for _, w in ran[:i]) \
                and all(w == Verdict.PASS for _, w in ran[i:]):
            return rel
    return None


def changes(h: History) -> list[tuple[str, str, str, str, str, str]]:
    """(case, client, release, verdict, next release, its verdict) for every case whose verdict
    differs between two consecutive releases it ran on (n/a and error rows skipped: they say the
    case did not run there, not what the release does)."""
    out = []
    for case in h.cases():
        for client in h.clients:
            seq = [(rel, h.verdict(case, rel, client)) for rel in h.releases]
            seq = [(rel, v) for rel, v in seq if v in (Verdict.PASS, Verdict.FAIL, Verdict.CRASH)]
            for (a, va), (b, vb) in zip(seq, seq[1:]):
                if va != vb:
                    out.append((case, client, a, va, b, vb))
    return out


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _cell(h: History, case: str, column: str, client: str) -> str:
    row = h.cells.get((case, column, client))
    if row is None:
        return ""
    text = MARK[Verdict(row["verdict"])]
    if row["verdict"] in (Verdict.NOT_APPLICABLE, Verdict.ERROR):
        text += f" ({_md(shorten(one_line(row, 60), 60))})"
    return text


def _client_label(h: History, client: str) -> str:
    versions = {r.get("client_version") for (c, _, cl), r in h.cells.items() if cl == client} - {None, ""}
    return f"{client} {', '.join(sorted(versions))}".strip()


def render(h: History, command: str | None = None) -> str:
    out = ["# Kafka's history: published bugs and the library across releases", "",
           "Generated by kconform -- do not edit by hand: regenerate it from the runs' results with", "",
           "```", command or "kconform matrix --history --results DIR [--results DIR ...] --out FILE", "```", "",
           "from these runs (a later run's row replaces an earlier one's for the same case, release and client):", ""]
    for meta in h.runs:
        out.append(f"- `{run_command(meta)}` -- run `{meta.get('run_id', '?')}`{shards_note(meta)}, "
                   f"started {meta.get('started_at', '?')}")
    out += ["", "Releases (columns) in version order; "
            + (f"other targets: {', '.join(h.others)}. " if h.others else "")
            + "Clients: " + ", ".join(_client_label(h, c) for c in h.clients) + ".", ""]
    out += _releases_section(h) + _bugs_section(h) + _client_bugs_section(h) + _changes_section(h)
    return "\n".join(out) + "\n"


def _releases_section(h: History) -> list[str]:
    out = ["## Releases: does each start, with transactions working", "",
           "`txn/basic_commit` and `txn/basic_abort` on each release, and the verdicts of every row measured there.", "",
           "| release | metadata | " + " | ".join(BASIC_CASES) + " | pass | fail | crash | n/a | error |",
           "|---|---|---|---|---:|---:|---:|---:|---:|"]
    for rel in h.releases:
        basic = []
        for case in BASIC_CASES:
            vs = [h.verdict(case, rel, c) for c in h.clients if h.verdict(case, rel, c)]
            basic.append(", ".join(MARK[Verdict(v)] for v in dict.fromkeys(vs)) if vs else "not run")
        counts = {v: 0 for v in Verdict}
        for (case, col, client), r in h.cells.items():
            if col == rel:
                counts[Verdict(r["verdict"])] += 1
        try:
            mode = metadata_mode(rel)
        except ValueError:
            mode = "?"
        out.append(f"| {rel} | {mode} | " + " | ".join(basic) + " | " + " | ".join(
            str(counts[v]) for v in (Verdict.PASS, Verdict.FAIL, Verdict.CRASH, Verdict.NOT_APPLICABLE, Verdict.ERROR))
            + " |")
    return out + [""]


def _bugs_section(h: History) -> list[str]:
    cases = sorted((c for c, reg in h.regressions.items() if reg["component"] == "broker"),
                   key=lambda c: h.regressions[c]["key"])
    out = ["## Published broker bugs x releases", "",
           "Each row is a case of `cases/regressions/`: it fails on the releases that shipped the bug and passes on "
           "those that fixed it. *First fixed (measured)*: the first release that passes after a failing one, with "
           "no failure after it. A failing Apache Kafka row is that release's own bug (`known_reference_bug`), "
           "not a finding about another target.", ""]
    if not cases:
        return out + ["No regression case in these runs.", ""]
    cols = h.columns
    out += ["| bug | what goes wrong | published affected -> fixed | first fixed (measured) | "
            + " | ".join(cols) + " |", "|---|---|---|---|" + "---|" * len(cols)]
    for case in cases:
        reg = h.regressions[case]
        for client in h.clients:
            if not any((case, col, client) in h.cells for col in cols):
                continue
            fixed = first_fixed([(rel, h.verdict(case, rel, client)) for rel in h.releases])
            label = f"[{reg['key']}](../cases/regressions/{case.split('/', 1)[1]}.yaml)"
            if len(h.clients) > 1:
                label += f" ({client})"
            out.append(f"| {label} | {_md(reg['summary'])} | {_md(reg['affected'])} -> {_md(reg['fixed'] or 'none')} "
                       f"| {fixed or '-'} | " + " | ".join(_cell(h, case, col, client) for col in cols) + " |")
    return out + [""]


def _client_bugs_section(h: History) -> list[str]:
    cases = sorted((c for c, reg in h.regressions.items() if reg["component"] != "broker"),
                   key=lambda c: h.regressions[c]["key"])
    if not cases:
        return []
    out = ["## Published client bugs x client releases", "",
           "Client bugs run with the client at several releases (`java@VERSION`, `confluent@VERSION`, ...); each "
           "cell is the verdict on the release named at the top of the column.", ""]
    def runs_with(case: str, client: str) -> bool:
        # a client bug runs with its client and that client's releases; other rows are n/a by rule
        return client_of(client) == h.regressions[case]["component"]

    cols = [(col, c) for c in h.clients for col in h.columns
            if any((case, col, c) in h.cells and runs_with(case, c) for case in cases)]
    out += ["| bug | what goes wrong | published affected -> fixed | " + " | ".join(
        f"{_client_label(h, c)} on {col}" for col, c in cols) + " |", "|---|---|---|" + "---|" * len(cols)]
    for case in cases:
        reg = h.regressions[case]
        out.append(f"| {reg['key']} ({reg['component']}) | {_md(reg['summary'])} | {_md(reg['affected'])} -> "
                   f"{_md(reg['fixed'] or 'none')} | " + " | ".join(
                       _cell(h, case, col, c) if runs_with(case, c) else "" for col, c in cols) + " |")
    return out + [""]


def _changes_section(h: History) -> list[str]:
    changed = changes(h)
    library = [c for c in h.cases() if c not in h.regressions]
    out = ["## The library across releases: what changed between consecutive releases", "",
           "A regression detector for Kafka itself: every case (regression cases included) whose verdict on one "
           "release differs from its verdict on the next release it ran on.", ""]
    if not changed:
        out.append("No case changed outcome between consecutive releases in these runs.")
    else:
        out += ["| case | client | from | to |", "|---|---|---|---|"]
        for case, client, a, va, b, vb in changed:
            out.append(f"| {case} | {client} | {a}: {MARK[Verdict(va)]} | {b}: {MARK[Verdict(vb)]} |")
    out.append("")
    if library:
        out += ["### Every other case on every release", "",
                "| case | client | " + " | ".join(h.columns) + " |", "|---|---|" + "---|" * len(h.columns)]
        for case in library:
            for client in h.clients:
                if any((case, col, client) in h.cells for col in h.columns):
                    out.append(f"| {case} | {client} | " + " | ".join(_cell(h, case, col, client)
                                                                       for col in h.columns) + " |")
        out.append("")
    return out


def write_page(results_dirs: list[str | Path], out: str | Path, regression_of: RegressionLookup,
               command: str | None = None) -> Path:
    h = build([Path(d) for d in results_dirs], regression_of)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(h, command), encoding="utf-8")
    return path
