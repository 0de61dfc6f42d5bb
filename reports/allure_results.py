"""results.jsonl rows as Allure result files, so a report exists for every run.

The runner's pytest plugin writes allure-results itself when run with
``--alluredir``; a run made without it (or copied without them) still has
``results.jsonl``, and this module writes what Allure needs from that:
one ``<uuid>-result.json`` per case x target x client, attachments beside
them, ``categories.json`` and ``environment.properties``.

Mapping: verdict pass/fail/crash/not_applicable/error -> Allure
passed/failed/skipped/broken; ``outcome.steps`` -> steps, and the case's
checks as steps under "checks"; labels target, client, their versions,
parentSuite (the case's theme), suite (the case), subSuite (the target),
and tags. ``statusDetails.message`` starts with a fixed word per kind
(DIVERGES, INVARIANT FAILED, NOT APPLICABLE, ERROR) that the categories
match on. ``historyId`` is a hash of case, target and client, so Allure's
history and retries line up across runs.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid as uuidlib
from datetime import datetime
from pathlib import Path

from .results import by_case
from .side_by_side import render_case

STATUS = {"pass": "passed", "fail": "failed", "crash": "failed", "not_applicable": "skipped", "error": "broken"}

# Allure puts a result in the FIRST category that matches, so the order says
# which wins: a failed invariant over a divergence (the message of such a
# row still names the divergence), a divergence over a pass.

CATEGORIES = [
    {"name": "target crashed", "messageRegex": "(?s).*TARGET CRASHED.*", "matchedStatuses": ["failed"]},
    {"name": "fails an invariant", "messageRegex": "(?s).*INVARIANT FAILED.*", "matchedStatuses": ["failed"]},
    {"name": "diverges from Apache Kafka", "messageRegex": "(?s).*DIVERGES from .*",
     "matchedStatuses": ["passed", "failed", "broken", "skipped"]},
    {"name": "not applicable", "messageRegex": "(?s).*NOT APPLICABLE.*", "matchedStatuses": ["skipped"]},
    {"name": "error", "matchedStatuses": ["broken"]},
]

_MIME = {".json": "application/json", ".jsonl": "text/plain", ".log": "text/plain", ".txt": "text/plain",
         ".html": "text/html", ".png": "image/png", ".pcap": "application/vnd.tcpdump.pcap",
         ".csv": "text/csv"}


def _ms(iso: str | None) -> int | None:
    if not iso:
        return None
    try:
        return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def _hash(*parts: str) -> str:
    return hashlib.md5("\x1f".join(parts).encode()).hexdigest()


def _theme(case: str) -> str:
    return case.split("/", 1)[0] if "/" in case else "cases"


class _Writer:
    """Writes attachments into the results directory, one file per source."""

    def __init__(self, out: Path):
        self.out = out

    def text(self, name: str, text: str, ext: str, mime: str | None = None) -> dict:
        source = f"{uuidlib.uuid4()}-attachment{ext}"
        (self.out / source).write_text(text, encoding="utf-8")
        return {"name": name, "source": source, "type": mime or _MIME.get(ext, "text/plain")}

    def file(self, name: str, path: Path) -> dict | None:
        if not path.is_file():
            return None
        ext = "".join(path.suffixes[-1:]) or ".txt"
        source = f"{uuidlib.uuid4()}-attachment{ext}"
        try:
            (self.out / source).hardlink_to(path)
        except OSError:
            shutil.copyfile(path, self.out / source)
        return {"name": name, "source": source, "type": _MIME.get(ext, "application/octet-stream")}


def _status_message(row: dict) -> tuple[str, str]:
    """(message, trace): the first line says which category the row belongs to."""
    lines: list[str] = []
    trace: list[str] = []
    if row["verdict"] == "fail":
        failed = [c for c in row["checks"] if not c.get("passed")]
        lines.append("INVARIANT FAILED: " + "; ".join(f"{c['name']}: {c.get('message', '')}" for c in failed))
    elif row["verdict"] == "crash":
        lines.append(f"TARGET CRASHED: {row.get('reason') or 'no reason given'}")
    elif row["verdict"] == "not_applicable":
        lines.append(f"NOT APPLICABLE: {row.get('reason') or 'no reason given'}")
    elif row["verdict"] == "error":
        lines.append(f"ERROR: {row.get('reason') or 'no reason given'}")
    if row.get("diff"):
        d = row["diff"]
        lines.append(f"DIVERGES from {row.get('reference_target') or 'the reference'}: "
                     f"{len(d)} difference{'s' if len(d) != 1 else ''} at " + ", ".join(x["path"] for x in d[:5])
                     + (" ..." if len(d) > 5 else ""))
        for x in d:
            trace.append(f"{x['path']}:\n  reference: {json.dumps(x.get('reference'))}\n"
                         f"  actual:    {json.dumps(x.get('actual'))}")
    return "\n".join(lines), "\n".join(trace)


def _steps(row: dict) -> list[dict]:
    steps = []
    for s in (row.get("outcome") or {}).get("steps", []):
        err = s.get("error") or {}
        name = f"{s.get('step')}. {s.get('actor', '?')}: {s.get('op', '?')}"
        if not s.get("ok", True):
            name += f" → {err.get('name', 'error')} ({err.get('code', '?')})"
        params = [{"name": k, "value": json.dumps(v) if not isinstance(v, str) else v}
                  for k, v in s.items() if k not in ("step", "actor", "op", "ok")]
        # The runner does not time steps; a step without start/stop shows no (made-up) duration.
        steps.append({"name": name, "status": "passed" if s.get("ok", True) else "failed", "stage": "finished",
                      "parameters": params, "steps": [], "attachments": []})
    if row.get("checks"):
        sub = [{"name": c["name"] + (f": {c['message']}" if c.get("message") else ""),
                "status": "passed" if c.get("passed") else "failed", "stage": "finished",
                "steps": [], "attachments": [], "parameters": []}
               for c in row["checks"]]
        steps.append({"name": "checks", "status": "failed" if any(x["status"] == "failed" for x in sub)
                      else "passed", "stage": "finished", "steps": sub,
                      "attachments": [], "parameters": []})
    return steps


def row_to_result(row: dict, run_dir: Path, w: _Writer, side_by_side: dict | None) -> dict:
    """The Allure result object for one row (its attachments are written as a side effect)."""
    start = _ms(row.get("started_at")) or 0
    stop = start + int(float(row.get("duration_s") or 0) * 1000)
    message, trace = _status_message(row)
    attachments = []
    if side_by_side:
        attachments.append(side_by_side)
    attachments.append(w.text("outcome", json.dumps(row.get("outcome"), indent=2, sort_keys=True), ".json"))
    if row.get("diff"):
        attachments.append(w.text(f"diff vs {row.get('reference_target')}",
                                  json.dumps(row["diff"], indent=2, sort_keys=True), ".json"))
    arts = row.get("artifacts") or {}
    for key, label in (("crash", "crash: the target's last words"), ("transcript", "transcript"), ("pcap", "pcap"),
                       ("steps", "steps")):
        if arts.get(key):
            a = w.file(label, run_dir / arts[key])
            if a:
                attachments.append(a)
    for log in arts.get("logs") or []:
        a = w.file(f"log {Path(log).name}", run_dir / log)
        if a:
            attachments.append(a)
    labels = [{"name": n, "value": str(v)} for n, v in (
        ("parentSuite", _theme(row["case"])), ("suite", row["case"]), ("subSuite", row["target"]),
        ("epic", _theme(row["case"])), ("feature", row.get("case_title") or row["case"]),
        ("target", row["target"]), ("client", row["client"]),
        ("target_version", row.get("target_version", "")), ("client_version", row.get("client_version", "")),
        ("host", row["target"]), ("framework", "kconform"), ("language", row["client"]),
    )]
    labels += [{"name": "tag", "value": t} for t in row.get("tags", [])]
    full = f"{row['case']}::{row['target']}::{row['client']}"
    return {
        "uuid": str(uuidlib.uuid4()),
        "historyId": _hash(full),
        "testCaseId": _hash(row["case"]),
        "name": f"{row['case']} [{row['target']} · {row['client']}]",
        "fullName": full,
        "description": row.get("case_title", ""),
        "status": STATUS[row["verdict"]],
        "statusDetails": {"message": message, "trace": trace} if message else {},
        "stage": "finished",
        "start": start,
        "stop": stop,
        "steps": _steps(row),
        "attachments": attachments,
        "labels": labels,
        "parameters": [{"name": "target", "value": f"{row['target']} {row.get('target_version', '')}".strip()},
                       {"name": "client", "value": f"{row['client']} {row.get('client_version', '')}".strip()}],
        "links": [],
    }


def write_environment(rows: list[dict], out: Path, extra: dict | None = None) -> None:
    """``environment.properties``: the run id and every target/client with its version."""
    env: dict[str, str] = {}
    env["run_id"] = ", ".join(sorted({r["run_id"] for r in rows}))
    for r in rows:
        env[f"target.{r['target']}"] = r.get("target_version", "")
        env[f"client.{r['client']}"] = r.get("client_version", "")
    refs = sorted({r["reference_target"] for r in rows if r.get("reference_target")})
    env["reference_target"] = ", ".join(refs) or "none"
    env.update(extra or {})

    def esc(s: str) -> str:
        return str(s).replace("\\", "\\\\").replace("\n", "\\n").replace("=", "\\=").replace(":", "\\:")

    (out / "environment.properties").write_text(
        "".join(f"{esc(k)}={esc(v)}\n" for k, v in env.items()), encoding="utf-8")


def write_categories(out: Path) -> None:
    (out / "categories.json").write_text(json.dumps(CATEGORIES, indent=2), encoding="utf-8")


def rows_to_allure(rows: list[dict], run_dir: str | Path, out_dir: str | Path) -> Path:
    """Write Allure results for ``rows`` (read from ``run_dir``) into ``out_dir``."""
    run_dir, out = Path(run_dir), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    w = _Writer(out)
    for case, case_rows in by_case(rows).items():
        sbs = w.text("side by side (all targets)", render_case(case_rows), ".html", "text/html")
        for row in case_rows:
            res = row_to_result(row, run_dir, w, sbs)
            (out / f"{res['uuid']}-result.json").write_text(json.dumps(res), encoding="utf-8")
    write_categories(out)
    write_environment(rows, out)
    return out


def side_by_side_attachments(rows: list[dict], out_dir: Path) -> None:
    """Add the side-by-side page to results the pytest plugin wrote, matched by case/target/client.

    The plugin's results carry the labels ``case``, ``target`` and
    ``client`` when the runner sets them; results without them are left as
    they are.
    """
    w = _Writer(out_dir)
    pages = {case: w.text("side by side (all targets)", render_case(cr), ".html", "text/html")
             for case, cr in by_case(rows).items()}
    for f in out_dir.glob("*-result.json"):
        res = json.loads(f.read_text(encoding="utf-8"))
        labels = {lab["name"]: lab["value"] for lab in res.get("labels", [])}
        case = labels.get("case") or labels.get("suite")
        if case in pages:
            res.setdefault("attachments", []).insert(0, pages[case])
            f.write_text(json.dumps(res), encoding="utf-8")
