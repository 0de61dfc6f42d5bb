"""``analyze(root, out)``: every run under ``root`` -> tables, charts and a summary.

Outputs in ``out_dir``: ``matrix``, ``divergences``, ``flaky``,
``durations``, ``durations_by_client`` and ``release_changes`` (Apache Kafka against its own
previous release, per case x client) as Parquet (Spark) and CSV (one
file each, for people and spreadsheets; the matrix CSV says in one line how
each cell diverges, and its verdicts over the runs), ``matrix_wide.csv`` (case
down, target·client across), ``compatibility.md`` / ``.html`` (the
compatibility page of reports/matrix.py over the latest verdict of every cell,
with its earlier verdicts where they changed), ``per_run.csv``, the charts
``matrix.png``, ``durations.png`` and ``trend.png``, and ``summary.txt``. ``reports.cli
.report(..., analytics_dir=out_dir)`` puts the charts into the Allure report.
"""

from __future__ import annotations

import csv
import datetime as dt
import shutil
from pathlib import Path

from pyspark.sql.types import ArrayType, MapType, StructType

from conformance.provenance import portable_path
from conformance.results import Verdict

from ..matrix import from_rows, one_line
from ..matrix_page import history_text, render_html, render_markdown
from ..results import merge_metas, read_run_meta
from . import charts, jobs
from .load import load_runs, run_files
from .spark import spark_session


def _plain(v):
    if isinstance(v, dt.datetime):
        return v.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if v.tzinfo is None else v.isoformat()
    if isinstance(v, float):
        return round(v, 4)
    return v


def _collect(df) -> list[dict]:
    return [{k: _plain(v) for k, v in r.asDict(recursive=True).items()} for r in df.collect()]


def _write_csv(rows: list[dict], columns: list[str], path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=columns)
        w.writeheader()
        for r in rows:
            w.writerow({c: r.get(c) for c in columns})


def _table(df, name: str, out: Path, csv_extra: dict | None = None) -> list[dict]:
    """Write ``df`` as ``name.parquet`` and ``name.csv``; return its rows. Nested columns (a
    row's checks and diff) stay in the Parquet file only; ``csv_extra``: column -> function of
    a row, computed for the CSV (and the returned rows)."""
    pq = out / f"{name}.parquet"
    if pq.exists():
        shutil.rmtree(pq)
    df.coalesce(1).write.parquet(str(pq))
    rows = _collect(_timestamps_as_text(df))
    for col, fn in (csv_extra or {}).items():
        for r in rows:
            r[col] = fn(r)
    flat = [f.name for f in df.schema.fields if not isinstance(f.dataType, (ArrayType, StructType, MapType))]
    _write_csv(rows, flat + list(csv_extra or {}), out / f"{name}.csv")
    return rows


def _timestamps_as_text(df):
    """Timestamps as ISO-8601 UTC text, formatted by Spark (Python would use the machine's zone)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampType

    return df.select(*[F.date_format(f.name, "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias(f.name)
                       if isinstance(f.dataType, TimestampType) else F.col(f"`{f.name}`")
                       for f in df.schema.fields])


def _listed(lines: list[str], items: list[dict], limit: int, csv_name: str, fmt) -> None:
    """The first ``limit`` items as indented lines, then how many more the CSV holds."""
    lines.extend(f"  {fmt(i)}" for i in items[:limit])
    if len(items) > limit:
        lines.append(f"  ... {len(items) - limit} more in {csv_name}")


def _summary(n_runs: int, n_rows: int, matrix: list[dict], div: list[dict], flaky: list[dict],
             dur: list[dict], root: list[Path], changes: list[dict] = ()) -> str:
    lines = [f"kconform analytics over {n_runs} run(s), {n_rows} rows, under "
             f"{', '.join(portable_path(r) for r in root)}"]
    cases = sorted({r["case"] for r in matrix})
    targets = sorted({r["target"] for r in matrix})
    clients = sorted({r["client"] for r in matrix})
    lines.append(f"{len(cases)} cases x {len(targets)} targets ({', '.join(targets)}) x "
                 f"{len(clients)} clients ({', '.join(clients)})")
    lines.append("")
    lines.append("Latest verdicts per target:")
    for t in targets:
        counts: dict[str, int] = {}
        for r in matrix:
            if r["target"] == t:
                counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
        lines.append(f"  {t:<14} " + "  ".join(f"{v}={counts[v]}" for v in sorted(counts)))
    lines.append("")
    changed = [r for r in matrix if history_text(r["history"].split())]
    lines.append(f"Matrix across runs: {len(matrix)} cells, {len(changed)} whose verdict changed over the runs "
                 f"(compatibility.md: every cell, its divergence in one line and its earlier verdicts)")
    for r in [r for r in matrix if r["verdict"] != Verdict.PASS or r in changed][:25]:
        was = history_text(r["history"].split())
        lines.append(f"  {r['case']} on {r['target']} with {r['client']}: {r['verdict']}"
                     + (f" ({was})" if was else "") + (f" -- {r['divergence']}" if r["divergence"] else ""))
    current = [d for d in div if d["current"]]
    lines.append("")
    lines.append(f"Divergences from the reference: {len(div)} case x target x client ever, "
                 f"{len(current)} in their latest run")
    _listed(lines, current, 15, "divergences.csv",
            lambda d: f"{d['case']} on {d['target']} with {d['client']}: {d['paths']} "
                      f"(first {d['first_seen']}, {d['runs']} run(s))")
    lines.append("")
    lines.append(f"Flaky (verdict changed with the same versions): {len(flaky)}")
    _listed(lines, flaky, 15, "flaky.csv",
            lambda f: f"{f['case']} on {f['target']} {f['target_version']} with {f['client']} "
                      f"{f['client_version']}: {f['verdicts']} ({f['changes']} change(s), latest {f['latest_verdict']})")
    if changes:
        counts = {k: sum(1 for c in changes if c["change"] == k) for k in ("regressed", "fixed", "changed")}
        lines.append("")
        lines.append(f"Apache Kafka release to release: {len(changes)} verdict change(s) per case x client "
                     f"({counts['regressed']} regressed, {counts['fixed']} fixed, {counts['changed']} other)")
        _listed(lines, changes, 20, "release_changes.csv",
                lambda c: f"{c['case']} with {c['client']}: {c['from_release']} {c['from_verdict']} -> "
                          f"{c['to_release']} {c['to_verdict']} ({c['change']})")
    lines.append("")
    lines.append("Duration per case (s):   p50     p90     p99")
    for d in dur:
        lines.append(f"  {d['target']:<20} {d['p50_s']:7.3f} {d['p90_s']:7.3f} {d['p99_s']:7.3f}")
    return "\n".join(lines) + "\n"


def _compatibility_page(matrix: list[dict], roots: list[Path], out: Path) -> None:
    """reports/matrix.py's page over the latest verdict of every cell, with its history."""
    jsonl, parquet = run_files(roots)
    runs = merge_metas([dict(read_run_meta(Path(p).parent), results_dir=str(Path(p).parent)) for p in jsonl + parquet])
    history = {(r["case"], r["target"], r["client"]): r["history"].split() for r in matrix}
    m = from_rows(matrix, sorted(runs, key=lambda meta: meta.get("started_at") or ""), history=history)
    command = ("kconform analyze " + " ".join(f"--results {portable_path(r)}" for r in roots)
               + f" --out {portable_path(out)}")
    (out / "compatibility.md").write_text(render_markdown(m, command), encoding="utf-8")
    (out / "compatibility.html").write_text(render_html(m, command), encoding="utf-8")


def analyze(results_root: str | Path | list, out_dir: str | Path, master: str = "local[*]", *, spark=None) -> str:
    """Analyse every run under ``results_root`` (a directory, or several: e.g. the N shards'
    results of one run, which share its run id and so are one run) into ``out_dir``; return
    the text summary.

    ``spark``: an existing session to use (tests share one); otherwise one is
    started with :func:`~.spark.spark_session` and stopped at the end.
    """
    roots = [Path(r) for r in (results_root if isinstance(results_root, (list, tuple)) else [results_root])]
    root, out = roots, Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    own = spark is None
    spark = spark or spark_session(master)
    try:
        rows = load_runs(spark, root).cache()
        n_rows = rows.count()
        n_runs = rows.select("run_id").distinct().count()
        matrix = _table(jobs.matrix(rows), "matrix", out, {"divergence": one_line})
        div = _table(jobs.divergences(rows), "divergences", out)
        flaky = _table(jobs.flaky(rows), "flaky", out)
        dur = _table(jobs.durations(rows), "durations", out)
        _table(jobs.durations_by_client(rows), "durations_by_client", out)
        changes = _table(jobs.release_changes(rows), "release_changes", out)
        per_run = _collect(_timestamps_as_text(jobs.per_run(rows)))
        _write_csv(per_run, ["run_id", "target", "run_at", "rows", "passed", "diverging"], out / "per_run.csv")
        rows.unpersist()
    finally:
        if own:
            spark.stop()
    cols = sorted({(r["target"], r["client"]) for r in matrix})
    wide: dict[str, dict] = {}
    for r in matrix:
        wide.setdefault(r["case"], {"case": r["case"]})[f"{r['target']}/{r['client']}"] = r["verdict"]
    _write_csv([wide[c] for c in sorted(wide)], ["case"] + [f"{t}/{c}" for t, c in cols], out / "matrix_wide.csv")
    charts.matrix_chart(matrix, out / "matrix.png")
    charts.durations_chart(dur, out / "durations.png")
    charts.trend_chart([{**r, "run_at": dt.datetime.fromisoformat(str(r["run_at"]).replace("Z", "+00:00"))}
                        for r in per_run], out / "trend.png")
    _compatibility_page(matrix, root, out)
    text = _summary(n_runs, n_rows, matrix, div, flaky, dur, root, changes)
    (out / "summary.txt").write_text(text, encoding="utf-8")
    return text
