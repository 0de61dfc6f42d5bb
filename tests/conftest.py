"""Fixtures shared by every test: the embedded broker as a real subprocess.

Tests talk to it over real sockets with real clients; nothing is mocked.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(config, items) -> None:
    """A soak runs for minutes per target: the default run (make test, tox) skips it, so the suite
    stays as long as it was; ``KCONFORM_SOAK=1`` runs it (tox passes KCONFORM_* through)."""
    if os.environ.get("KCONFORM_SOAK") == "1":
        return
    skip = pytest.mark.skip(reason="a soak test: set KCONFORM_SOAK=1 to run it")
    for item in items:
        if item.get_closest_marker("soak"):
            item.add_marker(skip)


class BrokerProcess:
    """``python -m broker_impl`` started on an ephemeral loopback port."""

    def __init__(self, data_dir: Path, sets: dict[str, str] | None = None, port: int = 0,
                 log_path: Path | None = None):
        self.data_dir = data_dir
        self.sets = dict(sets or {})
        self.port = port
        self.log_path = log_path or data_dir.parent / f"{data_dir.name}.broker.log"
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> "BrokerProcess":
        args = [sys.executable, "-m", "broker_impl", "--listen", f"127.0.0.1:{self.port}",
                "--data-dir", str(self.data_dir)]
        for k, v in self.sets.items():
            args += ["--set", f"{k}={v}"]
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self._log, cwd=REPO,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + timeout
        line = b""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith(b"listening "):
                self.port = int(line.split(b":")[-1])
                return self
            if not line and self.proc.poll() is not None:
                break
        self.stop()
        raise RuntimeError(f"broker did not start: {line!r}; see {self.log_path}:\n"
                           + self.log_path.read_text(errors="replace")[-3000:])

    def kill(self) -> None:
        """kill -9: nothing is flushed beyond what the broker already wrote."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout: float = 20.0) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if getattr(self, "_log", None):
            self._log.close()

    def restart(self) -> "BrokerProcess":
        self.stop()
        return self.start()


@pytest.fixture
def broker_factory(tmp_path):
    started: list[BrokerProcess] = []

    def make(sets: dict[str, str] | None = None, name: str = "broker") -> BrokerProcess:
        b = BrokerProcess(tmp_path / name, {"group.initial.rebalance.delay.ms": "0", **(sets or {})})
        started.append(b)
        return b.start()

    yield make
    for b in started:
        b.stop()


@pytest.fixture
def broker(broker_factory) -> BrokerProcess:
    return broker_factory()
