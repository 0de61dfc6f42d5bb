"""Many seeds of one workload spec: the same file, each seed a case of its own (`<id>@<seed>`).

The spec is a workload case file (cases/workloads/*.yaml). Overrides from the command line
(time and op limits, the clients a mixed workload pins its workers to) change the file's data
before it is validated, so a wrong value is reported like a wrong field in the file.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Iterable

import yaml

from ..dsl import CASES_ROOT, Case, CaseError, parse_case
from ..dsl.loader import case_id_for


def load_spec(path: str | Path) -> tuple[dict[str, Any], str, str]:
    """(the YAML data, its file name for errors, its case id) of a workload spec file, or of a
    library name such as `workloads/cluster` (cases/<name>.yaml)."""
    p = Path(path)
    if not p.is_file():
        candidate = CASES_ROOT / f"{path}.yaml"
        if candidate.is_file():
            p = candidate
        else:
            raise CaseError(str(path), "", "a workload case file, or a name under cases/ such as workloads/cluster")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise CaseError(str(p), "", "valid YAML", str(exc)) from None
    if not isinstance(data, dict) or "workload" not in data:
        raise CaseError(str(p), "workload", "a workload case (a `workload:` section)")
    return data, str(p), case_id_for(p, CASES_ROOT)


def seeded(path: str | Path, seeds: Iterable[int], *, time_limit_s: float | None = None,
           op_limit: int | None = None, clients: list[str] | None = None,
           generate: dict[str, Any] | None = None) -> list[Case]:
    """One case per seed: the spec with `workload.seed` set (and the overrides), validated."""
    data, file, cid = load_spec(path)
    out = []
    for seed in seeds:
        d = copy.deepcopy(data)
        d.pop("id", None)
        w = d["workload"]
        w["seed"] = seed
        if time_limit_s is not None:
            w["time_limit_s"] = time_limit_s
        if op_limit is not None:
            w["op_limit"] = op_limit
        if clients is not None or generate:
            if "generate" not in w:
                raise CaseError(file, "workload.generate", "generator knobs: --mix and --set change them, and this "
                                                           "workload writes its workers out")
            w["generate"] = dict(w["generate"] or {})
            if clients is not None:
                w["generate"]["clients"] = list(clients)
            w["generate"].update(generate or {})
        out.append(parse_case(d, file, f"{cid}@{seed}"))
    return out
