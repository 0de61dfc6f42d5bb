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
from dataclasses import dataclass, field
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


@dataclass
class Runs:
    """The rows of several results directories, read as one: `dirs` maps each row (by id) to
    the directory it came from (its artifacts are there), `runs` has one run.json per run --
    the shards of one run (`kconform run --shard I/N --run-id ID`) merged into one."""

    rows: list[dict] = field(default_factory=list)
    dirs: dict[int, Path] = field(default_factory=dict)
    runs: list[dict] = field(default_factory=list)


def read_runs(run_dirs) -> Runs:
    """Every row of these directories, in the order given, and their runs (merge_metas)."""
    out = Runs()
    metas = []
    for d in run_dirs:
        d = Path(d)
        meta = read_run_meta(d)
        meta["results_dir"] = str(d)
        metas.append(meta)
        for r in read_results(d):
            out.rows.append(r)
            out.dirs[id(r)] = d
    out.runs = merge_metas(metas)
    return out


def merge_metas(metas: list[dict]) -> list[dict]:
    """One entry per run: the run.json of an unsharded run as it is; the shards of one run (same
    run id, each with `shard`) as one entry -- started at the first shard's start, finished at the
    last one's end (when every shard finished), with `shards` (each shard's own run.json),
    `shard_count`, `missing_shards` (indexes no directory had) and `split_mismatch` (the shards
    were not split alike: another durations file or other cases)."""
    out: list[dict] = []
    groups: dict[str, dict] = {}
    for meta in metas:
        shard = meta.get("shard")
        if not shard or not meta.get("run_id"):
            out.append(meta)
            continue
        merged = groups.get(meta["run_id"])
        if merged is None:
            merged = groups[meta["run_id"]] = {k: v for k, v in meta.items() if k not in ("shard", "results_dir")}
            merged.update(shards=[], shard_count=shard["count"])
            out.append(merged)
        merged["shards"].append(meta)
    for merged in groups.values():
        shards = sorted(merged["shards"], key=lambda m: m["shard"]["index"])
        merged["shards"] = shards
        have = {m["shard"]["index"] for m in shards}
        merged["missing_shards"] = [i for i in range(1, merged["shard_count"] + 1) if i not in have]
        merged["split_mismatch"] = len({m["shard"].get("split") for m in shards}) > 1 or \
            len({m["shard"]["count"] for m in shards}) > 1
        merged["started_at"] = min(m.get("started_at") or "~" for m in shards)
        finished = [m.get("finished_at") for m in shards]
        done = all(m.get("status", "finished") == "finished" for m in shards) and all(finished)
        merged["status"] = "finished" if done else next(
            (m.get("status") for m in shards if m.get("status") not in (None, "finished")), "unfinished")
        if done:
            merged["finished_at"] = max(finished)
        else:
            merged.pop("finished_at", None)
        merged["jobs"] = shards[0].get("jobs")
        merged["results_dir"] = ", ".join(Path(m["results_dir"]).name for m in shards)
    return out
