"""Does the generative workload find seeded bugs by itself? (issue 20)

The case library is measured against bench/mutants by run.py: each mutant has the cases written
to catch it. This asks the other question -- with no case aimed at the bug, does a workload seed
(docs/workload.md) show an anomaly on the patched broker? Each mutant is applied to a scratch
copy of HEAD (run.py's way), one workload row per (seed, client) runs on the embedded target, and
the anomalies are compared with the unpatched copy's (the baseline: the same seeds and clients
must show none there, else the row says nothing).

    python bench/mutants/workload.py                                   # every mutant
    python bench/mutants/workload.py 50-txn-tv2-fenced-while-markers-in-flight 61-tv2-produce-concurrent-as-not-enough-replicas \\
        --spec workloads/quiet --seed 1 --client franz-go --client java --time-limit 30

Prints the table (mutant -> anomalies per client) and the score; writes workload-mutants.json.
CPU-heavy (a workload row is ~1 min): not part of `make test`.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from run import HERE, git_apply, load_manifest, unpack_head

RUN_TIMEOUT_S = 1800


def run_workload(copy: Path, results: Path, spec: str, seeds: list[int], clients: list[str],
                 time_limit: float | None) -> dict[tuple[int, str], dict[str, int] | str]:
    """(seed, client) -> anomaly kind -> count, or the row's verdict when it has no workload summary."""
    if results.exists():
        shutil.rmtree(results)
    cmd = [sys.executable, "-m", "conformance.cli", "workload", spec, "--results", str(results), "-j", "1",
           "--no-progress"]
    for s in seeds:
        cmd += ["--seed", str(s)]
    for c in clients:
        cmd += ["--client", c]
    if time_limit is not None:
        cmd += ["--time-limit", str(time_limit)]
    try:
        subprocess.run(cmd, cwd=copy, env=dict(os.environ, PYTHONPATH=str(copy)), capture_output=True, text=True,
                       timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {(s, c): "timeout" for s in seeds for c in clients}
    out: dict[tuple[int, str], dict[str, int] | str] = {(s, c): "missing" for s in seeds for c in clients}
    path = results / "results.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        row = json.loads(line)
        seed = int(row["case"].rsplit("@", 1)[1])
        w = row.get("workload")
        out[(seed, row["client"])] = dict(w.get("anomalies") or {}) if w else row["verdict"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mutants", nargs="*", help="mutant names (default: all of mutants.yaml)")
    ap.add_argument("--spec", default="workloads/quiet")
    ap.add_argument("--seed", type=int, action="append", dest="seeds")
    ap.add_argument("--client", action="append", dest="clients")
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--results", type=Path, default=Path("/tmp/kconform-workload-mutants"))
    args = ap.parse_args(argv)
    seeds, clients = args.seeds or [1], args.clients or ["java"]
    manifest = load_manifest()
    names = args.mutants or sorted(manifest)
    args.results.mkdir(parents=True, exist_ok=True)
    copy = args.results / "copy"
    shutil.rmtree(copy, ignore_errors=True)
    unpack_head(copy)
    t0 = time.monotonic()
    baseline = run_workload(copy, args.results / "baseline", args.spec, seeds, clients, args.time_limit)
    noisy = {k for k, v in baseline.items() if v != {}}
    table = {}
    for name in names:
        patch = HERE / "patches" / f"{name}.patch"
        git_apply(copy, patch)
        try:
            table[name] = run_workload(copy, args.results / name, args.spec, seeds, clients, args.time_limit)
        finally:
            git_apply(copy, patch, reverse=True)
    caught = [n for n, found in table.items()
              if any(isinstance(v, dict) and v and k not in noisy or v in ("crash", "fail") for k, v in found.items())]
    print(f"| mutant | {' | '.join(f'seed {s} {c}' for s, c in baseline)} |")
    print("|---|" + "---|" * len(baseline))
    print(f"| (baseline) | {' | '.join(str(v or 'none') for v in baseline.values())} |")
    for name, found in table.items():
        print(f"| {name} | {' | '.join(str(found[k] or 'none') for k in baseline)} |")
    print(f"\nfound by the workload alone: {len(caught)} of {len(table)} ({args.spec}, seeds {seeds}, clients {clients}, "
          f"{args.time_limit:g} s each; {time.monotonic() - t0:.0f} s)")
    if noisy:
        print(f"baseline rows with anomalies (they say nothing about a mutant): {sorted(noisy)}")
    (args.results / "workload-mutants.json").write_text(json.dumps(
        {"spec": args.spec, "seeds": seeds, "clients": clients, "baseline": {f"{s}/{c}": v for (s, c), v in baseline.items()},
         "mutants": {n: {f"{s}/{c}": v for (s, c), v in f.items()} for n, f in table.items()}, "caught": caught},
        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
