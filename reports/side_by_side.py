"""One case, every target in its own column: the page a person reads to see a divergence.

For each client, a table with one column per target (the reference target
first) and one row per observation: the verdict, each step (what the client
saw), each partition's read_committed / read_uncommitted records, group
offsets and transaction states. A cell that differs from the reference's is
marked, so the divergence is visible without reading the diff.
"""

from __future__ import annotations

import html
import json

_CSS = """
body{font:13px/1.4 system-ui,sans-serif;margin:12px;color:#222}
h1{font-size:16px;margin:0 0 4px} h2{font-size:14px;margin:18px 0 6px}
table{border-collapse:collapse;width:100%;table-layout:fixed}
th,td{border:1px solid #ccc;padding:4px 6px;vertical-align:top;text-align:left;word-wrap:break-word}
th{background:#f3f3f3} td.k{width:18%;font-weight:600;background:#fafafa}
td.diverges{background:#ffe3e0} td.same{background:#fff}
.v-pass{color:#1a7f37;font-weight:700}.v-fail{color:#c62828;font-weight:700}
.v-not_applicable{color:#777;font-weight:700}.v-error{color:#b26a00;font-weight:700}
.v-crash{color:#7a0a0a;font-weight:700;text-decoration:underline}
pre{margin:0;white-space:pre-wrap;font:12px ui-monospace,monospace}
.legend{color:#555;margin-bottom:8px}
"""


def _fmt_step(s: dict | None) -> str:
    if not s:
        return "—"
    txt = f"{s.get('actor', '?')}: {s.get('op', '?')}"
    if s.get("ok"):
        return txt + " → ok"
    err = s.get("error") or {}
    return txt + f" → {err.get('name', 'error')} ({err.get('code', '?')})"


def _fmt_records(recs) -> str:
    if recs is None:
        return "—"
    if not recs:
        return "(none)"
    return "\n".join(f"@{r.get('offset')} {r.get('key')}={r.get('value')}" for r in recs)


def _observations(row: dict | None) -> dict[str, str]:
    """Row label -> cell text for one target's row."""
    if row is None:
        return {}
    out: dict[str, str] = {"verdict": row["verdict"]}
    if row.get("reason"):
        out["reason"] = row["reason"]
    o = row.get("outcome") or {}
    for s in o.get("steps", []):
        out[f"step {s.get('step')}"] = _fmt_step(s)
    for iso, parts in (o.get("reads") or {}).items():
        for tp, recs in parts.items():
            out[f"{iso} {tp}"] = _fmt_records(recs)
    for group, offs in (o.get("group_offsets") or {}).items():
        out[f"offsets {group}"] = json.dumps(offs, sort_keys=True)
    for txn, st in (o.get("transactions") or {}).items():
        out[f"txn {txn}"] = json.dumps(st, sort_keys=True)
    failed = [c for c in row.get("checks", []) if not c.get("passed")]
    if failed:
        out["failed checks"] = "\n".join(f"{c['name']}: {c.get('message', '')}" for c in failed)
    return out


def _target_order(rows: list[dict]) -> list[str]:
    targets: list[str] = []
    refs = {r.get("reference_target") for r in rows if r.get("reference_target")}
    for r in sorted(rows, key=lambda r: (r["target"] not in refs, )):
        if r["target"] not in targets:
            targets.append(r["target"])
    return targets


def render_case(case_rows: list[dict]) -> str:
    """The side-by-side HTML page for the rows of one case (all targets, all clients)."""
    first = case_rows[0]
    targets = _target_order(case_rows)
    refs = sorted({r["reference_target"] for r in case_rows if r.get("reference_target")})
    ref = refs[0] if refs else None
    clients: list[str] = []
    for r in case_rows:
        if r["client"] not in clients:
            clients.append(r["client"])
    e = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(first['case'])}</title>"
             f"<style>{_CSS}</style></head><body>",
             f"<h1>{e(first['case'])} — {e(first.get('case_title', ''))}</h1>",
             f"<div class='legend'>Reference target: <b>{e(ref or 'none')}</b>. "
             "Cells that differ from the reference are <span style='background:#ffe3e0'>marked</span>.</div>"]
    for client in clients:
        rows = {r["target"]: r for r in case_rows if r["client"] == client}
        obs = {t: _observations(rows.get(t)) for t in targets}
        labels: list[str] = []
        for t in targets:
            for k in obs[t]:
                if k not in labels:
                    labels.append(k)
        heads = "".join(
            f"<th>{e(t)} {e(rows[t].get('target_version', '')) if t in rows else ''}</th>" for t in targets)
        version = next((r.get("client_version", "") for r in rows.values()), "")
        parts.append(f"<h2>client {e(client)} {e(version)}</h2><table><tr><th class='k'></th>{heads}</tr>")
        for label in labels:
            cells = []
            base = obs.get(ref, {}).get(label) if ref else None
            for t in targets:
                val = obs[t].get(label)
                cls = "same"
                if ref and t != ref and t in rows and val != base and label not in ("verdict", "reason",
                                                                                      "failed checks"):
                    cls = "diverges"
                text = "—" if val is None else val
                inner = (f"<span class='v-{e(text)}'>{e(text)}</span>" if label == "verdict"
                         else f"<pre>{e(text)}</pre>")
                cells.append(f"<td class='{cls}'>{inner}</td>")
            parts.append(f"<tr><td class='k'>{e(label)}</td>{''.join(cells)}</tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    return "".join(parts)
