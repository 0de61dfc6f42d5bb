"""The compatibility page: the matrix of reports/matrix.py as Markdown (a file to commit and
read on GitHub) and as one HTML file (colours, the whole divergence on hover).

Layout:
- how the page was made (the `kconform run` and `kconform matrix` commands, run ids, wall
  times) and the versions of every target and client;
- a count of verdicts per target x client;
- per theme (the case id's folder), a table: cases down, target x client across, each cell the
  verdict and the divergence in one line (reports.matrix.one_line), and the cell's earlier
  verdicts when it has a history (`kconform analyze` over many runs);
- per target, its divergences with what Kafka does and the case's documented difference, the
  cases whose outcome differs although the checks hold, its not-applicable reasons, and
  kconform's own errors.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from conformance.results import Verdict

from .matrix import CELL_CHARS, DIFFERS, KnownLookup, Matrix, build, by_documented, documented, one_line, shorten

VERDICT_MARK = {Verdict.PASS: "✅", Verdict.FAIL: "❌", Verdict.CRASH: "💥", Verdict.NOT_APPLICABLE: "➖",
                Verdict.ERROR: "⚠️"}
VERDICT_WORD = {Verdict.PASS: "pass", Verdict.FAIL: "fail", Verdict.CRASH: "crash", Verdict.NOT_APPLICABLE: "n/a",
                Verdict.ERROR: "error"}


def _md(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace("\n", " ")


def _anchor(text: str) -> str:
    """GitHub's heading anchor for `text`."""
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def history_text(verdicts: list[str] | None) -> str:
    """`was pass, fail` -- the earlier verdicts of a cell, when they were not all the same as now."""
    if not verdicts or len(set(verdicts)) < 2:
        return ""
    return "was " + ", ".join(VERDICT_WORD[v] for v in verdicts[:-1])


def cell_text(row: dict | None, limit: int = CELL_CHARS, history: list[str] | None = None) -> str:
    if row is None:
        return ""
    word = f"{VERDICT_MARK[row['verdict']]} {VERDICT_WORD[row['verdict']]}"
    if row["verdict"] == Verdict.FAIL and documented(row):
        word += " (documented)"
    was = history_text(history)
    if was:
        word += f" ({was})"
    line = one_line(row, limit)
    return f"{word}: {line}" if line else word


def counts(m: Matrix) -> dict[tuple[str, str], dict[str, int]]:
    out: dict[tuple[str, str], dict[str, int]] = {col: {} for col in m.columns}
    for (case, t, c), r in m.rows.items():
        if (t, c) in out:
            out[(t, c)][r["verdict"]] = out[(t, c)].get(r["verdict"], 0) + 1
    return out


def run_command(meta: dict) -> str:
    """The command line that made the run, as run.json recorded it (no machine paths); for the
    shards of one run, shard 1's with `--shard I/N`; for runs made before it was recorded, the
    command rebuilt from the run's targets and clients."""
    shards = meta.get("shards") or []
    command = (shards[0] if shards else meta).get("command")
    if command:
        if shards:
            command = re.sub(r"--shard \d+/(\d+)", r"--shard I/\1", command)
        return command
    parts = ["kconform run"]
    parts += [f"--target {t}" for t in meta.get("targets") or []]
    parts += [f"--client {c}" for c in meta.get("clients") or []]
    if meta.get("reference_target"):
        parts.append(f"--reference {meta['reference_target']}")
    if meta.get("jobs"):
        parts.append(f"-j {meta['jobs']}")
    parts.append(f"--results {Path(meta.get('results_dir', 'DIR')).name}")
    return " ".join(parts)


def shards_note(meta: dict) -> str:
    """` as 3 shards (wall times 4 min 10 s, ...)`, and what is missing, for a sharded run."""
    shards = meta.get("shards")
    if not shards:
        return ""
    text = f" as {meta.get('shard_count', len(shards))} shards (wall times {', '.join(_wall(s) for s in shards)})"
    if meta.get("missing_shards"):
        text += f" -- MISSING shard(s) {', '.join(map(str, meta['missing_shards']))}: cells of theirs are absent"
    return text


def _made_with(meta: dict) -> str:
    """`, kconform 0.1.0 (git 3b3b087), Python 3.11.7` when run.json recorded the versions."""
    v = meta.get("versions") or {}
    parts = [f"kconform {v['kconform']}" if v.get("kconform") else "", f"Python {v['python']}" if v.get("python") else ""]
    parts = [p for p in parts if p]
    return (", " + ", ".join(parts)) if parts else ""


def _wall(meta: dict) -> str:
    from datetime import datetime

    try:
        a = datetime.fromisoformat(meta["started_at"].replace("Z", "+00:00"))
        b = datetime.fromisoformat(meta["finished_at"].replace("Z", "+00:00"))
    except (KeyError, ValueError, AttributeError):
        return "unknown (the run did not finish)"
    s = int((b - a).total_seconds())
    return f"{s // 3600} h {s % 3600 // 60:02d} min" if s >= 3600 else f"{s // 60} min {s % 60:02d} s"


def _provenance(m: Matrix, command: str | None) -> list[str]:
    lines = ["Generated by kconform -- do not edit by hand: regenerate it from the runs' results with",
             "", "```", command or "kconform matrix --results DIR [--results DIR ...] --out FILE", "```", "",
             "from these runs" + (" (a later run's row replaces an earlier one's for the same case, target and "
                                  "client: reruns supersede what they repeat)" if len(m.runs) > 1 else "") + ":", ""]
    for meta in m.runs:
        n_cases = len(meta.get("cases") or [])
        lines.append(f"- `{run_command(meta)}` -- run `{meta.get('run_id', '?')}`{shards_note(meta)}, {n_cases} cases, "
                     f"started {meta.get('started_at', '?')}, wall time {_wall(meta)}{_made_with(meta)}")
    lines.append("")
    if m.documented_later:
        lines += [_later_note(m), ""]
    return lines


def _later_note(m: Matrix) -> str:
    return (f"{m.documented_later} failed cells come from runs made before the runner recorded each row's "
            f"documented difference: their *documented* mark and text are the case library's "
            f"`known_differences` (and the targets' client differences) as of this page.")


def render_markdown(m: Matrix, command: str | None = None) -> str:
    ref = m.reference or "the reference"
    out = ["# Compatibility with Apache Kafka", ""]
    out.append(f"Every case of kconform's library on every target with every client. The expected outcome of "
               f"each case is what Apache Kafka does; **{ref}** is the reference every other target is compared "
               f"with. A cell is the verdict and, in one line, how the target diverges: the failed check, the "
               f"crash, why the case does not apply, or where the outcome differs from Kafka's although the "
               f"checks hold. Each target's section below lists its divergences with what Kafka does.")
    out.append("")
    out += _provenance(m, command)
    out += ["Verdicts: ✅ pass · ❌ fail (the target diverges; *documented* when the case's `known_differences` "
            "describes it) · 💥 crash (the target died or stopped answering during the case) · ➖ n/a (the "
            "target cannot do what the case needs: the reason) · ⚠️ error (kconform could not run the case)", ""]
    out += ["## Targets and clients", "", "| | version |", "|---|---|"]
    out += [f"| target `{t}` | {_md(m.versions.get(t, ''))} |" for t in m.targets]
    out += [f"| client `{c}` | {_md(v)} |" for c, v in m.client_versions.items()]
    out += ["", "## Summary", "", "| target · client | " + " | ".join(VERDICT_WORD.values()) + " |",
            "|---|" + "---:|" * len(VERDICT_WORD)]
    for (t, c), n in counts(m).items():
        link = f"[{t}](#{_anchor(t)})" if t in m.divergences else t
        out.append(f"| {link} · {c} | " + " | ".join(str(n.get(v, 0)) for v in VERDICT_WORD) + " |")
    out.append("")
    out += ["## Matrix", ""]
    head = "| case | " + " | ".join(f"{t} · {c}" for t, c in m.columns) + " |"
    for th, cases in m.themes.items():
        out += [f"### {th}", "", head, "|---|" + "---|" * len(m.columns)]
        for case in cases:
            cells = [_md(cell_text(m.rows.get((case, t, c)), history=m.history.get((case, t, c))))
                     for t, c in m.columns]
            out.append(f"| `{case}` | " + " | ".join(cells) + " |")
        out.append("")
    for t in m.targets:
        if t == m.reference:
            continue
        out += _target_section_md(m, t)
    return "\n".join(out).rstrip() + "\n"


def _target_section_md(m: Matrix, t: str) -> list[str]:
    out = [f"## {t}", "", f"Version: {_md(m.versions.get(t, ''))}.", ""]
    divs = m.divergences.get(t, [])
    real = [d for d in divs if d.kind != DIFFERS]
    out += [f"### Divergences from Apache Kafka ({len(real)})", ""]
    if not real:
        out += ["None in these runs.", ""]
    singles, groups = by_documented(real)
    for doc, ds in groups:
        clients = sorted({c for d in ds for c in d.clients})
        out.append(f"- **{len(ds)} cases** ({', '.join(clients)}) fail the same documented way: {_md(doc)}")
        for d in ds:
            first = d.target_does[0] if d.target_does else d.kind
            out.append(f"  - `{d.case}` ({', '.join(d.clients)}): {_md(shorten(first, 2 * CELL_CHARS))}")
    for d in singles:
        kind = "crashes" if d.kind == Verdict.CRASH else "fails"
        out.append(f"- **`{d.case}`** ({', '.join(d.clients)}) {kind} -- {_md(d.title)}")
        for line in d.target_does:
            out.append(f"  - {t}: {_md(line)}")
        for line in d.kafka_does:
            out.append(f"  - {_md(m.reference_label)}: {_md(line)}")
        for line in d.diff:
            out.append(f"  - differs: {_md(line)}")
        if d.documented:
            out.append(f"  - documented: {_md(d.documented)}")
    out.append("")
    differs = [d for d in divs if d.kind == DIFFERS]
    if differs:
        out += [f"### Outcome differs from Kafka's, checks hold ({len(differs)})", ""]
        for d in differs:
            out.append(f"- `{d.case}` ({', '.join(d.clients)}): " + "; ".join(_md(x) for x in d.diff))
        out.append("")
    na = m.not_applicable.get(t, [])
    if na:
        n = sum(len(c) for _, c in na)
        out += [f"### Not applicable ({n} case{'s' if n != 1 else ''})", ""]
        for reason, cases in na:
            out.append(f"- {_md(reason)}: " + ", ".join(f"`{c}`" for c in cases))
        out.append("")
    errs = m.errors.get(t, [])
    if errs:
        out += [f"### kconform errors ({len(errs)})", ""]
        out += [f"- `{case}` ({client}): {_md(reason)}" for case, client, reason in errs]
        out.append("")
    return out


# ============================================================================ HTML
_CSS = """
body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222;max-width:none}
h1{font-size:20px}h2{font-size:17px;margin-top:28px}h3{font-size:14px}
table{border-collapse:collapse;margin:6px 0 14px}th,td{border:1px solid #ccc;padding:3px 6px;vertical-align:top;
text-align:left}th{background:#f3f3f3;position:sticky;top:0}td.case{white-space:nowrap;font-family:ui-monospace,monospace}
td.pass{background:#e6f4ea}td.fail{background:#fde2e1}td.crash{background:#f6b7b2;font-weight:600}
td.not_applicable{background:#f1f1f1;color:#666}td.error{background:#fff1cc}
td.differs{background:#fff8e1}code{font-family:ui-monospace,monospace}li{margin:2px 0}
"""


def render_html(m: Matrix, command: str | None = None) -> str:
    e = html.escape
    ref = m.reference or "the reference"
    p = [f"<!doctype html><html><head><meta charset='utf-8'><title>Compatibility with Apache Kafka</title>"
         f"<style>{_CSS}</style></head><body><h1>Compatibility with Apache Kafka</h1>",
         f"<p>Every case on every target with every client; <b>{e(ref)}</b> is the reference. A cell is the verdict "
         f"and the divergence in one line (hover for all of it); each target's section lists its divergences "
         f"with what Kafka does.</p>",
         f"<p>Generated by kconform -- do not edit by hand: <code>{e(command or 'kconform matrix')}</code>, "
         f"from{' (a later run replaces an earlier one per case, target and client)' if len(m.runs) > 1 else ''}:"
         f"</p><ul>"]
    p += [f"<li><code>{e(run_command(meta))}</code> -- run <code>{e(str(meta.get('run_id', '?')))}</code>, "
          f"{e(shards_note(meta))}, wall time {e(_wall(meta))}{e(_made_with(meta))}</li>" for meta in m.runs]
    p.append("</ul>" + (f"<p>{e(_later_note(m))}</p>" if m.documented_later else "") + "<table><tr><th></th><th>version</th></tr>")
    p += [f"<tr><td>target {e(t)}</td><td>{e(m.versions.get(t, ''))}</td></tr>" for t in m.targets]
    p += [f"<tr><td>client {e(c)}</td><td>{e(v)}</td></tr>" for c, v in m.client_versions.items()]
    p.append("</table><h2>Summary</h2><table><tr><th>target · client</th>"
             + "".join(f"<th>{e(v)}</th>" for v in VERDICT_WORD.values()) + "</tr>")
    for (t, c), n in counts(m).items():
        p.append(f"<tr><td>{e(t)} · {e(c)}</td>" + "".join(f"<td>{n.get(v, 0)}</td>" for v in VERDICT_WORD) + "</tr>")
    p.append("</table><h2>Matrix</h2>")
    head = "<tr><th>case</th>" + "".join(f"<th>{e(t)}<br>{e(c)}</th>" for t, c in m.columns) + "</tr>"
    for th, cases in m.themes.items():
        p.append(f"<h3>{e(th)}</h3><table>{head}")
        for case in cases:
            tds = []
            for t, c in m.columns:
                row = m.rows.get((case, t, c))
                if row is None:
                    tds.append("<td></td>")
                    continue
                cls = DIFFERS if row["verdict"] == Verdict.PASS and row.get("diff") else row["verdict"]
                full = one_line(row, 10_000)
                text = cell_text(row, 60, m.history.get((case, t, c)))
                tds.append(f"<td class='{cls}' title='{e(full, quote=True)}'>{e(text)}</td>")
            p.append(f"<tr><td class='case' title='{e(m.titles.get(case, ''), quote=True)}'>{e(case)}</td>"
                     + "".join(tds) + "</tr>")
        p.append("</table>")
    for t in m.targets:
        if t == m.reference:
            continue
        p.append(f"<h2 id='{e(_anchor(t))}'>{e(t)}</h2><p>Version: {e(m.versions.get(t, ''))}</p>")
        real = [d for d in m.divergences.get(t, []) if d.kind != DIFFERS]
        p.append(f"<h3>Divergences from Apache Kafka ({len(real)})</h3><ul>")
        singles, groups = by_documented(real)
        for doc, ds in groups:
            clients = sorted({c for d in ds for c in d.clients})
            p.append(f"<li><b>{len(ds)} cases</b> ({e(', '.join(clients))}) fail the same documented way: {e(doc)}<ul>"
                     + "".join(f"<li><code>{e(d.case)}</code> ({e(', '.join(d.clients))}): "
                               f"{e(d.target_does[0] if d.target_does else d.kind)}</li>" for d in ds) + "</ul></li>")
        for d in singles:
            items = ([f"<li>{e(t)}: {e(x)}</li>" for x in d.target_does] + [f"<li>{e(m.reference_label)}: {e(x)}</li>" for x in d.kafka_does]
                     + [f"<li>differs: {e(x)}</li>" for x in d.diff]
                     + ([f"<li>documented: {e(d.documented)}</li>"] if d.documented else []))
            p.append(f"<li><b><code>{e(d.case)}</code></b> ({e(', '.join(d.clients))}) "
                     f"{'crashes' if d.kind == Verdict.CRASH else 'fails'} -- {e(d.title)}<ul>{''.join(items)}</ul></li>")
        p.append("</ul>")
        na = m.not_applicable.get(t, [])
        if na:
            p.append("<h3>Not applicable</h3><ul>" + "".join(
                f"<li>{e(reason)}: {e(', '.join(cases))}</li>" for reason, cases in na) + "</ul>")
    p.append("</body></html>")
    return "".join(p)


def write_page(results_dirs: list[str | Path], out: str | Path, command: str | None = None,
               known: KnownLookup | None = None) -> list[Path]:
    """Write the page as `out` (Markdown) and beside it the same as HTML; returns both paths.
    `known`: see matrix.build."""
    m = build([Path(d) for d in results_dirs], known)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_markdown(m, command), encoding="utf-8")
    page = out.with_suffix(".html")
    page.write_text(render_html(m, command), encoding="utf-8")
    return [out, page]
