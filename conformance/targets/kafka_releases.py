"""Apache Kafka's releases since transactions (0.11), as the apache-kafka target runs them.

Why a table: `apache-kafka@VERSION` takes any release on Maven Central, but a release is more
than a jar -- it decides how its metadata is kept (KRaft, or a ZooKeeper the target starts
beside it), which Scala build of the broker is published, and which Java runs it. Those facts
live here, one place for the target (`metadata_mode`, `scala_binary`) and for `kconform
targets` and the history page (`RELEASES`: the last patch release of every minor line, with
what was measured when it was started on this machine).

Metadata mode. KRaft ran transactions from 3.0 (KIP-730 gave it producer ids; 2.8's KRaft
"early access" lists transactions as missing) and was declared production-ready in 3.3 (KIP-833);
3.0-3.2 are KRaft "preview" releases, measured here to start and pass basic commit/abort in KRaft.
Every release before 3.0 therefore runs in ZooKeeper mode, with the ZooKeeper server jar its own
POM depends on (the same jar the release tarball ships and starts with
zookeeper-server-start.sh). A release name may end in `-zk` (`apache-kafka@3.5.2-zk`) to run a
3.x release in ZooKeeper mode instead (3.x supports both; 4.0 removed ZooKeeper).

Java. Debian 12 packages one JDK (openjdk-17); nothing older can be installed by package name
here, so every release runs on Java 17 (Kafka documents 17 from 3.1 on; older releases are
measured to start on it or recorded as not starting, with the reason).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

#: Suffix of a release name that asks for ZooKeeper mode on a release that has both.
ZK_SUFFIX = "-zk"
#: First release whose KRaft mode runs transactions (producer ids in KRaft, KIP-730).
KRAFT_TRANSACTIONS = (3, 0)
#: Last release that has ZooKeeper mode at all.
LAST_ZOOKEEPER = (3, 9)
#: First release published for Scala 2.13 (kafka_2.13); older ones are taken as kafka_2.12.
FIRST_SCALA_2_13 = (2, 4)


def release_of(version: str) -> str:
    """The Maven version of a release name (`3.5.2-zk` -> `3.5.2`)."""
    return version[: -len(ZK_SUFFIX)] if version.endswith(ZK_SUFFIX) else version


def version_tuple(version: str) -> tuple[int, ...]:
    """(3, 5, 2) for "3.5.2" (or "3.5.2-zk"); non-numeric parts end the tuple ("4.4.0-rc1" -> (4, 4, 0))."""
    out = []
    for part in release_of(version).split("."):
        m = re.match(r"\d+", part)
        if not m:
            break
        out.append(int(m.group(0)))
    return tuple(out)


def metadata_mode(version: str) -> str:
    """"kraft" or "zookeeper": how the target runs this release (module doc)."""
    v = version_tuple(version)
    if version.endswith(ZK_SUFFIX):
        if v[:2] > LAST_ZOOKEEPER:
            raise ValueError(f"Kafka {release_of(version)} has no ZooKeeper mode (removed in 4.0)")
        return "zookeeper"
    return "kraft" if v[:2] >= KRAFT_TRANSACTIONS else "zookeeper"


def scala_binary(version: str) -> str:
    """The Scala build of the broker artifact on Maven Central (kafka_<this>)."""
    return "2.13" if version_tuple(version)[:2] >= FIRST_SCALA_2_13 else "2.12"


@dataclass(frozen=True)
class Release:
    """The last patch release of a minor line, and what starting it here showed."""

    version: str
    #: "starts" (basic commit and abort pass) or "does not start"; `note` says what was measured.
    measured: str
    note: str = ""

    @property
    def mode(self) -> str:
        return metadata_mode(self.version)


#: Newest patch of every minor line since transactions, oldest first. `measured` is what
#: `kconform run --target apache-kafka@V --client confluent --case 'txn/basic_*'` gave on this
#: 2-core machine with Java 17 (docs/history.md keeps the runs): "starts" when basic commit and
#: abort pass, else why it does not.
SWEEP = "basic commit and abort pass (confluent, release sweep of 2026-11-26)"
_ZK_CLIENT_UNRESOLVED = ("does not start on Java 17: the broker's ZooKeeper 3.4.13 client builds an unresolved "
                         "server address (\"127.0.0.1/<unresolved>\", the InetSocketAddress.toString change of "
                         "Java 14) and times out CONNECTING; no JDK older than 17 is installable here")
RELEASES: tuple[Release, ...] = (
    Release("0.11.0.3", "starts", SWEEP + "; with the JAXB API added to its classpath (maven.JAXB_API)"),
    Release("1.0.2", "starts", SWEEP),
    Release("1.1.1", "starts", SWEEP + "; its ZooKeeper with zookeeper.jmx.log4j.disable"),
    Release("2.0.1", "does not start", _ZK_CLIENT_UNRESOLVED),
    Release("2.1.1", "does not start", _ZK_CLIENT_UNRESOLVED),
    Release("2.2.2", "does not start", _ZK_CLIENT_UNRESOLVED),
    Release("2.3.1", "does not start", _ZK_CLIENT_UNRESOLVED.replace("3.4.13", "3.4.14")),
    Release("2.4.1", "starts", SWEEP),
    Release("2.5.1", "starts", SWEEP),
    Release("2.6.3", "starts", SWEEP),
    Release("2.7.2", "starts", SWEEP),
    Release("2.8.2", "starts", SWEEP),
    Release("3.0.2", "starts", SWEEP + " (KRaft preview)"),
    Release("3.1.2", "starts", SWEEP + " (KRaft preview)"),
    Release("3.2.3", "starts", SWEEP + " (KRaft preview)"),
    Release("3.3.2", "starts", SWEEP),
    Release("3.4.1", "starts", SWEEP),
    Release("3.5.2", "starts", SWEEP),
    Release("3.6.2", "starts", SWEEP),
    Release("3.7.2", "starts", SWEEP),
    Release("3.8.1", "starts", SWEEP),
    Release("3.9.1", "starts", SWEEP),
    Release("4.0.2", "starts", SWEEP),
    Release("4.1.2", "starts", SWEEP),
    Release("4.2.0", "starts", SWEEP),
    Release("4.3.1", "starts", SWEEP + "; the default reference"),
    Release("4.4.0", "starts", SWEEP),
)
