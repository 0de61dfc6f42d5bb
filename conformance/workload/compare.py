"""The same seeds on several targets, side by side: anomalies and error codes per API.

Two correct brokers do not answer the same number of retriable errors (timing decides how
often a client meets CONCURRENT_TRANSACTIONS), but a code one target answers and the reference
never does, or answers three times as often per operation, is a difference to explain. Counts
are given per 1000 workload operations, so targets that ran at different speeds compare, and
with the number of rows (seeds) that met the code: one answer in one seed is a race a run may or
may not hit, the same code in every seed is behaviour. How long the nemesis kept nodes away is
given beside them (history/profile.node_downtime): the same fault schedule keeps a slow-starting
broker's nodes down longer, and its clients meet "no leader / no coordinator / not enough
replicas" answers for longer.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..results import Row


def _per_k(count: int, ops: int) -> float:
    return round(1000.0 * count / ops, 2) if ops else 0.0


def compare_rows(rows: list[Row], reference: str | None) -> dict[str, Any]:
    """{targets: {target: totals}, seeds: [...], differences: [...]} of workload rows."""
    totals: dict[str, dict[str, Any]] = {}
    seeds: dict[tuple[str, str], dict[str, dict]] = defaultdict(dict)
    for r in rows:
        w = r.workload
        if not w:
            continue
        t = totals.setdefault(r.target, {"rows": 0, "operations": 0, "verdicts": defaultdict(int),
                                            "anomalies": defaultdict(int), "client_flaws": defaultdict(int),
                                            "kafka_bugs": defaultdict(int), "wire": defaultdict(lambda: defaultdict(int)),
                                            "rows_with": defaultdict(int), "node_down_s": 0.0,
                                            "restart_s": []})
        t["rows"] += 1
        t["operations"] += w.get("operations", 0)
        t["node_down_s"] += w.get("node_down_s", 0.0)
        if w.get("restart_s"):
            t["restart_s"].append(w["restart_s"])
        t["verdicts"][r.verdict.value] += 1
        for kind, n in (w.get("anomalies") or {}).items():
            t["anomalies"][kind] += n
            if r.client_flaw:
                t["client_flaws"][kind] += n
            elif r.known_reference_bug:
                t["kafka_bugs"][f"{kind} ({r.known_reference_bug})"] += n
        for api, codes in (w.get("wire_errors") or {}).items():
            for code, n in codes.items():
                t["wire"][api][code] += n
                if n:
                    t["rows_with"][(api, code)] += 1
        seeds[(r.case, r.client)][r.target] = {"verdict": r.verdict.value, "anomalies": w.get("anomalies") or {},
                                               "operations": w.get("operations", 0),
                                               "wire": w.get("wire_errors") or {}, "reason": r.reason}
    out_totals = {}
    for name, t in totals.items():
        restarts = sorted(t["restart_s"])
        out_totals[name] = {"rows": t["rows"], "operations": t["operations"], "verdicts": dict(t["verdicts"]),
                            "node_down_s": round(t["node_down_s"], 1),
                            "restart_s": restarts[len(restarts) // 2] if restarts else None,
                            "anomalies": dict(t["anomalies"]), "client_flaws": dict(t["client_flaws"]),
                            "kafka_bugs": dict(t["kafka_bugs"]), "wire": {api: {code: {"count": n, "per_1000_ops": _per_k(n, t["operations"]),
                                                  "rows": t["rows_with"][(api, code)]}
                                           for code, n in sorted(codes.items())}
                                     for api, codes in sorted(t["wire"].items())}}
    differences = []
    ref = out_totals.get(reference) if reference else None
    if ref is not None:
        for name, t in out_totals.items():
            if name == reference:
                continue
            keys = {(a, c) for a, cs in t["wire"].items() for c in cs} | {(a, c) for a, cs in ref["wire"].items() for c in cs}
            for api, code in sorted(keys):
                mine = t["wire"].get(api, {}).get(code, {"count": 0, "per_1000_ops": 0.0, "rows": 0})
                theirs = ref["wire"].get(api, {}).get(code, {"count": 0, "per_1000_ops": 0.0, "rows": 0})
                if mine["count"] and not theirs["count"]:
                    what = "only on this target"
                elif theirs["count"] and not mine["count"]:
                    what = "only on the reference"
                elif mine["per_1000_ops"] > 3 * theirs["per_1000_ops"] + 1:
                    what = "more than 3x as often as the reference"
                else:
                    continue
                differences.append({"target": name, "api": api, "error": code, "what": what,
                                    "count": mine["count"], "per_1000_ops": mine["per_1000_ops"],
                                    "rows": mine["rows"], "of_rows": t["rows"],
                                    "reference_count": theirs["count"],
                                    "reference_per_1000_ops": theirs["per_1000_ops"],
                                    "reference_rows": theirs["rows"], "reference_of_rows": ref["rows"]})
            for kind in sorted(set(t["anomalies"]) - set(ref["anomalies"])):
                known = sum(n for k, n in (t.get("kafka_bugs") or {}).items() if k.split(" (")[0] == kind)
                brokers = t["anomalies"][kind] - t["client_flaws"].get(kind, 0) - known
                if brokers:     # not when every one is proved a client's flaw or a known Kafka bug
                    differences.append({"target": name, "anomaly": kind,
                                        "what": "an anomaly the reference does not have", "count": brokers})
    return {"reference": reference, "targets": out_totals,
            "seeds": [{"case": c, "client": cl, "by_target": by} for (c, cl), by in sorted(seeds.items())],
            "differences": differences}


def render_comparison(cmp: dict[str, Any]) -> str:
    """Markdown: per target the totals, then each seed's verdicts, then the differences."""
    lines = ["# Workload comparison", ""]
    ref = cmp.get("reference")
    if ref:
        lines.append(f"Reference: `{ref}`. Error codes are what brokers answered clients on the wire (the proxy's "
                     "transcript), per 1000 workload operations.")
        lines.append("")
    lines += ["| target | rows | operations | nodes away (s), restart (s) | verdicts | anomalies | "
              "of them, clients' flaws (proved on the wire) | of them, Kafka's known bugs (proved) |",
              "|---|---|---|---|---|---|---|---|"]
    for name, t in cmp["targets"].items():
        verdicts = ", ".join(f"{v} {n}" for v, n in sorted(t["verdicts"].items()))
        anomalies = ", ".join(f"{k} {n}" for k, n in sorted(t["anomalies"].items())) or "none"
        clients = ", ".join(f"{k} {n}" for k, n in sorted((t.get("client_flaws") or {}).items())) or "none"
        bugs = ", ".join(f"{k} {n}" for k, n in sorted((t.get("kafka_bugs") or {}).items())) or "none"
        away = f"{t.get('node_down_s', 0.0):.0f}, {t['restart_s']}" if t.get("restart_s") is not None else "-"
        lines.append(f"| {name} | {t['rows']} | {t['operations']} | {away} | {verdicts} | {anomalies} | {clients} | {bugs} |")
    lines += ["", "## Error codes per API", "", "| API | error | " + " | ".join(cmp["targets"]) + " |",
              "|---|---|" + "---|" * len(cmp["targets"])]
    keys = sorted({(a, c) for t in cmp["targets"].values() for a, cs in t["wire"].items() for c in cs})
    for api, code in keys:
        cells = []
        for t in cmp["targets"].values():
            x = t["wire"].get(api, {}).get(code)
            cells.append(f"{x['count']} ({x['per_1000_ops']}/k)" if x else "0")
        lines.append(f"| {api} | {code} | " + " | ".join(cells) + " |")
    lines += ["", "## Seeds", "", "| case | client | " + " | ".join(cmp["targets"]) + " |",
              "|---|---|" + "---|" * len(cmp["targets"])]
    for s in cmp["seeds"]:
        cells = []
        for name in cmp["targets"]:
            x = s["by_target"].get(name)
            if x is None:
                cells.append("-")
            else:
                an = ", ".join(f"{k} {n}" for k, n in sorted(x["anomalies"].items()))
                cells.append(x["verdict"] + (f": {an}" if an else "") + (f" ({x['reason']})" if x.get("reason") else ""))
        lines.append(f"| {s['case']} | {s['client']} | " + " | ".join(cells) + " |")
    if cmp["differences"]:
        lines += ["", "## Differences from the reference", ""]
        for d in cmp["differences"]:
            if "anomaly" in d:
                lines.append(f"- {d['target']}: anomaly `{d['anomaly']}` ({d['count']}): {d['what']}")
            else:
                lines.append(f"- {d['target']}: {d['api']} {d['error']}: {d['what']} ({d['count']}, "
                             f"{d['per_1000_ops']}/k, in {d['rows']} of {d['of_rows']} rows vs "
                             f"{d['reference_count']}, {d['reference_per_1000_ops']}/k, in {d['reference_rows']} of "
                             f"{d['reference_of_rows']})")
    return "\n".join(lines) + "\n"
