"""A workload's timeline as one self-contained HTML page (an SVG, no scripts from elsewhere).

One lane per worker: each operation a bar from its invocation to its completion, green when
it happened (`ok`), red when it certainly did not (`fail`), amber when nobody can tell (`info`).
Fault windows shade the whole height (node faults red, proxy rules orange, client faults
violet), anomalies are marked where they were first seen, error codes that crossed the wire
outside every fault window are ticks on the `wire` lane. Below the picture: the anomalies with
their evidence, and the schedule. The page is attached to the row's Allure result.
"""
from __future__ import annotations

import html
import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

from .history import pairs

LANE_H = 16
LEFT = 90
WIDTH = 1400
#: Bars drawn at most (a longer history is thinned evenly, the count is said).
MAX_BARS = 30_000
COLORS = {"ok": "#3a9d5d", "fail": "#d64541", "info": "#e9a23b", None: "#999"}
WINDOW_COLORS = {"node": "rgba(214,69,65,0.13)", "proxy": "rgba(233,120,30,0.13)", "client": "rgba(140,80,200,0.12)",
                 "timeout": "rgba(120,120,120,0.10)"}


def write_timeline(path: Path, case: Any, events: list[dict], anomalies: Iterable[Any], windows: Iterable[Any],
                   wire_errors: Iterable[Any]) -> Path:
    anomalies = list(anomalies)
    windows = list(windows)
    ops = [(inv, done) for inv, done in pairs(events) if inv["process"] not in ("lso", "runner")]
    end = max([e["time"] for e in events] + [1.0])
    lanes = _lanes(ops)
    height = (len(lanes) + 2) * LANE_H + 40
    scale = (WIDTH - LEFT - 10) / end

    def x(t: float) -> float:
        return LEFT + t * scale

    svg: list[str] = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
                      f'font-family="sans-serif" font-size="11">']
    for w in windows:
        svg.append(f'<rect x="{x(w.start):.1f}" y="0" width="{max(1.0, (w.end - w.start) * scale):.1f}" '
                   f'height="{height - 20}" fill="{WINDOW_COLORS.get(w.kind, "#eee")}"><title>'
                   f'{html.escape(w.what)} ({w.start:.1f}-{w.end:.1f} s)</title></rect>')
    step = max(1, len(ops) // MAX_BARS)
    for lane_i, lane in enumerate(lanes):
        y = 20 + lane_i * LANE_H
        svg.append(f'<text x="4" y="{y + 11}">{html.escape(lane)}</text>')
    lane_of = {name: i for i, name in enumerate(lanes)}
    for n, (inv, done) in enumerate(ops):
        if n % step:
            continue
        y = 20 + lane_of[_lane(inv)] * LANE_H + 2
        t1 = done["time"] if done else end
        color = COLORS.get(done["type"] if done else None, "#999")
        tip = f"{inv['process']} {inv['f']} {inv['time']:.3f}-{t1:.3f} s: {done['type'] if done else 'open'}"
        if done and isinstance(done.get("error"), dict):
            tip += f" {done['error'].get('name')}"
        svg.append(f'<rect x="{x(inv["time"]):.1f}" y="{y}" width="{max(1.0, (t1 - inv["time"]) * scale):.1f}" '
                   f'height="{LANE_H - 4}" fill="{color}"><title>{html.escape(tip)}</title></rect>')
    wire_y = 20 + len(lanes) * LANE_H
    svg.append(f'<text x="4" y="{wire_y + 11}">wire</text>')
    for e in list(wire_errors)[:MAX_BARS]:
        svg.append(f'<rect x="{x(e.t):.1f}" y="{wire_y + 2}" width="1.5" height="{LANE_H - 4}" fill="#555">'
                   f'<title>{html.escape(f"{e.t:.3f} s {e.api} {e.error} ({e.client_id})")}</title></rect>')
    for a in anomalies:
        if a.time is None:
            continue
        svg.append(f'<line x1="{x(a.time):.1f}" x2="{x(a.time):.1f}" y1="0" y2="{height - 20}" stroke="#000" '
                   f'stroke-dasharray="4,3"><title>{html.escape(a.message)}</title></line>')
        svg.append(f'<text x="{x(a.time) + 3:.1f}" y="12" fill="#000">{html.escape(a.kind)}</text>')
    for s in range(0, int(end) + 1, max(1, int(end) // 20 or 1)):
        svg.append(f'<text x="{x(s):.1f}" y="{height - 6}" fill="#666">{s}s</text>')
    svg.append("</svg>")
    thinned = f"<p>{len(ops)} operations; every {step}th drawn.</p>" if step > 1 else ""
    body = [f"<h1>{html.escape(case.title)}</h1>",
            f"<p>case <code>{html.escape(case.id)}</code>, seed {case.workload.seed}: "
            f"{len(ops)} operations, {len(anomalies)} anomaly kind(s). Bars: green ok, red fail (certainly not "
            "done), amber info (unknown); shaded: fault windows (red node, orange proxy, violet client).</p>",
            thinned, "".join(svg), "<h2>Anomalies</h2>"]
    if not anomalies:
        body.append("<p>none</p>")
    for a in anomalies:
        body.append(f"<h3>{html.escape(a.kind)} ({a.count})</h3><p>{html.escape(a.message)}</p>"
                    f"<pre>{html.escape(json.dumps(a.evidence[:20], indent=1, default=str))}</pre>")
    body.append("<h2>Fault windows</h2><ul>")
    body += [f"<li>{w.start:.1f}-{w.end:.1f} s ({w.kind}): {html.escape(w.what)}</li>" for w in windows]
    body.append("</ul>")
    page = ("<!doctype html><html><head><meta charset='utf-8'><title>kconform workload timeline</title>"
            "<style>body{font-family:sans-serif;margin:1em} pre{background:#f6f6f6;padding:.5em;overflow:auto;"
            "max-height:30em}</style></head><body>" + "".join(body) + "</body></html>")
    path.write_text(page, encoding="utf-8")
    return path


def _lane(inv: dict) -> str:
    return "nemesis" if inv["process"] == "nemesis" else inv["worker"]


def _lanes(ops: list[tuple[dict, dict | None]]) -> list[str]:
    seen: dict[str, int] = defaultdict(int)
    for inv, _ in ops:
        seen[_lane(inv)] += 1
    return sorted(seen, key=lambda n: (n != "nemesis", n))
