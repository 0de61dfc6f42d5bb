"""Fixtures for the client-driver tests: real brokers (conformance.targets) and real driver processes.

Targets come from ``conformance.targets`` (no launcher of our own): Tansu for quick iteration, the Apache
Kafka target when it can run here. Each target starts once per session. A (target, client) pair that
cannot work is skipped with the reason, never silently passed.
"""

from __future__ import annotations

import itertools
import os
import socket
import time
import uuid
from typing import Any, Callable, Iterator

import pytest

from conformance.clients import CLIENTS, ClientProcess, Outcome

CLIENT_NAMES = list(CLIENTS)

# (target, client) pairs known not to work, and why. Measured, not assumed: see the test module docstring.
KNOWN_INCOMPATIBLE = {
    ("tansu", "java"): (
        "Tansu 0.6.0 closes the connection on ApiVersions v5 that carries clusterId/nodeId, which "
        "kafka-clients 4.4 sends to every broker after bootstrap: initTransactions/poll never complete"
    ),
    ("tansu", "franz-go"): (
        "Tansu 0.6.0 closes the connection during franz-go 1.22's ApiVersions negotiation (measured: "
        "init_transactions fails with 'broker closed the connection immediately during api versions "
        "negotiation')"
    ),
    ("tansu", "aiokafka"): (
        "Tansu 0.6.0 answers aiokafka 0.14's InitProducerId with UNKNOWN_SERVER_ERROR (measured: "
        "init_transactions fails, code -1)"
    ),
    ("tansu", "kafkajs"): (
        "Tansu 0.6.0 answers KafkaJS 2.2's InitProducerId with UNKNOWN_SERVER_ERROR (measured: "
        "init_transactions fails, code -1)"
    ),
}

# Broker behaviour a target is known to get wrong, measured here with more than one client. A test
# that needs the behaviour checks what it can first, then skips with this reason.
KNOWN_BROKER_DEVIATIONS = {
    ("tansu", "read_committed"): (
        "Tansu 0.6.0 hands aborted records to read_committed consumers (measured with librdkafka and "
        "kafka-python)"
    ),
    ("tansu", "fencing"): (
        "Tansu 0.6.0 never answers the fenced producer's EndTxn (measured: librdkafka's commit_transaction "
        "times out, kafka-python's blocks), so fencing cannot be observed there"
    ),
}

TARGET_PARAMS = [
    pytest.param("embedded", id="embedded"),
    pytest.param("tansu", id="tansu"),
    pytest.param("apache-kafka", id="kafka", marks=[pytest.mark.slow, pytest.mark.kafka]),
]


class Broker:
    """A started target plus what the tests need from it."""

    def __init__(self, name: str, target: Any) -> None:
        self.name = name
        self.target = target
        self.bootstrap: str = target.bootstrap
        self._n = itertools.count()

    def topic(self, partitions: int = 2) -> str:
        """A fresh topic with every partition led, unique per call so tests never share records.
        Led means answering: Metadata may name a leader a moment before that broker serves the
        partition (Kafka's metadata cache is set before its replica manager becomes leader), and
        a client that retries briefly (Sarama: 3 times, 100 ms apart) met NOT_LEADER_OR_FOLLOWER
        there; so each leader must answer ListOffsets for its partition first (bounded: 30 s)."""
        from conformance.targets import TopicSpec, wire

        name = f"kc-{uuid.uuid4().hex[:10]}-{next(self._n)}"
        self.target.create_topics([TopicSpec(name, partitions, 1)])
        deadline = time.monotonic() + 30.0
        for p in range(partitions):
            while time.monotonic() < deadline:
                try:
                    leader = self.target.partition_replicas(name, p)[0]
                    answer = wire.list_offsets(self.target.addresses[leader], [(name, p)], False)
                    if answer[(name, p)][1] == 0:
                        break
                except (wire.WireError, KeyError):
                    pass
                time.sleep(0.05)
        return name

    def require(self, behaviour: str) -> None:
        """Skip the rest of the test if this target is known to get ``behaviour`` wrong."""
        why = KNOWN_BROKER_DEVIATIONS.get((self.name, behaviour))
        if why:
            pytest.skip(why)

    @property
    def capabilities(self) -> frozenset[str]:
        return self.target.capabilities


_started: dict[str, Broker] = {}


def _start_target(name: str, workdir: Any) -> Broker:
    from conformance.targets import Topology, make_target

    target = make_target(name)
    ok, reason = target.availability()
    if not ok:
        pytest.skip(f"target {name} unavailable: {reason}")
    try:
        target.start(Topology(nodes=1), {}, workdir)
    except BaseException:
        target.stop()  # an available target that does not start is a failure, not a skip
        raise
    return Broker(name, target)


@pytest.fixture(scope="session")
def _brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Broker]]:
    yield _started
    for broker in _started.values():
        broker.target.stop()


@pytest.fixture(params=TARGET_PARAMS)
def broker(request: pytest.FixtureRequest, _brokers: dict[str, Broker],
           tmp_path_factory: pytest.TempPathFactory) -> Broker:
    name = request.param
    if name not in _brokers:
        _brokers[name] = _start_target(name, tmp_path_factory.mktemp(f"target-{name}"))
    return _brokers[name]


@pytest.fixture(params=CLIENT_NAMES)
def client(request: pytest.FixtureRequest) -> str:
    name = request.param
    ok, reason = CLIENTS[name].availability()
    if not ok:
        pytest.skip(f"client {name} unavailable: {reason}")
    return name


@pytest.fixture
def compatible(broker: Broker, client: str) -> tuple[Broker, str]:
    """The (broker, client) pair, skipped when the pair is known not to work."""
    why = KNOWN_INCOMPATIBLE.get((broker.name, client))
    if why:
        pytest.skip(why)
    return broker, client


@pytest.fixture(scope="module")
def dead_bootstrap() -> str:
    """An address on which nothing listens (a port the kernel gave us, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"127.0.0.1:{port}"


@pytest.fixture
def spawn(tmp_path: Any) -> Iterator[Callable[..., ClientProcess]]:
    """Start a driver (``spawn("java", label="zombie")``); every driver is killed at teardown."""
    procs: list[ClientProcess] = []

    def start(client: str, label: str | None = None, **kwargs: Any) -> ClientProcess:
        label = label or f"{client}-{len(procs)}"
        proc = ClientProcess(client, label=label, stderr_path=os.path.join(tmp_path, f"{label}.stderr"), **kwargs)
        procs.append(proc)
        return proc.start()

    yield start
    for proc in procs:
        proc.kill()


def ok(outcome: Outcome) -> dict[str, Any]:
    """The outcome's data; fails the test with the full error when the op failed."""
    assert outcome.ok, f"{outcome.op} failed: {outcome.error.to_dict() if outcome.error else outcome}"
    return outcome.data


def read_until_end(consumer: ClientProcess, partitions: list[dict[str, Any]], end: dict[int, int],
                   attempts: int = 60) -> list[dict[str, Any]]:
    """Poll until the consumer's position reached ``end[partition]`` on every partition (bounded by
    ``attempts`` polls), so that "nothing more to read" is a fact about offsets, not about waiting."""
    records: list[dict[str, Any]] = []
    for _ in range(attempts):
        records += ok(consumer.call("poll", max_records=100, timeout_ms=500))["records"]
        positions = ok(consumer.call("position", partitions=partitions))["positions"]
        if all(p["offset"] is not None and p["offset"] >= end[p["partition"]] for p in positions):
            return records
    raise AssertionError(f"consumer did not reach {end} in {attempts} polls; read {records}")


def end_offsets(admin: ClientProcess, topic: str, partitions: int, isolation_level: str) -> dict[int, int]:
    rows = ok(admin.call("list_offsets", partitions=[{"topic": topic, "partition": p} for p in range(partitions)],
                         spec="latest", isolation_level=isolation_level))["offsets"]
    assert all("error" not in r for r in rows), rows
    return {r["partition"]: r["offset"] for r in rows}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}-{int(time.time() * 1000) % 100000}"


class Helpers:
    """The helpers above, handed to tests as the ``h`` fixture (test modules do not import conftest)."""

    ok = staticmethod(ok)
    read_until_end = staticmethod(read_until_end)
    end_offsets = staticmethod(end_offsets)
    unique = staticmethod(unique)


@pytest.fixture
def h() -> type[Helpers]:
    return Helpers
