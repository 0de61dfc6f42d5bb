"""The clients the runner can drive, keyed by the names cases and reports use.

Each entry knows how to start its driver, whether it can run on this machine (and why not), and which
library version it drives -- the version goes into every result so a verdict names what was tested.
Checking availability never starts a driver or a build.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import sys
from dataclasses import dataclass
from typing import Callable

from conformance.buildcache import Build
from conformance.clients import go_build, java_build, kafkajs_build, python_build


#: The consumer-group features a client may have (ClientSpec.features), each verified for the
#: client by tests/integration/clients/test_group_membership.py against the embedded broker:
#:
#: - ``range_assignor``: ``partition.assignment.strategy=org.apache.kafka.clients.consumer.RangeAssignor``
#:   makes the member offer JoinGroup protocol "range", and as the group's leader the client
#:   computes Java's range assignment -- so it can share an eager range group with any other
#:   client that has the feature (the mixed-group tests run each such client as leader and as
#:   follower).
#: - ``cooperative_rebalance``: ``...CooperativeStickyAssignor`` makes it offer "cooperative-sticky"
#:   and it rebalances incrementally (KIP-429): when a member joins, the others keep a subset of
#:   their partitions, keep their positions on them (nothing is revoked and read again) and keep
#:   polling their records during and after the rebalance. A client that offers the name but
#:   revokes everything on each rebalance (Sarama 1.60.2) does not have the feature.
#: - ``static_membership``: ``group.instance.id`` (KIP-345): a member killed and started again with
#:   the same id within session.timeout.ms gets its assignment back under a new member id, with
#:   no rebalance of the group.
#: - ``kip447``: consume-transform-produce in a group stays exactly-once across rebalances
#:   (KIP-447): send_offsets_to_transaction carries the consumer's group metadata (TxnOffsetCommit
#:   with the member's generation, which the group coordinator fences) and the consumer fetches
#:   its committed offsets with RequireStable under read_committed. Checked on the wire per client
#:   by cases/eos/group_metadata_fencing (Sarama sends the generation but not RequireStable).
#: - ``eos_rebalance``: a consume-transform-produce member on this client, driven as the workload's
#:   copiers drive it (poll, copy, send the offsets, commit), copies every record exactly once while
#:   other members join and leave -- measured with `kconform workload` (docs/workload.md) on
#:   Apache Kafka 4.3.1 and the embedded broker alike. Java has it (its group only rebalances inside
#:   poll(); its driver's poll drops what it gathered from partitions a rebalance inside it revoked,
#:   cases/eos/rebalance_inside_poll), franz-go through its driver (rebalances held to poll). Not librdkafka 2.16: after a
#:   background rebalance a poll still returns records of a partition it lost, and the offsets go
#:   out with the new generation, so the coordinator cannot fence them; not kafka-python 3.0.12: a
#:   partition assigned back to it resumes from the position it had before it was revoked, not from
#:   the committed offset. Both copy records twice (the `duplicate` anomaly) on every broker.
#: - ``read_committed``: its read_committed consumer filters aborted transactions as Kafka's
#:   aborted-transaction list says in every shape the case library has (cases/txn/
#:   overlapping_aborts_out_of_order, abort_marker_in_next_segment pass). KafkaJS 2.2.4 does not:
#:   its filterAbortedMessages assumes the list is sorted by first offset, while Kafka lists aborts
#:   in marker order, so overlapping transactions aborted newest-first leak aborted records.
#: - ``consumer_group_protocol``: ``group.protocol=consumer`` makes its consumer a KIP-848 member
#:   (ConsumerGroupHeartbeat, the broker assigns); `kconform run --group-protocol consumer` runs
#:   the library's consumers so (conformance/group_protocol.py). kafka-clients 4.4, librdkafka 2.16
#:   and franz-go 1.22 (its ServerSideBalancer, which the driver selects for the setting) have it;
#:   kafka-python, aiokafka, Sarama and KafkaJS have no KIP-848 consumer.
GROUP_FEATURES = frozenset({"range_assignor", "cooperative_rebalance", "static_membership", "kip447",
                            "eos_rebalance", "read_committed", "consumer_group_protocol"})


@dataclass(frozen=True)
class ClientSpec:
    name: str
    description: str
    _command: Callable[[], list[str]]
    _availability: Callable[[], tuple[bool, str]]
    _version: Callable[[], str | None]
    #: What the client really supports among GROUP_FEATURES (measured, see there); read without
    #: starting a driver, e.g. by a workload generator choosing which clients share a group.
    features: frozenset[str] = frozenset()
    #: Directories the driver's PYTHONPATH starts with (a Python client's library at a chosen
    #: release); called when the driver starts.
    pythonpath: Callable[[], list[str]] = lambda: []

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


#: The features each client has (GROUP_FEATURES), as measured.
_ALL_GROUP = frozenset({"range_assignor", "cooperative_rebalance", "static_membership", "kip447", "read_committed"})
_EOS_GROUP = _ALL_GROUP | {"eos_rebalance"}

class _Clients(dict):
    """CLIENTS: the fixed clients by name, and besides them every ``<client>@VERSION`` of the
    VERSIONED table (java@3.1.2, confluent@2.3.0, ...), made on first lookup.

    ``name in CLIENTS`` and ``CLIENTS[name]`` accept the versioned forms; iterating, ``len`` and
    availability() see the fixed clients only (a release is chosen by name, never run by default),
    and `kconform clients` adds a row per form (VERSIONED_FORMS)."""

    def __missing__(self, name: str) -> ClientSpec:
        spec = _versioned(name)
        if spec is None:
            raise KeyError(name)
        return spec

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or (isinstance(name, str) and _versioned(name) is not None)

    def get(self, name, default=None):
        try:
            return self[name]
        except KeyError:
            return default


@dataclass(frozen=True)
class VersionedForm:
    """A client at a release of its library, chosen by name: ``<prefix>@VERSION``."""

    #: What the form means, for listings and error messages.
    help: str
    #: (name, release) -> the ClientSpec of that release; ValueError when `release` is no release number.
    spec: Callable[[str, str], ClientSpec]
    #: The releases ready on this machine (built or installed), for listings.
    ready: Callable[[], list[str]]
    #: (usable, reason): whether releases can be made here at all (the build's or install's tools).
    available: Callable[[], tuple[bool, str]]


def _java_release(name: str, release: str) -> ClientSpec:
    release = java_build.release_of(name)
    build = java_build.build_for(release)
    return ClientSpec(
        name, f"Apache Kafka's Java client at kafka-clients {release} (org.apache.kafka:kafka-clients:{release})",
        lambda: java_build.java_command(release=release),
        _built_availability(build, lambda: f"kafka-clients {release}"),
        lambda: release)


def _go_release(name: str, release: str) -> ClientSpec:
    """``franz-go@VERSION`` / ``sarama@VERSION``: the Go driver built against that release
    (go_build.build_for); the version reported is the release, which the build checked go.mod selects."""
    client, release = go_build.release_of(name)
    module = go_build.MODULES[client]
    return ClientSpec(
        name, f"{client} {release} (Go, {module}@v{release})",
        lambda: go_build.command(client, release),
        _built_availability(go_build.build_for(client, release), lambda: f"{client} {release}"),
        lambda: release)


def _python_release(client: str) -> Callable[[str, str], ClientSpec]:
    lib = python_build.LIBS[client]

    def spec(name: str, release: str) -> ClientSpec:
        python_build.check_release(lib, release)
        return ClientSpec(
            name, f"{CLIENTS[client].description} at {lib.dist} {release} from PyPI",
            lambda: python_build.command(lib, release),
            lambda: python_build.availability(lib, release),
            lambda: python_build.client_version(lib, release),
            pythonpath=lambda: python_build.pythonpath(lib, release))
    return spec


#: The versioned forms, by the client-name prefix before "@". A release's spec claims no
#: GROUP_FEATURES: those are measured for the fixed clients only.
VERSIONED: dict[str, VersionedForm] = {
    "java": VersionedForm(
        "kafka-clients VERSION from Maven Central (e.g. java@3.1.2), the java driver built against it on first use",
        _java_release, java_build.built_releases, lambda: CLIENTS["java"].availability()),
    "franz-go": VersionedForm(
        "github.com/twmb/franz-go vVERSION from the Go module proxy (e.g. franz-go@1.21.5), "
        "the Go driver built against it on first use",
        _go_release, functools.partial(go_build.built_releases, "franz-go"), lambda: CLIENTS["franz-go"].availability()),
    "sarama": VersionedForm(
        "github.com/IBM/sarama vVERSION from the Go module proxy (1.60.0 on, e.g. sarama@1.60.0), "
        "the Go driver built against it on first use",
        _go_release, functools.partial(go_build.built_releases, "sarama"), lambda: CLIENTS["sarama"].availability()),
    **{client: VersionedForm(
        f"{lib.dist} VERSION from PyPI (e.g. {client}@{lib.example}), installed on first use and run by the "
        f"{client} driver", _python_release(client), functools.partial(python_build.installed_releases, lib),
        python_build.pip_available)
       for client, lib in python_build.LIBS.items()},
}

#: "java@VERSION" -> what it means, for listings and error messages.
VERSIONED_FORMS = {f"{prefix}@VERSION": form.help for prefix, form in VERSIONED.items()}


def versioned_spec(name: str) -> ClientSpec | None:
    """The ClientSpec of ``<client>@VERSION``; None for a name of no versioned form. ValueError
    (saying what is expected) for a known prefix followed by something that is no release."""
    prefix, at, release = name.partition("@")
    form = VERSIONED.get(prefix) if at else None
    return None if form is None else form.spec(name, release)


@functools.lru_cache(maxsize=None)
def _versioned(name: str) -> ClientSpec | None:
    try:
        return versioned_spec(name)
    except ValueError:
        return None


CLIENTS: dict[str, ClientSpec] = _Clients({
    "confluent": ClientSpec(
        "confluent", "confluent-kafka-python over librdkafka",
        lambda: [sys.executable, "-m", "conformance.clients.confluent"],
        _python_module_available("confluent_kafka", "confluent-kafka"), _librdkafka_version,
        features=_ALL_GROUP | {"consumer_group_protocol"}),
    "kafka-python": ClientSpec(
        "kafka-python", "kafka-python (pure Python)",
        lambda: [sys.executable, "-m", "conformance.clients.kafka_python"],
        _python_module_available("kafka", "kafka-python"), _dist_version("kafka-python"),
        features=_ALL_GROUP),
    "java": ClientSpec(
        "java", "Apache Kafka's Java client (org.apache.kafka:kafka-clients)",
        java_build.java_command,
        _built_availability(java_build.BUILD, lambda: f"kafka-clients {java_build.kafka_clients_version()}"),
        java_build.kafka_clients_version,
        features=_EOS_GROUP | {"consumer_group_protocol"}),
    "franz-go": ClientSpec(
        "franz-go", "franz-go (Go, github.com/twmb/franz-go)",
        lambda: go_build.command("franz-go"),
        _built_availability(go_build.BUILD, lambda: f"franz-go {go_build.module_version('franz-go')}"),
        lambda: go_build.module_version("franz-go"),
        features=_EOS_GROUP | {"consumer_group_protocol"}),
    "sarama": ClientSpec(
        "sarama", "Sarama (Go, github.com/IBM/sarama)",
        lambda: go_build.command("sarama"),
        _built_availability(go_build.BUILD, lambda: f"sarama {go_build.module_version('sarama')}"),
        lambda: go_build.module_version("sarama"),
        features=frozenset({"range_assignor", "static_membership", "read_committed"})),
    "aiokafka": ClientSpec(
        "aiokafka", "aiokafka (asyncio, its own protocol code)",
        lambda: [sys.executable, "-m", "conformance.clients.aiokafka_driver"],
        _python_module_available("aiokafka", "aiokafka"), _dist_version("aiokafka"),
        features=frozenset({"range_assignor", "static_membership", "read_committed"})),
    "kafkajs": ClientSpec(
        "kafkajs", "KafkaJS (pure JavaScript, Node)",
        kafkajs_build.command,
        _built_availability(kafkajs_build.BUILD, lambda: f"kafkajs {kafkajs_build.kafkajs_version()}"),
        kafkajs_build.kafkajs_version,
        features=frozenset({"range_assignor"})),
})


assert all(spec.features <= GROUP_FEATURES for spec in CLIENTS.values())


def availability() -> dict[str, tuple[bool, str]]:
    """Every client's (usable, reason)."""
    return {name: spec.availability() for name, spec in CLIENTS.items()}
