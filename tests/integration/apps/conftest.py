"""The application rows run real Java programs against the real embedded broker: `run_cell`
plays one cell (a case's YAML text) as the runner does and returns its row, and the slot, so
that a test can see whether the instance was kept."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from conformance.dsl import parse_case
from conformance.results import Row, Verdict
from conformance.runner import RowContext, TargetSlot, run_one
from conformance.targets import TARGETS


@pytest.fixture(autouse=True)
def _need_embedded_and_java():
    ok, why = TARGETS["embedded"].availability()
    if not ok:
        pytest.skip(why)
    if shutil.which("java") is None:
        pytest.skip("no java on PATH: the application cannot run")


@pytest.fixture
def run_cell(tmp_path: Path):
    def run(text: str, case_id: str, fresh: bool = True) -> tuple[Row, TargetSlot]:
        case = parse_case(yaml.safe_load(text), "cell.yaml", case_id)
        slot = TargetSlot("embedded", {}, tmp_path / "work", "auto")
        try:
            row = run_one(case, slot, "java", RowContext("test-run", tmp_path / "results"), fresh=fresh)
            kept = slot.target is not None
        finally:
            slot.release()
        assert row.verdict is Verdict.PASS, (row.reason, [c for c in row.checks if not c.passed])
        return row, kept
    return run
