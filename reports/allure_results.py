"""results.jsonl rows as Allure result files, so a report exists for every run.

The runner's pytest plugin writes allure-results itself when run with
``--alluredir``; a run made without it (or copied without them) still has
``results.jsonl``, and this module writes what Allure needs from that:
one ``<uuid>-result.json`` per case x target x client, attachments beside
them, ``categories.json`` and ``environment.properties``.

Mapping: verdict pass/fail/crash/not_applicable/error -> Allure
passed/failed/failed/skipped/broken; against a baseline (the row's status,
conformance.results.Status) an expected failure is skipped ("EXPECTED FAIL", as
allure-pytest shows an xfail) and an unexpected pass failed ("UNEXPECTED PASS");
``outcome.steps`` -> steps, and the case's checks as steps under "checks";
labels target, client, their versions, parentSuite (the case's theme), suite
(the case), subSuite (the target), and tags; the baseline entry's link as an
issue link. ``statusDetails.message`` starts with "<KIND> on <target>: "
(KIND: CRASH, INVARIANT FAILED, UNEXPECTED PASS, EXPECTED FAIL, DIVERGES from
<reference>, NOT APPLICABLE, ERROR), and the categories are per target and kind
(``categories``). ``historyId`` is a hash of case, target and client, so Allure's
history and retries line up across runs. A run (or a shard of one) that did not
finish, and a shard missing from the results, become "broken" results of their own
("HARNESS": kconform itself failed), so such a report never looks complete.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import uuid as uuidlib
from datetime import datetime
from pathlib import Path

from conformance.results import Status, Verdict, status_of

from .results import by_case, theme
from .side_by_side import render_case

STATUS = {Verdict.PASS: "passed", Verdict.FAIL: "failed", Verdict.CRASH: "failed", Verdict.NOT_APPLICABLE: "skipped",
          Verdict.ERROR: "broken"}
#: Where the status against a baseline changes the verdict's Allure status.
ALLURE_STATUS = {Status.EXPECTED_FAIL: "skipped", Status.UNEXPECTED_PASS: "failed"}

#: Per target, what its rows can be, as Allure categories: (name, the message's first words,
#: Allure statuses). The message of every row starts with "<WORDS> on <target>: " (see
#: _status_message), so each target gets categories of its own -- the same grouping as the
#: compatibility page (reports/matrix.py): a broker team opens "kfake · crashes" and sees its
#: crashes, grouped by message, i.e. by how it crashed.
KINDS = [
    ("crashes", "CRASH", ["failed"]),
    ("fails a check", "INVARIANT FAILED", ["failed"]),
    ("newly passes (its baseline entry is stale)", "UNEXPECTED PASS", ["failed"]),
    ("fails as its baseline expects", "EXPECTED FAIL", ["skipped"]),
    ("passes, outcome differs from {reference}", "DIVERGES from \\S+", ["passed"]),
    ("not applicable", "NOT APPLICABLE", ["skipped"]),
    ("kconform error", "ERROR", ["broken"]),
]
#: Results of kconform's own failure (a run that did not finish, a missing shard).
HARNESS_CATEGORY = {"name": "kconform itself failed (a run or shard did not finish, or is missing)",
                    "messageRegex": "(?s)HARNESS: .*", "matchedStatuses": ["broken"]}
#: For results whose rows are unknown (the pytest plugin's, without results.jsonl).
CATEGORIES = [
    {"name": "crashes the target", "messageRegex": "(?s).*CRASH.*", "matchedStatuses": ["failed"]},
    {"name": "fails an invariant", "messageRegex": "(?s).*INVARIANT FAILED.*", "matchedStatuses": ["failed"]},
    {"name": "not applicable", "matchedStatuses": ["skipped"]},
    {"name": "error", "matchedStatuses": ["broken"]},
]


def categories(rows: list[dict] | None = None) -> list[dict]:
    """categories.json: per target of the rows, one category per kind of row (KINDS), the
    reference target first; without rows, the generic CATEGORIES."""
    if not rows:
        return CATEGORIES
    refs = [r["reference_target"] for r in rows if r.get("reference_target")]
    reference = refs[0] if refs else None
    targets = sorted({r["target"] for r in rows}, key=lambda t: (t != reference, t))
    out = []
    for t in targets:
        for name, words, statuses in KINDS:
            if t == reference and words.startswith("DIVERGES"):
                continue
            label = name.format(reference=reference or "the reference")
            if t == reference and words == "INVARIANT FAILED":
                label = "fails a check (the reference: the case or kconform is wrong)"
            out.append({"name": f"{t} · {label}", "messageRegex": f"(?s){words} on {re.escape(t)}: .*",
                        "matchedStatuses": statuses})
    return [HARNESS_CATEGORY] + out


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
    """(message, trace): the first line is "<KIND> on <target>: ..." -- the row's category."""
    lines: list[str] = []
    trace: list[str] = []
    on = f"on {row['target']}"
    status, note = status_of(row)
    expected = row.get("expected") or {}
    if status is Status.EXPECTED_FAIL:
        lines.append(f"EXPECTED FAIL {on}: {expected.get('reason', '')}"
                     + (f" ({expected['link']})" if expected.get("link") else ""))
        trace += [f"{c['name']}: {c.get('message', '')}" for c in row["checks"] if not c.get("passed")]
    elif status is Status.UNEXPECTED_PASS:
        lines.append(f"UNEXPECTED PASS {on}: {note} -- remove the entry from {expected.get('source', 'the baseline')}")
    elif row["verdict"] == Verdict.FAIL:
        failed = [c for c in row["checks"] if not c.get("passed")]
        lines.append(f"INVARIANT FAILED {on}: " + "; ".join(f"{c['name']}: {c.get('message', '')}" for c in failed))
    elif row["verdict"] == Verdict.CRASH:
        lines.append(f"CRASH {on}: {row.get('reason') or 'the target died'}")
    elif row["verdict"] == Verdict.NOT_APPLICABLE:
        lines.append(f"NOT APPLICABLE {on}: {row.get('reason') or 'no reason given'}")
    elif row["verdict"] == Verdict.ERROR:
        lines.append(f"ERROR {on}: {row.get('reason') or 'no reason given'}")
    if row.get("diff"):
        d = row["diff"]
        lines.append(f"DIVERGES from {row.get('reference_target') or 'the reference'} {on}: "
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
    if row.get("application"):
        attachments.append(w.text("application: figures, bounces, error codes per API",
                                  json.dumps(row["application"], indent=2, sort_keys=True), ".json"))
    arts = row.get("artifacts") or {}
    for key, label in (("crash", "crash: the target's last words"), ("timeline", "workload timeline"),
                       ("anomalies", "workload anomalies"), ("wire", "workload error codes"),
                       ("history", "workload history"), ("transcript", "transcript"), ("pcap", "pcap"),
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
        ("parentSuite", theme(row["case"])), ("suite", row["case"]), ("subSuite", row["target"]),
        ("epic", theme(row["case"])), ("feature", row.get("case_title") or row["case"]),
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
        "status": ALLURE_STATUS.get(status_of(row)[0], STATUS[row["verdict"]]),
        "statusDetails": {"message": message, "trace": trace} if message else {},
        "stage": "finished",
        "start": start,
        "stop": stop,
        "steps": _steps(row),
        "attachments": attachments,
        "labels": labels,
        "parameters": [{"name": "target", "value": f"{row['target']} {row.get('target_version', '')}".strip()},
                       {"name": "client", "value": f"{row['client']} {row.get('client_version', '')}".strip()}],
        "links": ([{"name": "baseline: " + (row.get("expected") or {}).get("source", ""), "type": "issue",
                    "url": row["expected"]["link"]}] if (row.get("expected") or {}).get("link") else []),
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


def write_categories(out: Path, rows: list[dict] | None = None) -> None:
    (out / "categories.json").write_text(json.dumps(categories(rows), indent=2), encoding="utf-8")


def rows_to_allure(rows: list[dict], run_dir: str | Path | dict[int, Path], out_dir: str | Path,
                   runs: list[dict] | None = None) -> Path:
    """Write Allure results for ``rows`` into ``out_dir``. ``run_dir``: the directory the rows
    were read from, or per row (by id) its own (several directories, the shards of a run);
    ``runs``: their run.json (merged), for the harness results (harness_results)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    dir_of = (lambda r: run_dir[id(r)]) if isinstance(run_dir, dict) else (lambda r, d=Path(run_dir): d)
    w = _Writer(out)
    for case, case_rows in by_case(rows).items():
        sbs = w.text("side by side (all targets)", render_case(case_rows), ".html", "text/html")
        for row in case_rows:
            res = row_to_result(row, dir_of(row), w, sbs)
            (out / f"{res['uuid']}-result.json").write_text(json.dumps(res), encoding="utf-8")
    for res in harness_results(runs or []):
        (out / f"{res['uuid']}-result.json").write_text(json.dumps(res), encoding="utf-8")
    write_categories(out, rows)
    write_environment(rows, out, _run_environment(runs or []))
    return out


def harness_results(runs: list[dict]) -> list[dict]:
    """A "broken" result per run or shard that did not finish and per missing shard
    (reports.junit.harness_problems): kconform's own failure, never a clean report."""
    from .junit import harness_problems

    now = int(datetime.now().timestamp() * 1000)
    return [{"uuid": str(uuidlib.uuid4()), "historyId": _hash("kconform-harness", name), "name": f"kconform: {name}",
             "fullName": f"kconform::harness::{name}", "status": "broken", "stage": "finished", "start": now,
             "stop": now, "statusDetails": {"message": f"HARNESS: {message}", "trace": ""}, "steps": [],
             "attachments": [], "parameters": [], "links": [],
             "labels": [{"name": "parentSuite", "value": "kconform"}, {"name": "suite", "value": "harness"}]}
            for name, message in harness_problems(runs)]


def _run_environment(runs: list[dict]) -> dict[str, str]:
    """What environment.properties adds from run.json: the command and kconform's version."""
    out = {}
    for i, meta in enumerate(runs):
        suffix = f".{i + 1}" if len(runs) > 1 else ""
        shards = meta.get("shards") or [meta]
        if shards[0].get("command"):
            out[f"command{suffix}"] = shards[0]["command"]
        if (meta.get("versions") or {}).get("kconform"):
            out[f"kconform{suffix}"] = meta["versions"]["kconform"]
        if meta.get("shard_count"):
            out[f"shards{suffix}"] = f"{len(shards)} of {meta['shard_count']}"
    return out


def side_by_side_attachments(rows: list[dict], out_dir: Path) -> None:
    """Add the side-by-side page to results the pytest plugin wrote, matched by case, and the
    row's status message (the per-target categories match on it) where the result's tags name
    its target and client (``target:NAME``, ``client:NAME``, as the plugin writes them).
    Results without those are left as they are."""
    w = _Writer(out_dir)
    pages = {case: w.text("side by side (all targets)", render_case(cr), ".html", "text/html")
             for case, cr in by_case(rows).items()}
    by_key = {(r["case"], r["target"], r["client"]): r for r in rows}
    for f in out_dir.glob("*-result.json"):
        res = json.loads(f.read_text(encoding="utf-8"))
        labels = {lab["name"]: lab["value"] for lab in res.get("labels", [])}
        tags = dict(lab["value"].split(":", 1) for lab in res.get("labels", [])
                    if lab["name"] == "tag" and ":" in lab["value"])
        case = labels.get("case") or labels.get("suite")
        if case not in pages:
            continue
        res.setdefault("attachments", []).insert(0, pages[case])
        row = by_key.get((case, tags.get("target"), tags.get("client")))
        if row is not None:
            message, _ = _status_message(row)
            details = res.setdefault("statusDetails", {})
            if message:
                details["message"] = message + ("\n" + details["message"] if details.get("message") else "")
        f.write_text(json.dumps(res), encoding="utf-8")
