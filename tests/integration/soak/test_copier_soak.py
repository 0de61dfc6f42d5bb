"""Soak: a transactional copier on a 3-node cluster (RF 3, min ISR 2) while a random broker is
SIGKILLed and restarted every few seconds and the copier itself is SIGKILLed now and then
(Kafka's transactions_test.py / TransactionsBounceTest, small).

An idempotent acks=all producer writes the input while the chaos runs; the copier
(``copier.py``, confluent-kafka) reads it read_committed and writes it to the output in
transactions with its offsets. At the end the output, read_committed, must be the input exactly:
per partition the same records in the same order -- no duplicate, nothing lost -- and every
input record the producer saw acknowledged must be in the input log.

The same soak runs on the embedded cluster and on a 3-node Apache Kafka (marker ``kafka``);
bounded by record count and time; the figures (records, kills, duplicates, losses, wall time)
are printed (``pytest -s``).
"""
from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from conformance.targets import Topology, make_target
from conformance.targets.topology import TopicSpec

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

PARTITIONS = 2
RECORDS = 3000
#: the input is written over this long; the chaos lasts at least as long, and until
CHAOS_S = 45.0
#: this many broker kills and copier kills happened (a JVM restarts slower), within
MIN_BROKER_KILLS = 6
MIN_COPIER_KILLS = 2
CHAOS_LIMIT_S = 300.0
CATCH_UP_S = 120.0
COPIER = Path(__file__).with_name("copier.py")


@dataclass
class Figures:
    target: str
    acknowledged: int = 0
    input_records: int = 0
    output_records: int = 0
    broker_kills: int = 0
    copier_kills: int = 0
    copier_restarts: int = 0
    duplicates: int = 0
    lost_acknowledged: int = 0
    lost_in_copy: int = 0
    extra_in_output: int = 0
    out_of_order_partitions: int = 0
    wall_s: float = 0.0
    errors: list = field(default_factory=list)

    def line(self) -> str:
        return (f"soak[{self.target}]: {self.acknowledged} acknowledged, {self.input_records} in, "
                f"{self.output_records} out; {self.broker_kills} broker kills, {self.copier_kills} copier kills "
                f"({self.copier_restarts} copier starts); duplicates {self.duplicates}, lost acknowledged "
                f"{self.lost_acknowledged}, lost in copy {self.lost_in_copy}, extra {self.extra_in_output}, "
                f"partitions out of order {self.out_of_order_partitions}; {self.wall_s:.0f} s")


def read_all(bootstrap: str, topic: str, isolation: str, quiet_s: float = 5.0, limit_s: float = 60.0):
    """Every record of ``topic`` per partition (values in offset order), read until nothing came
    for ``quiet_s``."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"soak-check-{time.time_ns()}", "log_level": 0,
                  "enable.auto.commit": False, "isolation.level": isolation, "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    out: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    last = time.monotonic()
    deadline = last + limit_s
    try:
        while time.monotonic() - last < quiet_s and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                if m.error() is None:
                    out[m.partition()].append(m.value().decode())
                    last = time.monotonic()
    finally:
        c.close()
    return out


class Soak:
    def __init__(self, target, bootstrap: str, workdir: Path, name: str):
        self.target = target
        self.bootstrap = bootstrap
        self.workdir = workdir
        self.fig = Figures(name)
        self.acked: set[str] = set()
        self.stop_chaos = threading.Event()
        self.stop_copier = threading.Event()
        self.copier: subprocess.Popen | None = None
        self.lock = threading.Lock()
        self.rng = random.Random(12)

    # ------------------------------------------------------------------ actors
    def produce_input(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                      "delivery.timeout.ms": 120000, "linger.ms": 5, "log_level": 0})

        def delivered(err, msg):
            if err is None:
                self.acked.add(msg.value().decode())

        pace = CHAOS_S * 0.8 / RECORDS
        for i in range(RECORDS):
            part = i % PARTITIONS
            p.produce("in", f"p{part}-{i:06d}".encode(), partition=part, on_delivery=delivered)
            p.poll(0)
            time.sleep(pace)
        p.flush(150)
        self.fig.acknowledged = len(self.acked)

    def start_copier(self) -> None:
        log = open(self.workdir / "copier.log", "ab")
        self.copier = subprocess.Popen(
            [sys.executable, str(COPIER), "--bootstrap", self.bootstrap, "--input", "in", "--output", "out",
             "--partitions", str(PARTITIONS), "--txn-id", "soak-copier"],
            stdout=log, stderr=subprocess.STDOUT)
        self.fig.copier_restarts += 1

    def keep_copier(self) -> None:
        """Restart the copier whenever it is gone (killed, or it exited on a fatal error)."""
        self.start_copier()
        while not self.stop_copier.is_set():
            with self.lock:
                if self.copier.poll() is not None:
                    self.start_copier()
            self.stop_copier.wait(0.5)

    def chaos_done(self, started: float) -> bool:
        enough = self.fig.broker_kills >= MIN_BROKER_KILLS and self.fig.copier_kills >= MIN_COPIER_KILLS
        return (self.stop_chaos.is_set() and enough) or time.monotonic() - started > CHAOS_LIMIT_S

    def chaos(self) -> None:
        nodes = self.target.node_ids()
        started = time.monotonic()
        next_copier_kill = started + self.rng.uniform(5, 9)
        while not self.chaos_done(started):
            time.sleep(self.rng.uniform(2.0, 4.0))
            node = self.rng.choice(nodes)
            self.target.kill(node)
            self.fig.broker_kills += 1
            if time.monotonic() >= next_copier_kill:
                with self.lock:
                    if self.copier.poll() is None:
                        self.copier.kill()
                        self.copier.wait()
                        self.fig.copier_kills += 1
                next_copier_kill = time.monotonic() + self.rng.uniform(5, 9)
            time.sleep(self.rng.uniform(0.5, 1.5))
            try:
                self.target.restart(node)
            except Exception as exc:  # noqa: BLE001 - recorded; the check below fails on it
                self.fig.errors.append(f"restart of node {node}: {exc}")
                return

    # ------------------------------------------------------------------ run and check
    def run(self) -> Figures:
        t0 = time.monotonic()
        producer = threading.Thread(target=self.produce_input, name="soak-input")
        copier = threading.Thread(target=self.keep_copier, name="soak-copier")
        chaos = threading.Thread(target=self.chaos, name="soak-chaos")
        for t in (producer, copier, chaos):
            t.start()
        producer.join()
        self.stop_chaos.set()     # once there were kills enough
        chaos.join()
        for n in self.target.node_ids():
            if n in self.target.down:
                self.target.restart(n)
        inputs = read_all(self.bootstrap, "in", "read_committed")
        expected = sum(len(v) for v in inputs.values())
        deadline = time.monotonic() + CATCH_UP_S
        while time.monotonic() < deadline:
            copied = read_all(self.bootstrap, "out", "read_committed", quiet_s=2.0)
            if sum(len(v) for v in copied.values()) >= expected:
                break
        self.stop_copier.set()
        copier.join()
        with self.lock:
            if self.copier.poll() is None:
                self.copier.kill()
                self.copier.wait()
        # a last instance fences the copier and aborts what it left open, so the LSO is final
        fence = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": "soak-copier", "log_level": 0})
        fence.init_transactions(60)
        outputs = read_all(self.bootstrap, "out", "read_committed")
        self.fig.wall_s = time.monotonic() - t0
        self.check(inputs, outputs)
        return self.fig

    def check(self, inputs: dict[int, list[str]], outputs: dict[int, list[str]]) -> None:
        f = self.fig
        in_all = [v for vs in inputs.values() for v in vs]
        out_all = [v for vs in outputs.values() for v in vs]
        f.input_records, f.output_records = len(in_all), len(out_all)
        f.duplicates = sum(n - 1 for n in Counter(out_all).values() if n > 1)
        f.lost_acknowledged = len(self.acked - set(in_all))
        f.lost_in_copy = len(set(in_all) - set(out_all))
        f.extra_in_output = len(set(out_all) - set(in_all))
        f.out_of_order_partitions = sum(1 for p in inputs if inputs[p] != outputs[p])


@pytest.mark.parametrize("target_name", ["embedded", pytest.param("apache-kafka", marks=pytest.mark.kafka)])
def test_transactional_copier_survives_broker_and_copier_kills(target_name, tmp_path):
    target = make_target(target_name)
    ok, why = target._available()
    if not ok:
        pytest.skip(f"{target_name} not available: {why}")
    topics = [TopicSpec(name, PARTITIONS, 3, {"min.insync.replicas": "2"}) for name in ("in", "out")]
    try:
        bootstrap = target.start(Topology(nodes=3, topics=topics), {}, tmp_path / "cluster")
        figures = Soak(target, bootstrap, tmp_path, target_name).run()
    finally:
        target.stop()
    print(figures.line())
    assert not figures.errors, figures.errors
    assert figures.broker_kills >= MIN_BROKER_KILLS and figures.copier_kills >= MIN_COPIER_KILLS, figures.line()
    assert figures.lost_acknowledged == 0, figures.line()
    assert figures.acknowledged <= figures.input_records, figures.line()
    assert (figures.duplicates, figures.lost_in_copy, figures.extra_in_output) == (0, 0, 0), figures.line()
    assert figures.out_of_order_partitions == 0, figures.line()
