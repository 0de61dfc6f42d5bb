"""The application rows run real Java programs against the real embedded broker."""
from __future__ import annotations

import shutil

import pytest

from conformance.targets import TARGETS


@pytest.fixture(autouse=True)
def _need_embedded_and_java():
    ok, why = TARGETS["embedded"].availability()
    if not ok:
        pytest.skip(why)
    if shutil.which("java") is None:
        pytest.skip("no java on PATH: the application cannot run")
