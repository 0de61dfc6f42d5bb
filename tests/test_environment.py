"""In the suite's own environment, no test is skipped for a module the project forgot to install.

Why: `pytest.importorskip` lets a partial environment (a contributor's own venv) run the rest of
the suite, but in the environment `make test` and CI use (tox's py311, which sets
KCONFORM_TEST_ENV=tox) a missing module skips its tests without a word: the JUnit-schema tests
(tests/reports/test_junit.py) were skipped that way on every run until `xmlschema` joined the
test extra. So there, every module an importorskip under tests/ names must import; tests/analytics
is left out (its modules are the `analytics` extra, in tox's own `analytics` environment).
"""
from __future__ import annotations

import importlib
import os
import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SKIP_CALL = re.compile(r"""importorskip\(\s*["']([\w.]+)["']""")


def skipped_modules() -> dict[str, list[str]]:
    """Module -> the test files that skip without it (tests/analytics excluded)."""
    found: dict[str, list[str]] = {}
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS)
        if rel.parts[0] == "analytics" or path == Path(__file__).resolve():
            continue
        for module in SKIP_CALL.findall(path.read_text()):
            found.setdefault(module, []).append(str(rel))
    return found


def test_the_scan_finds_the_known_optional_modules():
    # The scan itself must see what the suite does skip on, or the check below checks nothing.
    assert {"xmlschema", "scapy", "trustme"} <= set(skipped_modules())


@pytest.mark.skipif(os.environ.get("KCONFORM_TEST_ENV") != "tox",
                    reason="only in the suite's own environment (tox sets KCONFORM_TEST_ENV=tox)")
def test_every_module_a_test_skips_without_is_installed():
    missing = []
    for module, files in skipped_modules().items():
        try:
            importlib.import_module(module)
        except ImportError as exc:
            missing.append(f"{module} ({exc}), needed by {', '.join(files)}")
    assert not missing, ("tests would be skipped silently; add these to pyproject.toml's test extra "
                         "(or the extra tox.ini installs): " + "; ".join(missing))
