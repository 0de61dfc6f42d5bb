"""Reading a run directory's ``results.jsonl`` (the contract: docs/results-schema.md).

``reports`` reads only these files and the artifacts they point to; it never imports the
runner, so a results directory copied from CI renders the same as one made here. The rows
are read by the results model (conformance/results.py, a leaf module: its ResultsFile is the
file's one writer and its reader) and handed on as the JSON objects they are -- reports read
rows of every kconform release, so they keep what a row has, with the model's defaults for
what an older row lacks.
"""

from __future__ import annotations

import json
from pathlib import Path

from conformance.results import ResultsFile


def read_results(run_dir: str | Path) -> list[dict]:
    """The rows of ``run_dir/results.jsonl``, with optional fields defaulted.

    A row missing a required field or with an unknown verdict is an error:
    a report that silently dropped rows would misreport conformance.
    """
    return ResultsFile(run_dir).read_dicts()


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
