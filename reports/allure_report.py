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
from .results import read_results

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


def stage_results(results_dir: str | Path, staging: str | Path, allure_results: str | Path | None = None) -> Path:
    """Allure results for a run in ``staging``: the plugin's when there are some, else made from rows.

    ``allure_results`` defaults to ``results_dir/allure-results``. Either
    way the staging directory gets categories, environment and the
    side-by-side page per case.
    """
    results_dir, staging = Path(results_dir), Path(staging)
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    rows = read_results(results_dir) if (results_dir / "results.jsonl").is_file() else []
    plugin = Path(allure_results) if allure_results else results_dir / "allure-results"
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
        rows_to_allure(rows, results_dir, staging)
    else:
        raise FileNotFoundError(f"{results_dir} has neither results.jsonl nor allure-results")
    return staging


def generate(staging: str | Path, out_dir: str | Path, timeout: float = 600.0) -> tuple[Path, Path]:
    """Run Allure over ``staging``: ``out_dir/html`` (to serve) and ``out_dir/kconform-report.html``.

    The previous report's ``history`` is carried into the new one, so
    Allure's trend charts and retries span runs.
    """
    staging, out_dir = Path(staging), Path(out_dir)
    served = out_dir / "html"
    single = out_dir / "kconform-report.html"
    if (served / "history").is_dir():
        shutil.copytree(served / "history", staging / "history", dirs_exist_ok=True)
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
