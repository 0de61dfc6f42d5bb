"""Python clients at older PyPI releases, installed by name on first use (python_build), on real
sockets to the embedded broker:

- kafka-python@2.2.15 (the first 2.2.x with transactions is older; 2.2.15 is pure Python, one
  download) runs txn/basic_commit through `kconform run` and the result records its exact
  release; its driver, first on PYTHONPATH, reports that release in hello, and an op the release
  lacks (KafkaAdminClient.list_partition_offsets, 3.0) answers UNSUPPORTED_BY_CLIENT naming it.
- confluent@1.9.2 has no cp311 wheel on PyPI and its sdist needs librdkafka's headers: the start
  fails with an error naming the release and why, and no install is left behind.

Cost: two pip installs (a few seconds each once cached, the sdist attempt ~20 s) and one broker.
Skipped when PyPI cannot be reached.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.clients import python_build
from conformance.clients.registry import CLIENTS

REPO = Path(__file__).resolve().parents[3]
RELEASE = "2.2.15"
CLIENT = f"kafka-python@{RELEASE}"


def _install_or_skip(client: str, release: str) -> None:
    try:
        python_build.ensure(python_build.LIBS[client], release)
    except python_build.PythonBuildError as exc:
        text = str(exc)
        if "Could not fetch" in text or "NewConnectionError" in text or "Temporary failure in name resolution" in text:
            pytest.skip(f"PyPI cannot be reached: {text.splitlines()[-1]}")
        raise


def test_an_old_kafka_python_release_runs_basic_commit_and_is_recorded_exactly(tmp_path):
    _install_or_skip("kafka-python", RELEASE)
    results = tmp_path / "results"
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--target", "embedded", "--client", CLIENT,
                           "--case", "txn/basic_commit", "--results", str(results), "-j", "1", "--no-progress"],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    rows = [json.loads(line) for line in (results / "results.jsonl").read_text().splitlines()]
    assert [(r["case"], r["client"], r["client_version"], r["verdict"]) for r in rows] == [
        ("txn/basic_commit", CLIENT, RELEASE, "pass")], proc.stderr[-3000:]


@pytest.mark.parametrize("broker", ["embedded"], indirect=True)
def test_the_driver_runs_the_release_first_on_its_path_and_degrades_per_op(broker, spawn, h):
    _install_or_skip("kafka-python", RELEASE)
    p = spawn(CLIENT)
    assert p.hello["client_version"] == RELEASE == CLIENTS[CLIENT].version()
    assert "list_offsets" not in p.hello.get("ops", ["list_offsets"])
    h.ok(p.call("create_admin", config={"bootstrap.servers": broker.bootstrap}))
    out = p.call("list_offsets", partitions=[{"topic": broker.topic(partitions=1), "partition": 0}], spec="latest")
    assert not out.ok and out.error.name == "UNSUPPORTED_BY_CLIENT", out
    assert f"kafka-python {RELEASE}" in out.error.message and "list_partition_offsets" in out.error.message


def test_a_release_without_a_wheel_or_a_buildable_sdist_fails_naming_the_release_and_why(tmp_path, monkeypatch):
    monkeypatch.setenv("KCONFORM_CACHE", str(tmp_path))
    lib = python_build.LIBS["confluent"]
    try:
        python_build.ensure(lib, "1.9.2")
    except python_build.PythonBuildError as exc:
        text = str(exc)
    else:
        pytest.skip("confluent-kafka 1.9.2's sdist builds here (librdkafka's headers are installed)")
    if "Could not fetch" in text or "NewConnectionError" in text:
        pytest.skip("PyPI cannot be reached")
    first = text.splitlines()[0]
    assert "confluent-kafka 1.9.2 cannot be installed for CPython 3." in first, text
    assert f"no cp{sys.version_info.major}{sys.version_info.minor} wheel" in first and "sdist does not build" in first
    assert "librdkafka/rdkafka.h" in first  # the cause, from pip's output
    assert not python_build.is_installed(lib, "1.9.2")
    with pytest.raises(python_build.PythonBuildError, match="confluent-kafka 1.9.2"):  # remembered: no second build
        CLIENTS["confluent@1.9.2"].command()
