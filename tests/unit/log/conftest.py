"""Fixtures of tests/unit/log."""

from __future__ import annotations

import pytest
from log_helpers import NOW

from broker_impl.log import PartitionLog


@pytest.fixture
def open_log(tmp_path):
    """Factory: open (or reopen) the PartitionLog in tmp_path/t-0 with a config dict."""
    opened = []

    def _open(config=None, **kw):
        log = PartitionLog(str(tmp_path / "t-0"), config or {}, now_ms=NOW, **kw)
        opened.append(log)
        return log

    yield _open
    for log in opened:
        if not log._closed:
            log.abandon()
