"""Allure HTML for a run: a served report directory and a single file that opens from file://.

The Allure command line comes from npm (``allure-commandline``, which
bundles Allure's Java CLI), pinned by ``reports/allure/package.json`` and
``package-lock.json``. On first use those two files are copied to
``~/.cache/kconform/allure/`` and installed there with ``npm ci``, so
``node_modules`` never lands in the repository and every machine gets the
same version. The CLI runs on Java 17 with a small heap.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .allure_results import rows_to_allure, side_by_side_attachments, write_categories, write_environment
from .results import read_runs

PINNED = Path(__file__).resolve().parent / "allure"
ALLURE_HEAP = "-Xmx512m"


def cache_dir() -> Path:
    base = os.environ.get("KCONFORM_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "kconform")
    return Path(base) / "allure"


def pinned_version() -> str:
    return json.loads((PINNED / "package.json").read_text())["dependencies"]["allure-commandline"]


def ensure_allure(timeout: float = 600.0) -> Path:
    """The ``allure`` executable of the pinned version, installed into the cache if needed."""
    home = cache_dir()
    home.mkdir(parents=True, exist_ok=True)
    exe = home / "node_modules" / ".bin" / "allure"
    installed = home / "node_modules" / "allure-commandline" / "package.json"
    with open(home / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)          # two reports started at once install once
        same = all((home / n).is_file() and (home / n).read_bytes() == (PINNED / n).read_bytes()
                   for n in ("package.json", "package-lock.json"))
        if same and exe.exists() and installed.is_file() and \
                json.loads(installed.read_text()).get("version") == pinned_version():
            return exe
        if shutil.which("npm") is None:
            raise RuntimeError("the Allure report needs npm (Node.js) to install allure-commandline")
        for n in ("package.json", "package-lock.json"):
            shutil.copyfile(PINNED / n, home / n)
        # Run in the cache directory rather than with --prefix: --prefix also moves npm's
        # global config to <prefix>/etc/npmrc, losing the machine's (its registry, proxy, cafile).
        proc = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=home,
                              capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0 or not exe.exists():
            raise RuntimeError(f"npm ci of allure-commandline failed ({proc.returncode}):\n"
                               f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return exe


def _run_allure(args: list[str], timeout: float) -> None:
    exe = ensure_allure()
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise RuntimeError("the Allure CLI needs Java (17 works); none found on PATH or in JAVA_HOME")
    env = {**os.environ}
    env.setdefault("JAVA_OPTS", ALLURE_HEAP)
    proc = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"allure {' '.join(args)} failed ({proc.returncode}):\n"
                           f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def stage_results(results_dir: str | Path | list, staging: str | Path, allure_results: str | Path | None = None) -> Path:
    """Allure results for a run in ``staging``: the plugin's when there are some, else made from rows.

    ``results_dir`` may be several directories (the shards of one run, or runs to show as one
    report: a cell in two of them is a retry). ``allure_results`` defaults to
    ``results_dir/allure-results`` (of the first). Either way the staging directory gets
    categories, environment and the side-by-side page per case.
    """
    dirs = [Path(d) for d in (results_dir if isinstance(results_dir, (list, tuple)) else [results_dir])]
    staging = Path(staging)
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    with_rows = [d for d in dirs if (d / "results.jsonl").is_file()]
    runs = read_runs(with_rows)
    rows = runs.rows
    plugin = Path(allure_results) if allure_results else dirs[0] / "allure-results"
    if plugin.is_dir() and any(plugin.glob("*-result.json")):
        for f in plugin.iterdir():
            if f.is_file():
                shutil.copyfile(f, staging / f.name)
        if rows:
            side_by_side_attachments(rows, staging)
        if not (staging / "categories.json").exists():
            write_categories(staging, rows)
        if rows and not (staging / "environment.properties").exists():
            write_environment(rows, staging)
    elif rows:
        rows_to_allure(rows, runs.dirs, staging, runs.runs)
    else:
        raise FileNotFoundError(f"{', '.join(map(str, dirs))}: neither results.jsonl nor allure-results")
    return staging


def history_source(previous: str | Path) -> Path | None:
    """The history directory of a previous report: PREV/html/history (a `kconform report --out`
    directory), PREV/history (a served report) or PREV itself (a history directory)."""
    previous = Path(previous)
    for candidate in (previous / "html" / "history", previous / "history", previous):
        if (candidate / "history.json").is_file() or (candidate / "history-trend.json").is_file():
            return candidate
    return None


def _last_build_order(history: Path | None) -> int:
    try:
        trend = json.loads((history / "history-trend.json").read_text())
    except (OSError, ValueError, TypeError):
        return 0
    return max((int(item.get("buildOrder") or 0) for item in trend if isinstance(item, dict)), default=0)


def executor(history: Path | None, build_name: str | None = None, report_url: str | None = None) -> dict:
    """executor.json: who made the report (the Executors panel, the Trend's build labels). In
    GitHub Actions the workflow run (its number orders the builds, its page is the build URL);
    elsewhere kconform, numbering its builds on from the previous report's history."""
    env = os.environ
    if env.get("GITHUB_RUN_ID"):
        server = env.get("GITHUB_SERVER_URL", "https://github.com")
        url = f"{server}/{env.get('GITHUB_REPOSITORY', '')}/actions/runs/{env['GITHUB_RUN_ID']}"
        out = {"name": "GitHub Actions", "type": "github",
               "buildName": build_name or f"{env.get('GITHUB_WORKFLOW', 'kconform')} #{env.get('GITHUB_RUN_NUMBER', '')}",
               "buildOrder": int(env.get("GITHUB_RUN_NUMBER") or _last_build_order(history) + 1), "buildUrl": url}
    else:
        order = _last_build_order(history) + 1
        out = {"name": "kconform", "type": "kconform", "buildName": build_name or f"kconform run #{order}",
               "buildOrder": order}
    if report_url:
        out["reportUrl"] = report_url
    out["reportName"] = "kconform conformance"
    return out


def generate(staging: str | Path, out_dir: str | Path, timeout: float = 600.0, previous: str | Path | None = None,
             build_name: str | None = None, report_url: str | None = None) -> tuple[Path, Path]:
    """Run Allure over ``staging``: ``out_dir/html`` (to serve) and ``out_dir/kconform-report.html``.

    The previous report's ``history`` is carried into the new one -- ``previous`` (a report
    directory, e.g. the last CI run's downloaded artifact) or, without it, ``out_dir``'s own
    report -- so Allure's Trend, History and Retries span runs; ``executor.json`` names the build
    (executor). The served report's ``history/`` is what the next run carries on: keep it.
    """
    staging, out_dir = Path(staging), Path(out_dir)
    served = out_dir / "html"
    single = out_dir / "kconform-report.html"
    history = history_source(previous) if previous else history_source(out_dir)
    if previous and history is None:
        raise FileNotFoundError(f"{previous}: no Allure history there (html/history or history/ with history.json)")
    if history is not None:
        with tempfile.TemporaryDirectory() as keep:   # --clean below may remove the very source
            shutil.copytree(history, Path(keep) / "history")
            shutil.copytree(Path(keep) / "history", staging / "history", dirs_exist_ok=True)
    (staging / "executor.json").write_text(json.dumps(executor(staging / "history" if history else None,
                                                               build_name, report_url)), encoding="utf-8")
    _run_allure(["generate", "--clean", str(staging), "-o", str(served)], timeout)
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        _run_allure(["generate", "--clean", "--single-file", str(staging), "-o", tmp], timeout)
        shutil.move(os.path.join(tmp, "index.html"), single)
    return served, single


def analytics_result(analytics_dir: str | Path, staging: str | Path) -> dict | None:
    """The analytics charts and summary as one Allure entry, so the report links them.

    It is an entry of its own (parentSuite "kconform analytics", status
    ``unknown``) rather than a test: it judges nothing, it shows the
    conformance matrix, divergences, flaky cases and durations over all runs.
    """
    import uuid as uuidlib

    analytics_dir, staging = Path(analytics_dir), Path(staging)
    pngs = sorted(analytics_dir.glob("*.png"))
    summary = analytics_dir / "summary.txt"
    if not pngs and not summary.is_file():
        return None
    attachments = []
    for p in ([summary] if summary.is_file() else []) + pngs:
        source = f"{uuidlib.uuid4()}-attachment{p.suffix}"
        shutil.copyfile(p, staging / source)
        attachments.append({"name": p.stem.replace("_", " "), "source": source,
                            "type": "image/png" if p.suffix == ".png" else "text/plain"})
    import html

    text = html.escape(summary.read_text(encoding="utf-8")) if summary.is_file() else ""
    return {"uuid": str(uuidlib.uuid4()), "historyId": "kconform-analytics", "name": "Analytics over all runs",
            "fullName": "kconform::analytics", "status": "unknown", "stage": "finished",
            "descriptionHtml": f"<pre>{text}</pre>",
            "statusDetails": {}, "steps": [], "attachments": attachments, "parameters": [],
            "labels": [{"name": "parentSuite", "value": "kconform analytics"},
                       {"name": "suite", "value": "analytics"}]}
