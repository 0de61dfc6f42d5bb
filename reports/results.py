"""Reading a run directory's ``results.jsonl`` (the contract: docs/results-schema.md).

``reports`` reads only these files and the artifacts they point to; it
never imports the runner, so a results directory copied from CI renders
the same as one made here.
"""

from __future__ import annotations

import json
from pathlib import Path

VERDICTS = ("pass", "fail", "crash", "not_applicable", "error")
REQUIRED = ("run_id", "case", "target", "client", "verdict")


def read_results(run_dir: str | Path) -> list[dict]:
    """The rows of ``run_dir/results.jsonl``, with optional fields defaulted.

    A row missing a required field or with an unknown verdict is an error:
    a report that silently dropped rows would misreport conformance.
    """
    path = Path(run_dir) / "results.jsonl"
    rows: list[dict] = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not JSON: {exc}") from None
            missing = [k for k in REQUIRED if k not in row]
            if missing:
                raise ValueError(f"{path}:{lineno}: missing {', '.join(missing)}")
            if row["verdict"] not in VERDICTS:
                raise ValueError(f"{path}:{lineno}: verdict {row['verdict']!r} is not one of {VERDICTS}")
            row.setdefault("case_title", row["case"])
            row.setdefault("tags", [])
            row.setdefault("target_version", "")
            row.setdefault("client_version", "")
            row.setdefault("checks", [])
            row.setdefault("outcome", {})
            row.setdefault("diff", None)
            row.setdefault("reference_target", None)
            row.setdefault("duration_s", 0.0)
            row.setdefault("reason", None)
            row["artifacts"] = row.get("artifacts") or {}
            rows.append(row)
    return rows


def read_run_meta(run_dir: str | Path) -> dict:
    """``run_dir/run.json`` (the run's targets, clients, cases, reference, times), or {} when the
    run did not write one (it was interrupted, or the rows came from elsewhere)."""
    path = Path(run_dir) / "run.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}


def theme(case: str) -> str:
    """A case's theme: the folder of its id (``txn`` for ``txn/basic_commit``)."""
    return case.split("/", 1)[0] if "/" in case else "cases"


def by_case(rows: list[dict]) -> dict[str, list[dict]]:
    """Rows grouped by case, in first-seen order."""
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["case"], []).append(r)
    return out
