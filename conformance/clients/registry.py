"""The clients the runner can drive, keyed by the names cases and reports use.

Each entry knows how to start its driver, whether it can run on this machine (and why not), and which
library version it drives -- the version goes into every result so a verdict names what was tested.
Checking availability never starts a driver or a build.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from dataclasses import dataclass
from typing import Callable

from conformance.buildcache import Build
from conformance.clients import go_build, java_build, kafkajs_build


@dataclass(frozen=True)
class ClientSpec:
    name: str
    description: str
    _command: Callable[[], list[str]]
    _availability: Callable[[], tuple[bool, str]]
    _version: Callable[[], str | None]

    def command(self) -> list[str]:
        """argv of the driver (the Java entry builds the driver on first use)."""
        return self._command()

    def availability(self) -> tuple[bool, str]:
        """(usable, reason): reason says what is missing when not usable."""
        return self._availability()

    def version(self) -> str | None:
        """Version of the client library the driver runs (librdkafka's for confluent)."""
        return self._version()


def _python_module_available(module: str, dist: str) -> Callable[[], tuple[bool, str]]:
    def check() -> tuple[bool, str]:
        if importlib.util.find_spec(module) is None:
            return False, f"Python package {dist} is not installed in {sys.executable}"
        return True, f"{dist} {importlib.metadata.version(dist)}"
    return check


def _librdkafka_version() -> str | None:
    try:
        import confluent_kafka
    except ImportError:
        return None
    return confluent_kafka.libversion()[0]


def _dist_version(dist: str) -> Callable[[], str | None]:
    def version() -> str | None:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None
    return version


def _built_availability(build: Build, what: Callable[[], str]) -> Callable[[], tuple[bool, str]]:
    """A driver built from repository sources by buildcache: usable when its tools are on PATH."""
    def check() -> tuple[bool, str]:
        if build.is_built():
            return True, f"{what()} (built)"
        missing = build.tools_missing()
        if missing:
            return False, f"{', '.join(missing)} not on PATH"
        return True, f"{what()} (built on first use with {build.command[0]})"
    return check


CLIENTS: dict[str, ClientSpec] = {
    "confluent": ClientSpec(
        "confluent", "confluent-kafka-python over librdkafka",
        lambda: [sys.executable, "-m", "conformance.clients.confluent"],
        _python_module_available("confluent_kafka", "confluent-kafka"), _librdkafka_version),
    "kafka-python": ClientSpec(
        "kafka-python", "kafka-python (pure Python)",
        lambda: [sys.executable, "-m", "conformance.clients.kafka_python"],
        _python_module_available("kafka", "kafka-python"), _dist_version("kafka-python")),
    "java": ClientSpec(
        "java", "Apache Kafka's Java client (org.apache.kafka:kafka-clients)",
        java_build.java_command,
        _built_availability(java_build.BUILD, lambda: f"kafka-clients {java_build.kafka_clients_version()}"),
        java_build.kafka_clients_version),
    "franz-go": ClientSpec(
        "franz-go", "franz-go (Go, github.com/twmb/franz-go)",
        lambda: go_build.command("franz-go"),
        _built_availability(go_build.BUILD, lambda: f"franz-go {go_build.module_version('franz-go')}"),
        lambda: go_build.module_version("franz-go")),
    "sarama": ClientSpec(
        "sarama", "Sarama (Go, github.com/IBM/sarama)",
        lambda: go_build.command("sarama"),
        _built_availability(go_build.BUILD, lambda: f"sarama {go_build.module_version('sarama')}"),
        lambda: go_build.module_version("sarama")),
    "aiokafka": ClientSpec(
        "aiokafka", "aiokafka (asyncio, its own protocol code)",
        lambda: [sys.executable, "-m", "conformance.clients.aiokafka_driver"],
        _python_module_available("aiokafka", "aiokafka"), _dist_version("aiokafka")),
    "kafkajs": ClientSpec(
        "kafkajs", "KafkaJS (pure JavaScript, Node)",
        kafkajs_build.command,
        _built_availability(kafkajs_build.BUILD, lambda: f"kafkajs {kafkajs_build.kafkajs_version()}"),
        kafkajs_build.kafkajs_version),
}


def availability() -> dict[str, tuple[bool, str]]:
    """Every client's (usable, reason)."""
    return {name: spec.availability() for name, spec in CLIENTS.items()}
