"""Does a broker team's baseline turn a new bug red? (docs/ci.md, "Measured")

    PYTHONPATH=. python bench/baseline_seeded_kfake.py [--case 'txn/*'] [--client confluent --client java]

A vendor's CI runs the library on its broker by a target file, judged by its baseline: green
while the broker fails only as the baseline says, red -- naming the row -- once a change brings a
new divergence. This measures exactly that on kfake, the peer whose target file ships
(targets/kfake.yaml), with a bug seeded into kfake's own Go source:

1. kfake as targets/kfake.yaml declares it (`kfake-file`), judged by baselines/kfake.yaml
   renamed for that target (the file target gives the built-in target's verdicts): must exit 0.
2. The same, on a kfake built with one line of 01_fetch.go changed -- a read_committed Fetch
   looks up the aborted transactions whose *first* offset is at or past the fetch offset, where
   kfake (and Kafka's aborted-transaction index) takes those whose *last* offset is: a fetch that
   starts inside an aborted transaction is told nothing of it, and the consumer returns the
   aborted records. Must exit 1, naming each newly failing row.

The seeded kfake is built into the cache (~/.cache/kconform/kfake-seeded/<digest>/) from the
module the target pins, never into the repository. Prints both runs' exits, their expected
failures and the rows named; exits 0 when the baseline held on the unpatched kfake and failed
the seeded one.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from conformance import buildcache
from conformance.targets.kfake import BUILD, SOURCE, pinned_versions

ROOT = Path(__file__).resolve().parent.parent
KFAKE_MODULE = "github.com/twmb/franz-go/pkg/kfake"
#: The seeded bug: (file, kfake's line, the bug's line). Exactly one occurrence, or the kfake
#: version moved on and the patch must be written again.
SEED = ("01_fetch.go",
        "return pd.abortedTxns[k].lastOffset >= fp.fetchOffset",
        "return pd.abortedTxns[k].firstOffset >= fp.fetchOffset")
NEWLY = re.compile(r"^NEWLY (FAILS|PASSES): (\S+) \[([^\]]+)\]")


def build_seeded() -> Path:
    """The seeded kfake binary, built once per (pinned version, patch)."""
    version = pinned_versions()[KFAKE_MODULE]
    digest = hashlib.sha256(json.dumps([version, SEED, (SOURCE / "main.go").read_text()]).encode()).hexdigest()[:16]

    def make(out: Path) -> None:
        info = json.loads(subprocess.run(["go", "mod", "download", "-json", f"{KFAKE_MODULE}@{version}"],
                                         check=True, capture_output=True, text=True, cwd=SOURCE).stdout)
        module = out / "kfake"
        shutil.copytree(info["Dir"], module)
        # The module cache's copy is read-only; the patch, and a later rebuild's cleanup, write.
        for p in [module, *module.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)
        target = module / SEED[0]
        text = target.read_text()
        if text.count(SEED[1]) != 1:
            raise SystemExit(f"{target}: the seeded line's original occurs {text.count(SEED[1])} times, "
                             "expected once -- write the patch again for this kfake")
        target.write_text(text.replace(SEED[1], SEED[2]))
        main = out / "main"
        main.mkdir()
        for name in ("main.go", "go.mod", "go.sum"):
            shutil.copy(SOURCE / name, main / name)
        with open(main / "go.mod", "a") as f:
            f.write(f"\nreplace {KFAKE_MODULE} => ../kfake\n")
        env = dict(os.environ, GOFLAGS="-mod=mod")
        buildcache.run_logged(["go", "build", "-o", str(out / "kfake-seeded"), "."], main, env,
                              buildcache.BUILD_TIMEOUT, "building the seeded kfake")

    return buildcache.once(buildcache.cache_root() / "kfake-seeded" / digest, make) / "kfake-seeded"


def run(binary: Path, baselines: Path, results: Path, cases: list[str], clients: list[str]) -> tuple[int, list[str], int]:
    """(exit status, the NEWLY lines, expected failures) of one judged run on the file target."""
    argv = [sys.executable, "-m", "conformance.cli", "run", "--target", str(ROOT / "targets" / "kfake.yaml"),
            "--baseline", str(baselines), "-j", "2", "--results", str(results)]
    for c in cases:
        argv += ["--case", c]
    for c in clients:
        argv += ["--client", c]
    env = dict(os.environ, KCONFORM_KFAKE_BIN=str(binary))
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    # The run names each row (on stderr) as it ends and again in its summary: once here.
    named = list(dict.fromkeys(line for line in (proc.stdout + proc.stderr).splitlines() if NEWLY.match(line)))
    expected = sum(1 for line in (results / "results.jsonl").read_text().splitlines()
                   if json.loads(line).get("status") == "expected_fail") if (results / "results.jsonl").exists() else 0
    return proc.returncode, named, expected


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", action="append", help="case ids or globs (default: txn/*)")
    ap.add_argument("--client", action="append", help="clients (default: confluent and java, as the baseline)")
    args = ap.parse_args()
    cases = args.case or ["txn/*"]
    clients = args.client or ["confluent", "java"]
    unpatched = BUILD.ensure() / "kfake"
    seeded = build_seeded()
    with tempfile.TemporaryDirectory(prefix="kconform-seeded-") as tmp:
        tmp_path = Path(tmp)
        baselines = tmp_path / "baselines"
        baselines.mkdir()
        shipped = (ROOT / "baselines" / "kfake.yaml").read_text()
        (baselines / "kfake-file.yaml").write_text(re.sub(r"(?m)^target: kfake$", "target: kfake-file", shipped))
        code0, named0, expected0 = run(unpatched, baselines, tmp_path / "unpatched", cases, clients)
        print(f"kfake as targets/kfake.yaml, its baseline: exit {code0}, {expected0} rows fail as the baseline "
              f"expects, {len(named0)} named")
        for line in named0:
            print("   ", line[:200])
        code1, named1, expected1 = run(seeded, baselines, tmp_path / "seeded", cases, clients)
        print(f"the same with the seeded bug ({SEED[0]}: {SEED[2]}): exit {code1}, {expected1} rows fail as "
              f"the baseline expects, {len(named1)} named:")
        for line in named1:
            print("   ", line[:200])
    held = code0 == 0 and not named0 and code1 == 1 and bool(named1)
    print("the baseline held on kfake and turned red on the seeded bug" if held else
          "NOT as expected: see the exits above")
    return 0 if held else 1


if __name__ == "__main__":
    raise SystemExit(main())
