"""Does a sharded run report the same as one unsharded run? (docs/ci.md, "Measured")

    PYTHONPATH=. python bench/shard_check.py --whole RUN --shard S1 --shard S2 --shard S3 [--analytics]

RUN is one `kconform run`; S1..SN the results directories of the same plan run with `--shard
I/N --run-id ID`. Compared, each from the results files alone (as CI would make them):

- the verdict of every cell (case x target x client): the two are separate runs, so a cell whose
  verdict differs is named (a flaky row, not the sharding) and the report comparisons below are
  made over the cells whose verdicts agree;
- the compatibility page (kconform matrix), from its "Targets and clients" section on;
- the Allure results (kconform report): per test, its status and the first line of its message;
- the JUnit XML (kconform junit): per testcase, its outcome element and type;
- with --analytics, the Spark analytics (kconform analyze): matrix.csv's verdict, history, runs
  and (for a cell that does not pass) divergence per cell, and per_run.csv's rows per target;
- the shards' wall times (run.json): the spread, (longest - shortest) / longest.

Two runs never agree on a passing row's divergence details -- the outcome values that differ
from the reference (which node is the controller, the names a case generates, how many records a
timing-dependent step saw), nor always on whether a passing row diverges at all -- so those are
compared apart: each comparison above is made without them, and the cells whose details differ
are counted and shown (a sharded run is a separate run: the same holds for two unsharded runs).

Prints one line per comparison and exits 0 when every one agrees.
"""
from __future__ import annotations

import argparse
import csv
import json
import re
import sys
import tempfile
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path

from reports.allure_report import stage_results
from reports.junit import classname, write_junit
from reports.matrix import from_rows
from reports.matrix_page import render_markdown
from reports.results import read_runs


def _wall(meta: dict) -> float:
    a = datetime.fromisoformat(meta["started_at"].replace("Z", "+00:00"))
    b = datetime.fromisoformat(meta["finished_at"].replace("Z", "+00:00"))
    return (b - a).total_seconds()


DETAIL = re.compile(r": outcome differs at [^|]*")
DIFFERS_SECTION = re.compile(r"^### Outcome differs from Kafka's, checks hold")


def _page(dirs: list[Path], drop: set) -> tuple[list[str], set[str]]:
    """The compatibility page of these results without the cells whose verdicts differ, from its
    matrix on, with the divergence details of passing rows taken out; and those details (the
    lines of each target's "outcome differs, checks hold" section) apart (module doc)."""
    read = read_runs(dirs)
    rows = [r for r in read.rows if (r["case"], r["target"], r["client"]) not in drop]
    md = render_markdown(from_rows(rows, read.runs, read.dirs))
    page, details, inside = [], set(), False
    for line in md[md.index("## Targets and clients"):].splitlines():
        if line.startswith("#"):
            inside = bool(DIFFERS_SECTION.match(line))
        if inside:
            if line.startswith("- "):
                details.add(line)
            continue
        page.append(DETAIL.sub(" ", line))
    return page, details


def _allure(dirs: list[Path], tmp: Path, drop: set) -> set:
    out = stage_results(dirs, tmp)
    found = set()
    for p in out.glob("*-result.json"):
        r = json.loads(p.read_text())
        case, target, client = r["fullName"].split("::")
        if (case, target, client) not in drop:
            message = (r["statusDetails"].get("message") or "").split("\n")[0][:200]
            found.add((r["fullName"], r["status"], "" if r["status"] == "passed" else message))
    return found


def _junit(dirs: list[Path], path: Path, drop: set) -> set:
    root = ET.parse(write_junit(dirs, path)).getroot()
    skip = {(classname(t, c), case) for case, t, c in drop}
    out = set()
    for tc in root.iter("testcase"):
        if (tc.get("classname"), tc.get("name")) in skip:
            continue
        out.add((tc.get("classname"), tc.get("name"), tuple((k.tag, k.get("type")) for k in tc if k.tag != "system-out")))
    return out


def _analytics(whole: Path, shards: list[Path], tmp: Path, drop: set) -> tuple[bool, str]:
    from reports.analytics import analyze
    from reports.analytics.spark import spark_session

    spark = spark_session("local[2]")
    try:
        analyze([whole], tmp / "a-whole", spark=spark)
        analyze(shards, tmp / "a-shards", spark=spark)
    finally:
        spark.stop()

    def matrix(d: Path) -> set:
        with open(d / "matrix.csv") as fh:
            # a passing cell's divergence is a detail (module doc); a failing one's is not
            return {(r["case"], r["target"], r["client"], r["verdict"], r["history"], r["runs"],
                     r["divergence"] if r["verdict"] != "pass" else "")
                    for r in csv.DictReader(fh) if (r["case"], r["target"], r["client"]) not in drop}

    def per_run(d: Path) -> list:
        with open(d / "per_run.csv") as fh:
            return sorted((r["target"], r["rows"]) for r in csv.DictReader(fh))

    same_matrix = matrix(tmp / "a-whole") == matrix(tmp / "a-shards")
    same_runs = per_run(tmp / "a-whole") == per_run(tmp / "a-shards")
    return same_matrix and same_runs, (f"matrix.csv {'same' if same_matrix else 'DIFFERS'}, per_run.csv "
                                       f"(rows per target, one run) {'same' if same_runs else 'DIFFERS'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--whole", type=Path, required=True)
    ap.add_argument("--shard", type=Path, action="append", required=True)
    ap.add_argument("--analytics", action="store_true")
    args = ap.parse_args(argv)
    whole, shards = read_runs([args.whole]), read_runs(args.shard)
    ok = True
    cells = {(r["case"], r["target"], r["client"]): r["verdict"] for r in whole.rows}
    sharded = {(r["case"], r["target"], r["client"]): r["verdict"] for r in shards.rows}
    counted = f"{len(cells)} cells unsharded, {len(sharded)} in {len(args.shard)} shards"
    if set(cells) != set(sharded):
        print(f"cells: DIFFER ({counted}): only unsharded {sorted(set(cells) - set(sharded))[:5]}, only sharded "
              f"{sorted(set(sharded) - set(cells))[:5]}")
        return 1
    drop = {k for k in cells if cells[k] != sharded[k]}
    print(f"cells: {counted}; verdicts differ in {len(drop)}" + "".join(
        f"\n  {c} on {t} with {cl}: {cells[(c, t, cl)]} unsharded, {sharded[(c, t, cl)]} sharded"
        for c, t, cl in sorted(drop)))
    (meta,) = shards.runs
    print(f"shards: one run ({meta['run_id']}), {len(meta['shards'])} of {meta['shard_count']}, missing "
          f"{meta['missing_shards'] or 'none'}, split alike: {not meta['split_mismatch']}")
    ok &= not meta["missing_shards"] and not meta["split_mismatch"]
    drop_cases = {c for c, _, _ in drop}
    (page_whole, details_whole), (page_shards, details_shards) = _page([args.whole], drop), _page(args.shard, drop)
    same = page_whole == page_shards
    print(f"compatibility page: {'same' if same else 'DIFFERS'} (from 'Targets and clients' on"
          + (f", without the {len(drop)} cell(s) of {len(drop_cases)} case(s) whose verdicts differ" if drop else "")
          + ", divergence details apart)")
    apart = details_whole ^ details_shards
    print(f"divergence details of passing rows: {len(details_whole)} unsharded, {len(details_shards)} sharded, "
          f"{len(apart)} not alike in both" + "".join(f"\n  {ln[:150]}" for ln in sorted(apart)[:6]))
    ok &= same
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        a, b = _allure([args.whole], tmp / "aw", drop), _allure(args.shard, tmp / "as", drop)
        print(f"Allure results: {'same' if a == b else 'DIFFER'} ({len(a)} tests compared)"
              + ("" if a == b else f": {sorted(a ^ b)[:4]}"))
        j1, j2 = _junit([args.whole], tmp / "w.xml", drop), _junit(args.shard, tmp / "s.xml", drop)
        print(f"JUnit testcases: {'same' if j1 == j2 else 'DIFFER'} ({len(j1)} compared)"
              + ("" if j1 == j2 else f": {sorted(j1 ^ j2)[:4]}"))
        ok &= a == b and j1 == j2
        if args.analytics:
            same_a, text = _analytics(args.whole, args.shard, tmp, drop)
            print(f"analytics: {text}")
            ok &= same_a
    walls = [_wall(m) for m in meta["shards"]]
    spread = (max(walls) - min(walls)) / max(walls)
    est = meta["shards"][0]["shard"].get("estimated_s")
    print(f"shard wall times: {', '.join(f'{w:.0f} s' for w in walls)} (estimated {est}); spread "
          f"{100 * spread:.0f}% of the longest; unsharded {_wall(whole.runs[0]):.0f} s")
    ok &= spread < 0.30
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
