"""Shrinking a failing seed to a short workload that still fails, saved as a case.

A failing seed is a long story: a minute of several clients and a dozen faults. What a broker
developer needs is the few faults and the one or two workers without which the anomaly does not
happen. Like Jepsen's and QuickCheck's shrinkers, this tries smaller variants and keeps each
one that still shows the anomaly:

1. the time limit cut to a little after the anomaly was first seen;
2. the fault schedule: all of it away, else halves, else one entry at a time (a fault and the
   entry that undoes it -- crash and restart of the same node -- go together);
3. the workers: one at a time, readers first;
4. the op limit halved.

Every variant is one run of the workload on the same target with the same client (a row of
the ordinary runner). An anomaly that depends on a race may not show up in a run of a smaller
variant that could still produce it: such a variant is counted as passing, so the result is
never smaller than what was seen to fail. Bounded by a number of trials and a time budget.
The result is written out -- workers and schedule explicit, no generator knobs -- so it
replays as it is (`kconform run --case FILE`).
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from ..dsl import Case, parse_case
from ..dsl.workload import workload_to_yaml
from ..runner.runner import RunOptions, run


@dataclass
class Shrunk:
    data: dict[str, Any]
    trials: list[dict[str, Any]] = field(default_factory=list)
    kinds: set[str] = field(default_factory=set)


def case_to_yaml(case: Case) -> dict[str, Any]:
    """A workload case back to its file form, workers and schedule written out."""
    topo = case.topology
    topics = []
    for t in topo.topics:
        d: dict[str, Any] = {"name": t.name, "partitions": t.partitions}
        if t.replication_factor is not None:
            d["replication_factor"] = t.replication_factor
        if t.configs:
            d["configs"] = dict(t.configs)
        topics.append(d)
    topology: dict[str, Any] = {"nodes": topo.nodes, "topics": topics}
    if topo.broker_configs:
        topology["broker_configs"] = dict(topo.broker_configs)
    if topo.controller != "combined":
        topology["controller"] = topo.controller
    out = {"title": case.title, "tags": list(case.tags), "topology": topology,
           "workload": workload_to_yaml(case.workload)}
    if case.description:
        out["description"] = case.description
    return out


def _groups(schedule: list[dict]) -> list[list[int]]:
    """Indexes of schedule entries that go together: a node fault with the entry undoing it."""
    undo = {"crash": "restart", "stop": "restart", "pause": "resume"}
    groups: list[list[int]] = []
    used: set[int] = set()
    for i, e in enumerate(schedule):
        if i in used:
            continue
        group = [i]
        f = e.get("fault") or {}
        action = next((a for a in undo if a in f), None)
        if action is not None:
            key = {k: v for k, v in f.items() if k != action}
            for j in range(i + 1, len(schedule)):
                g = schedule[j].get("fault") or {}
                if j not in used and undo[action] in g and g.get(undo[action]) == f[action] and \
                        {k: v for k, v in g.items() if k != undo[action]} == key:
                    group.append(j)
                    break
        used.update(group)
        groups.append(group)
    return groups


def shrink(case: Case, target: str, client: str, kinds: set[str], workdir: Path, *, first_seen_s: float | None = None,
           max_trials: int = 24, budget_s: float = 1800.0, target_options: dict | None = None,
           log: Callable[[str], None] = print) -> Shrunk:
    """The smallest variant of `case` found whose run on (target, client) still shows one of the
    anomaly `kinds` (module doc)."""
    data = case_to_yaml(case)
    result = Shrunk(copy.deepcopy(data), kinds=set(kinds))
    started = time.monotonic()
    n = 0

    def fails(candidate: dict[str, Any], what: str) -> bool:
        nonlocal n
        if n >= max_trials or time.monotonic() - started > budget_s:
            return False
        n += 1
        c = parse_case(copy.deepcopy(candidate), f"(shrink trial {n} of {case.id})", f"{case.id}~{n}")
        rows = run(RunOptions(targets=[target], clients=[client], cases=[c], results_dir=workdir / f"trial-{n}",
                              jobs=1, target_options=target_options or {}))
        seen = set((rows[0].workload or {}).get("anomalies") or {})
        hit = bool(seen & kinds)
        result.trials.append({"trial": n, "what": what, "verdict": rows[0].verdict.value, "anomalies": sorted(seen),
                              "still_fails": hit})
        log(f"shrink trial {n}: {what}: {'still fails' if hit else 'passes'} ({', '.join(sorted(seen)) or 'no anomaly'})")
        return hit

    cur = copy.deepcopy(data)
    w = cur["workload"]
    if first_seen_s is not None and first_seen_s + 8 < w["time_limit_s"]:
        cand = copy.deepcopy(cur)
        cand["workload"]["time_limit_s"] = float(max(10, round(first_seen_s + 8)))
        cand["workload"]["schedule"] = [e for e in w["schedule"] if e["at_s"] < cand["workload"]["time_limit_s"]]
        if fails(cand, f"time limit {cand['workload']['time_limit_s']:g} s"):
            cur = cand
    if cur["workload"]["schedule"]:
        cand = copy.deepcopy(cur)
        cand["workload"]["schedule"] = []
        if fails(cand, "no faults at all"):
            cur = cand
    size = 2
    while cur["workload"]["schedule"]:
        groups = _groups(cur["workload"]["schedule"])
        if len(groups) < size:
            size = len(groups)
        chunk = max(1, len(groups) // size)
        removed = False
        for start in range(0, len(groups), chunk):
            drop = {i for g in groups[start:start + chunk] for i in g}
            cand = copy.deepcopy(cur)
            cand["workload"]["schedule"] = [e for i, e in enumerate(cur["workload"]["schedule"]) if i not in drop]
            if fails(cand, f"without {len(drop)} schedule entr{'y' if len(drop) == 1 else 'ies'}"):
                cur, removed = cand, True
                break
        if not removed:
            if chunk == 1:
                break
            size *= 2
    order = sorted(cur["workload"]["workers"], key=lambda wk: (wk["kind"] != "reader", wk["kind"] == "copier"))
    for wk in order:
        if len(cur["workload"]["workers"]) <= 1:
            break
        cand = copy.deepcopy(cur)
        cand["workload"]["workers"] = [x for x in cur["workload"]["workers"] if x["name"] != wk["name"]]
        cand["workload"]["schedule"] = [e for e in cur["workload"]["schedule"]
                                        if e.get("crash", e.get("restart")) != wk["name"]]
        if fails(cand, f"without worker {wk['name']} ({wk['kind']})"):
            cur = cand
    while cur["workload"]["op_limit"] > 50:
        cand = copy.deepcopy(cur)
        cand["workload"]["op_limit"] = cur["workload"]["op_limit"] // 2
        if not fails(cand, f"op limit {cand['workload']['op_limit']}"):
            break
        cur = cand
    result.data = cur
    return result


def save(shrunk: Shrunk, case: Case, target: str, client: str, path: Path) -> Path:
    """The shrunk workload as a case file that replays it (workers that ran the row's client are
    pinned to it: the file replays the same thing whatever client a later run names)."""
    data = copy.deepcopy(shrunk.data)
    for wk in data["workload"]["workers"]:
        wk.setdefault("client", client)   # it failed with this client: replay it with that client
    data["title"] = f"{case.title} -- seed {case.workload.seed} shrunk ({', '.join(sorted(shrunk.kinds))} on {target})"
    data["tags"] = sorted(set(data.get("tags") or []) | {"workload", "shrunk"})
    kept = [t for t in shrunk.trials if t["still_fails"]]
    data["description"] = (f"Shrunk by `kconform workload --shrink` from {case.id} (seed {case.workload.seed}) on "
                           f"{target} with {client}: {len(shrunk.trials)} trial(s), {len(kept)} kept. It showed "
                           f"{', '.join(sorted(shrunk.kinds))}.")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False, width=110), encoding="utf-8")
    return path
