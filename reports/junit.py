"""JUnit XML of a run: the format every CI already reads (GitHub Actions' test reporters, GitLab,
Jenkins, Buildkite), as the OCI/CNCF conformance programs hand in their results.

One <testcase> per row (name: the case id; classname: `kconform.<target>.<client>`), one
<testsuite> per target (its version, baseline and the run's command line as properties). What
each row's status (conformance.results.Status: the verdict judged against the baseline) becomes:

    pass               a plain testcase
    fail (new)         <failure type="fail">   the failed checks, one a line; type="crash" for a crash
    unexpected_pass    <failure type="unexpected_pass">   the stale baseline entry, with its link
    expected_fail      <skipped type="expected_fail">     the entry's reason and link (pytest writes
                       its xfail so); the failed checks in <system-out>
    not_applicable     <skipped type="not_applicable">    why
    error              <error type="error">               kconform could not run the row

<system-out> links the row's transcript, crash log and error trace as `[[ATTACHMENT|path]]`
(Jenkins' and GitLab's convention), each path as the run directory was given plus the artifact.

A sentinel: `kconform run --junit FILE` writes FILE at the start as one <error> testcase
("kconform run did not finish") and replaces it only when the run ends -- a harness that crashed,
was killed or never got to its rows leaves a failing file, never a clean one. Merged shards
(`kconform junit --results A --results B ...`) say the same of a shard that is missing or did
not finish.
"""
from __future__ import annotations

import os
import re
import socket
import xml.etree.ElementTree as ET
from pathlib import Path

from conformance.results import Status, Verdict, status_of

from .results import Runs, read_runs

HARNESS_CLASS = "kconform.harness"
#: Characters XML 1.0 cannot hold (a check message may quote raw bytes).
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text) -> str:
    return _INVALID_XML.sub("\ufffd", str(text if text is not None else ""))


def _one_line(text: str, limit: int = 300) -> str:
    one = re.sub(r"\s+", " ", text).strip()
    return one if len(one) <= limit else one[: limit - 1] + "…"


def classname(target: str, client: str) -> str:
    """`kconform.apache-kafka@3_9_1.confluent`: dots split packages in the tools, so a release's
    dots become underscores."""
    return f"kconform.{target.replace('.', '_')}.{client}"


def _attachment(run_dir: Path, rel: str) -> str:
    path = run_dir / rel
    try:
        shown = os.path.relpath(path, Path.cwd()) if not os.path.isabs(run_dir) or \
            Path(path).resolve().is_relative_to(Path.cwd().resolve()) else str(path)
    except ValueError:
        shown = str(path)
    return f"[[ATTACHMENT|{shown}]]"


def _failed_lines(row: dict) -> list[str]:
    return [f"{c['name']}: {c.get('message', '')}".strip() for c in row.get("checks") or [] if not c.get("passed")]


def _details(row: dict) -> str:
    lines = _failed_lines(row)
    if row.get("reason") and row["verdict"] != Verdict.FAIL:
        lines.insert(0, row["reason"])
    for d in (row.get("diff") or [])[:10]:
        lines.append(f"differs from {row.get('reference_target')} at {d['path']}: "
                     f"reference {d.get('reference')!r}, actual {d.get('actual')!r}")
    return "\n".join(lines)


def testcase(row: dict, run_dir: Path, baselined: bool = True) -> ET.Element:
    """The row's testcase; `baselined`: its target had a baseline in the run (a failure is then
    *new*, and says so)."""
    status, note = status_of(row)
    tc = ET.Element("testcase", name=_clean(row["case"]), classname=classname(row["target"], row["client"]),
                    time=f"{float(row.get('duration_s') or 0):.3f}")
    expected = row.get("expected") or {}
    if status is Status.FAIL:
        kind = "crash" if row["verdict"] == Verdict.CRASH else "fail"
        failed = _failed_lines(row)
        head = (row.get("reason") if kind == "crash" else None) or (failed[0] if failed else row.get("reason") or kind)
        does = "crashes" if kind == "crash" else "fails"
        message = f"newly {does} ({note}): {head}" if baselined else f"{does}: {head}"
        el = ET.SubElement(tc, "failure", type=kind, message=_clean(_one_line(message)))
        el.text = _clean(_details(row))
    elif status is Status.UNEXPECTED_PASS:
        el = ET.SubElement(tc, "failure", type="unexpected_pass",
                           message=_clean(_one_line(f"newly {note}")))
        el.text = _clean(f"{note}\nbaseline: {expected.get('source', '')}\nlink: {expected.get('link', '')}\n"
                         "remove the entry (kconform run --update-baseline) now that the row passes")
    elif status is Status.EXPECTED_FAIL:
        link = f" ({expected['link']})" if expected.get("link") else ""
        ET.SubElement(tc, "skipped", type="expected_fail",
                      message=_clean(_one_line(f"expected failure: {expected.get('reason', '')}{link}", 500)))
    elif status is Status.NOT_APPLICABLE:
        ET.SubElement(tc, "skipped", type="not_applicable", message=_clean(_one_line(row.get("reason") or "")))
    elif status is Status.ERROR:
        el = ET.SubElement(tc, "error", type="error",
                           message=_clean(_one_line(f"kconform could not run the row: {row.get('reason') or ''}")))
        el.text = _clean(row.get("reason") or "")
    out = []
    if status is Status.EXPECTED_FAIL:
        out.append(f"fails as the baseline {expected.get('source', '')} expects:")
        out += [f"  {line}" for line in _failed_lines(row) or [row.get("reason") or ""]]
    if row.get("workload"):
        w = row["workload"]
        anomalies = ", ".join(f"{k} x{v}" for k, v in sorted((w.get("anomalies") or {}).items())) or "none"
        out.append(f"workload seed {w.get('seed')}: {w.get('operations')} operations, {w.get('faults')} faults, "
                   f"anomalies: {anomalies}")
    if row.get("application"):
        a = row["application"]
        out.append(f"application {a.get('application')}: {(a.get('output') or {}).get('duplicates')} duplicates, "
                   f"{(a.get('output') or {}).get('losses')} losses, bounces landed {a.get('bounces_landed')} of "
                   f"{a.get('bounces_done')}, copy {a.get('copy_s')} s")
    arts = row.get("artifacts") or {}
    for key in ("transcript", "crash", "steps", "timeline", "anomalies", "history"):
        if arts.get(key):
            out.append(f"{key}: {_attachment(run_dir, arts[key])}")
    error_txt = run_dir / Path(arts.get("steps") or "x/x").parent / "error.txt"
    if row["verdict"] == Verdict.ERROR and error_txt.is_file():
        out.append(f"error: {_attachment(run_dir, str(error_txt.relative_to(run_dir)))}")
    if out:
        ET.SubElement(tc, "system-out").text = _clean("\n".join(out))
    return tc


def _harness_case(name: str, message: str, detail: str = "") -> ET.Element:
    tc = ET.Element("testcase", name=name, classname=HARNESS_CLASS, time="0")
    el = ET.SubElement(tc, "error", type="harness", message=_clean(_one_line(message, 500)))
    el.text = _clean(detail or message)
    return tc


def harness_problems(runs: list[dict]) -> list[tuple[str, str]]:
    """(testcase name, message) for every run (or shard) that did not finish, and every missing
    shard: a report of such results must never look complete."""
    out = []
    for meta in runs:
        rid = meta.get("run_id", "?")
        for shard in meta.get("shards") or [meta]:
            where = f"run {rid}" + (f" shard {shard['shard']['index']}/{shard['shard']['count']}"
                                    if shard.get("shard") else "")
            status = shard.get("status")
            if status not in (None, "finished"):
                why = f": {shard['error']}" if shard.get("error") else ""
                out.append((f"{where} finished", f"{where} did not finish (status {status}){why}"))
        for index in meta.get("missing_shards") or []:
            out.append((f"run {rid} shard {index}/{meta['shard_count']}",
                        f"run {rid}: shard {index} of {meta['shard_count']} is missing from these results"))
        if meta.get("split_mismatch"):
            out.append((f"run {rid} shards split alike",
                        f"run {rid}: its shards were split differently (other durations or cases): rows may be "
                        "missing or doubled"))
    return out


def junit_tree(runs: Runs) -> ET.Element:
    """<testsuites> for these runs' rows (module doc)."""
    root = ET.Element("testsuites", name="kconform")
    host = socket.gethostname()
    by_target: dict[str, list[dict]] = {}
    for r in runs.rows:
        by_target.setdefault(r["target"], []).append(r)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0, "time": 0.0}
    first = runs.runs[0] if runs.runs else {}
    baselined = {t for m in runs.runs for s in (m.get("shards") or [m]) for t in (s.get("baselines") or {})}
    for target, rows in by_target.items():
        cases = [testcase(r, runs.dirs[id(r)], target in baselined or any(r.get("expected") for r in rows))
                 for r in rows]
        counts = _counts(cases)
        started = min((r.get("started_at") or "~" for r in rows), default="~").strip("~") or \
            first.get("started_at", "")
        suite = ET.SubElement(root, "testsuite", name=target, tests=str(len(cases)), failures=str(counts["failures"]),
                              errors=str(counts["errors"]), skipped=str(counts["skipped"]),
                              time=f"{counts['time']:.3f}", hostname=host)
        if re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z?", started):
            suite.set("timestamp", started.rstrip("Z"))
        props = ET.SubElement(suite, "properties")
        versions = sorted({r.get("target_version") or "" for r in rows} - {""})
        baselines = sorted({(r.get("expected") or {}).get("source", "") for r in rows} - {""})
        baselines = baselines or [b for m in runs.runs for t, b in (m.get("baselines") or {}).items() if t == target]
        for name, value in (("target", target), ("target_version", ", ".join(versions)),
                            ("baseline", ", ".join(sorted(set(baselines))) or "none"),
                            ("run_id", ", ".join(sorted({r["run_id"] for r in rows}))),
                            ("command", first.get("command") or ""),
                            ("kconform", (first.get("versions") or {}).get("kconform", ""))):
            ET.SubElement(props, "property", name=name, value=_clean(value))
        suite.extend(cases)
        for k in totals:
            totals[k] += counts[k] if k != "tests" else len(cases)
    problems = harness_problems(runs.runs)
    if problems:
        suite = ET.SubElement(root, "testsuite", name="kconform", tests=str(len(problems)), failures="0",
                              errors=str(len(problems)), skipped="0", time="0", hostname=host)
        suite.extend(_harness_case(name, message) for name, message in problems)
        totals["tests"] += len(problems)
        totals["errors"] += len(problems)
    for k, v in totals.items():
        root.set(k, f"{v:.3f}" if k == "time" else str(v))
    return root


def _counts(cases: list[ET.Element]) -> dict:
    out = {"failures": 0, "errors": 0, "skipped": 0, "time": 0.0}
    for tc in cases:
        out["time"] += float(tc.get("time") or 0)
        out["failures"] += tc.find("failure") is not None
        out["errors"] += tc.find("error") is not None
        out["skipped"] += tc.find("skipped") is not None
    return out


def _write(root: ET.Element, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.indent(root)
    tmp = path.with_name(path.name + ".tmp")
    ET.ElementTree(root).write(tmp, encoding="utf-8", xml_declaration=True)
    os.replace(tmp, path)   # never a half-written file: the sentinel or the whole report
    return path


def write_junit(results_dirs: list[str | Path], path: str | Path) -> Path:
    """JUnit XML of these results directories (shards of one run merge) into `path`."""
    return _write(junit_tree(read_runs(results_dirs)), path)


def write_sentinel(path: str | Path, message: str, detail: str = "") -> Path:
    """A JUnit file with one error testcase: kconform itself did not finish (module doc)."""
    root = ET.Element("testsuites", name="kconform", tests="1", failures="0", errors="1", skipped="0", time="0")
    suite = ET.SubElement(root, "testsuite", name="kconform", tests="1", failures="0", errors="1", skipped="0",
                          time="0", hostname=socket.gethostname())
    suite.append(_harness_case("kconform run finished", message, detail))
    return _write(root, path)
