"""The mutation check: apply each seeded bug to a scratch copy of the repo, run the cases meant
to catch it on the embedded broker, and print which did (issue 14).

Why a scratch copy: the patches change broker_impl, and the run must use the patched code for
the broker process and the harness alike while the working tree stays untouched -- so HEAD
(`git archive`, committed work only) is unpacked under the results directory, each patch is
applied there and reversed after its run. The cases first run on the unpatched copy (the
baseline): a case that does not pass there cannot say anything about a mutant, and the table
says so. A case catches a mutant when its row is `fail` or `crash` with the patch applied.

Usage (from the repo; one run at a time, it is CPU-heavy):
    python bench/mutants/run.py                      # every mutant
    python bench/mutants/run.py 08-produce-fenced-code 13-describe-wrong-state
    python bench/mutants/run.py --results /tmp/mutants --client confluent
Not part of `make test`.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import io
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CAUGHT = ("fail", "crash")
RUN_TIMEOUT_S = 1200


def load_manifest() -> dict[str, dict]:
    return yaml.safe_load((HERE / "mutants.yaml").read_text())["mutants"]


def unpack_head(dest: Path) -> None:
    """HEAD's tracked files under ``dest`` (no .git: the copy is nobody's worktree)."""
    tar = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", "HEAD"], check=True,
                         capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        t.extractall(dest, filter="data")


def git_apply(copy: Path, patch: Path, reverse: bool = False) -> None:
    args = ["git", "apply", "--whitespace=nowarn"] + (["-R"] if reverse else []) + [str(patch)]
    subprocess.run(args, cwd=copy, check=True, capture_output=True, text=True,
                   env=dict(os.environ, GIT_CEILING_DIRECTORIES=str(copy.parent)))


def run_cases(copy: Path, cases: list[str], results: Path, target: str, client: str,
              security: str | None = None) -> dict[str, str]:
    """case id -> verdict ("timeout" when the run did not end in RUN_TIMEOUT_S). ``security``:
    the run's ``--security`` (a mutant in the authentication path is caught only by cases that
    need SASL: on a PLAINTEXT run they are not applicable)."""
    if results.exists():
        shutil.rmtree(results)
    cmd = [sys.executable, "-m", "conformance.cli", "run", "--target", target, "--client", client,
           "--results", str(results), "-j", "1"] + (["--security", security] if security else [])
    for c in cases:
        cmd += ["--case", c]
    env = dict(os.environ, PYTHONPATH=str(copy))
    try:
        subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {c: "timeout" for c in cases}
    out = {c: "missing" for c in cases}
    path = results / "results.jsonl"
    if path.exists():
        for line in path.read_text().splitlines():
            row = json.loads(line)
            out[row["case"]] = row["verdict"]
    return out


def key(case: str, security: str | None) -> str:
    """A case's name in the baseline: the same case over SASL is another row."""
    return f"{case} ({security})" if security else case


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mutants", nargs="*", help="mutant names (default: all of mutants.yaml)")
    ap.add_argument("--results", type=Path, default=Path("/tmp/kconform-mutants"))
    ap.add_argument("--target", default="embedded")
    ap.add_argument("--client", default="confluent")
    args = ap.parse_args(argv)
    manifest = load_manifest()
    names = args.mutants or sorted(manifest)
    unknown = [n for n in names if n not in manifest]
    if unknown:
        ap.error(f"unknown mutants {unknown}; known: {sorted(manifest)}")
    copy = args.results / "repo"
    if args.results.exists():
        shutil.rmtree(args.results)
    copy.mkdir(parents=True)
    unpack_head(copy)
    by_security: dict[str | None, set[str]] = {}
    for n in names:
        by_security.setdefault(manifest[n].get("security"), set()).update(manifest[n]["cases"])
    t0 = time.monotonic()
    print(f"baseline: {sum(map(len, by_security.values()))} case(s) on the unpatched copy", flush=True)
    baseline: dict[str, str] = {}     # keyed as ``key`` names a case run over ``security``
    for security, cases in sorted(by_security.items(), key=lambda kv: kv[0] or ""):
        verdicts = run_cases(copy, sorted(cases), args.results / f"baseline{'-' + security if security else ''}",
                             args.target, args.client, security)
        baseline.update({key(c, security): v for c, v in verdicts.items()})
    for c, v in baseline.items():
        if v != "pass":
            print(f"  baseline {c}: {v} (it cannot catch anything)", flush=True)
    table = []
    for name in names:
        m = manifest[name]
        patch = HERE / "patches" / f"{name}.patch"
        git_apply(copy, patch)
        security = m.get("security")
        try:
            verdicts = run_cases(copy, m["cases"], args.results / name, args.target, args.client, security)
        finally:
            git_apply(copy, patch, reverse=True)
        catching = [c for c, v in verdicts.items() if v in CAUGHT and baseline.get(key(c, security)) == "pass"]
        table.append({"mutant": name, "area": m["area"], "caught": bool(catching), "by": catching,
                      "verdicts": verdicts})
        print(f"{name:48} {'CAUGHT' if catching else 'survived':9} {', '.join(catching) or verdicts}", flush=True)
    caught = sum(1 for r in table if r["caught"])
    print()
    print("| mutant | area | caught | cases that catch it |\n|---|---|---|---|")
    for r in table:
        print(f"| {r['mutant']} | {r['area']} | {'yes' if r['caught'] else 'NO'} | {', '.join(r['by']) or '-'} |")
    score = 100.0 * caught / len(table) if table else 0.0
    print(f"\nscore: {caught}/{len(table)} = {score:.0f}% ({time.monotonic() - t0:.0f} s, "
          f"{args.target} with {args.client})")
    (args.results / "mutants.json").write_text(json.dumps({"baseline": baseline, "mutants": table,
                                                           "score": score}, indent=1))
    return 0 if caught == len(table) else 1


if __name__ == "__main__":
    sys.exit(main())
