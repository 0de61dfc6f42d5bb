"""What the two Go drivers (franz-go, Sarama) share and what only they do, without a broker.

The Go drivers carry their own copy of Kafka's error table (franz-go's kerr, with code 6 renamed):
it must equal the one every other driver uses (broker_impl.codec.ERROR_TABLE, kafka-clients 4.4.0).
Their protocol loop is Go code of its own, so its deadline handling is checked here too, against a
bootstrap address where nothing listens.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from broker_impl.codec import ERROR_TABLE
from conformance.clients import CLIENTS, go_build

GO_CLIENTS = ["franz-go", "sarama"]


@pytest.fixture(scope="module")
def binary():
    ok, why = CLIENTS["franz-go"].availability()
    if not ok:
        pytest.skip(f"Go drivers unavailable: {why}")
    return go_build.binary()


def test_go_error_table_is_kafkas(binary):
    table = json.loads(subprocess.run([str(binary), "errors"], capture_output=True, check=True, text=True,
                                      timeout=30).stdout)
    assert {int(code): name for code, name in table.items()} == {e.code: e.name for e in ERROR_TABLE}


def test_go_versions_are_the_pinned_ones(binary):
    linked = json.loads(subprocess.run([str(binary), "versions"], capture_output=True, check=True, text=True,
                                       timeout=30).stdout)
    for client in GO_CLIENTS:
        assert linked[client] == f"v{CLIENTS[client].version()}", (client, linked)


@pytest.mark.parametrize("client", GO_CLIENTS)
def test_unknown_op_is_a_driver_error_and_stdin_eof_ends_the_driver(client, binary):
    """An op outside ops.yaml (handed over with --ops) is DRIVER_ERROR; an op of the definition the
    driver lacks would be UNSUPPORTED_BY_CLIENT. Closing stdin ends the process."""
    lines = '{"id": 1, "op": "no_such_op"}\n{"id": 2, "op": "hello"}\n'
    done = subprocess.run(go_build.command(client), input=lines, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    first, second = (json.loads(line) for line in done.stdout.splitlines())
    assert first["id"] == 1 and not first["ok"] and first["error"]["name"] == "DRIVER_ERROR", first
    assert second["ok"] and second["data"]["client"] == client and second["data"]["language"] == "go", second


def test_franz_go_send_is_answered_at_its_deadline(spawn, binary, dead_bootstrap):
    """franz-go buffers the record and keeps looking for the cluster (no delivery timeout by
    default): the driver answers DEADLINE_EXCEEDED at the op's deadline and stays usable."""
    proc = spawn("franz-go")
    assert proc.call("create_producer", config={"bootstrap.servers": dead_bootstrap}).ok
    t0 = time.monotonic()
    outcome = proc.call("send", topic="t", value="v", deadline_ms=1_500)
    elapsed = time.monotonic() - t0
    assert not outcome.ok and outcome.error.name == "DEADLINE_EXCEEDED", outcome.to_dict()
    assert 1.4 <= elapsed < 3.0, elapsed
    queued = proc.call("send", topic="t", value="w", wait=False)
    assert queued.ok and queued.data["queued"] is True
    flushed = proc.call("flush", deadline_ms=1_000)
    assert not flushed.ok and flushed.error.name == "DEADLINE_EXCEEDED", flushed.to_dict()
    assert flushed.error.extra["pending"] >= 1
    assert proc.call("hello").ok


def test_sarama_poll_without_a_cluster_keeps_to_its_window(spawn, binary, dead_bootstrap):
    """Sarama cannot start a partition consumer without the cluster: poll keeps trying within its
    window, then answers no records and the reason, as a Java poll answers no records."""
    proc = spawn("sarama")
    assert proc.call("create_consumer", config={"bootstrap.servers": dead_bootstrap, "group.id": "g"}).ok
    assert proc.call("assign", partitions=[{"topic": "t", "partition": 0}]).ok
    t0 = time.monotonic()
    outcome = proc.call("poll", timeout_ms=1_000, deadline_ms=5_000)
    assert 0.9 <= time.monotonic() - t0 < 3.0
    assert outcome.ok and outcome.data["records"] == [], outcome.to_dict()
    assert outcome.data["errors"][0]["error"]["name"] == "NETWORK_EXCEPTION", outcome.to_dict()
