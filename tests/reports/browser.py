"""Headless Chromium for the report tests: the rendered DOM and a screenshot of a page.

Debian's ``chromium`` (reports/allure/ensure_chromium.sh installs it). Each
call uses its own profile directory and turns off everything that would
reach the network; ``--virtual-time-budget`` lets the report's JavaScript
finish before the DOM is dumped.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _args(profile: Path) -> list[str]:
    return [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
            f"--user-data-dir={profile}", "--virtual-time-budget=10000"]


def dump_dom(url: str, profile: Path, timeout: float = 120.0) -> str:
    proc = subprocess.run([*_args(profile), "--dump-dom", url], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"chromium --dump-dom failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc.stdout


def screenshot(url: str, png: Path, profile: Path, size: str = "1400,1000", timeout: float = 120.0) -> Path:
    proc = subprocess.run([*_args(profile), f"--window-size={size}", f"--screenshot={png}", url],
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or not png.is_file():
        raise RuntimeError(f"chromium --screenshot failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return png
