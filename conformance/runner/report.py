"""Terminal output of a run: a rich progress bar while it runs, a summary table after.

Only presentation: the results file is the record (docs/results-schema.md).
"""
from __future__ import annotations

import contextlib
import sys
from collections import Counter
from pathlib import Path

from conformance.compare import render

from ..results import ResultsFile, Row, Status, Verdict

VERDICT_STYLE = {Verdict.PASS: "green", Verdict.FAIL: "red", Verdict.ERROR: "magenta",
                 Verdict.NOT_APPLICABLE: "yellow", Verdict.CRASH: "bold red"}
#: The summary table's columns.
COLUMNS = (Verdict.PASS, Verdict.FAIL, Verdict.CRASH, Verdict.ERROR, Verdict.NOT_APPLICABLE)


@contextlib.contextmanager
def progress_callbacks(total: int, jobs: int = 1, plain: bool = False):
    """(on_row, on_start) callbacks for runner.run: a progress bar with one line per worker
    (what it runs, for how long), or plain lines when stderr is not a terminal."""
    if plain or not sys.stderr.isatty():
        def on_row(row: Row, done, total_, worker):
            print(f"[{done}/{total_}] {row.verdict:<14} {row.case} [{row.target}-{row.client}] "
                  f"{row.duration_s:.1f}s" + (f" (w{worker})" if jobs > 1 else "")
                  + (f"  ({row.reason})" if row.reason else ""),
                  file=sys.stderr, flush=True)

        yield on_row, None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(bar_width=None), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=False) as progress:
        task = progress.add_task(f"{jobs} worker(s)", total=total)
        lines = {w: progress.add_task(f"  w{w}: starting", total=None, start=False) for w in range(1, jobs + 1)}

        def on_start(case, target, client, worker):
            line = lines.get(worker)
            if line is not None:
                progress.reset(line, start=True, total=None, description=f"  w{worker}: {case} [{target}-{client}]")

        def on_row(row: Row, done, total_, worker):
            style = VERDICT_STYLE.get(row.verdict, "white")
            if row.verdict is not Verdict.PASS:
                why = row.reason or "; ".join(c.name + ": " + c.message for c in row.failed_checks)[:300]
                progress.console.print(f"[{style}]{row.verdict}[/] {row.case} "
                                       f"[{row.target}-{row.client}] {why}", markup=True,
                                       highlight=False)
            progress.update(task, completed=done, total=total_)  # a shard runs fewer than planned
            line = lines.get(worker)
            if line is not None and done == total_:
                progress.update(line, description=f"  w{worker}: done")

        yield on_row, on_start


#: The summary's columns against a baseline (Status), after the verdicts.
STATUS_COLUMNS = (Status.EXPECTED_FAIL, Status.FAIL, Status.UNEXPECTED_PASS)
STATUS_HEADS = {Status.EXPECTED_FAIL: "expected fail", Status.FAIL: "NEW fail", Status.UNEXPECTED_PASS: "NEW pass"}


def print_summary(rows: list[Row], results_dir: Path, baselines: dict | None = None) -> None:
    by = Counter((r.target, r.client, r.verdict) for r in rows)
    by_status = Counter((r.target, r.client, r.status) for r in rows)
    pairs = sorted({(r.target, r.client) for r in rows})
    baselined = bool(baselines) and any(r.target in baselines for r in rows)
    extra = STATUS_COLUMNS if baselined else ()
    try:
        from rich.console import Console
        from rich.table import Table

        table = Table(title="kconform run")
        for col in ("target", "client", *COLUMNS, *(STATUS_HEADS[s] for s in extra)):
            table.add_column(col)
        for t, c in pairs:
            table.add_row(t, c, *(str(by[(t, c, v)]) for v in COLUMNS), *(str(by_status[(t, c, s)]) for s in extra))
        Console(stderr=True).print(table)
    except ImportError:
        for t, c in pairs:
            print(t, c, {str(v): by[(t, c, v)] for v in COLUMNS}, {str(s): by_status[(t, c, s)] for s in extra},
                  file=sys.stderr)
    if baselined:
        used = sorted({b.source for t, b in baselines.items() if any(r.target == t for r in rows)})
        print(f"\nbaselines: {', '.join(used)}", file=sys.stderr)
        for status, words in ((Status.FAIL, "NEWLY FAILS"), (Status.UNEXPECTED_PASS, "NEWLY PASSES")):
            for r in (r for r in rows if r.status is status):
                print(f"{words}: {r.case} [{r.target}-{r.client}] -- {r.status_note()}", file=sys.stderr)
        n = sum(1 for r in rows if r.status is Status.EXPECTED_FAIL)
        print(f"{n} row(s) fail as their baseline expects", file=sys.stderr)
    for r in rows:
        if r.diff:
            print(f"\n{r.case} [{r.target}-{r.client}] differs from {r.reference_target}:", file=sys.stderr)
            print(render(r.diff[:30], r.reference_target, r.target), file=sys.stderr)
    print(f"\nresults: {ResultsFile(results_dir).path}", file=sys.stderr)
