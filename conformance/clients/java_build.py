"""Builds the Java driver (``conformance/clients/java``) outside the repository, once per source
version and kafka-clients release.

The build itself is conformance/buildcache's Maven build: the pom and ``src/`` are copied into
``$KCONFORM_CACHE/java-driver/<digest>/`` and packaged there, kafka-clients resolves from Maven
Central into ``~/.m2``, and parallel test processes wait for one build. This module knows only what
is Java-specific: the pinned kafka-clients version and the command that runs the driver.

Clients at other releases: the client name ``java@VERSION`` (``java@3.1.2``) is the same driver
source built against org.apache.kafka:kafka-clients:VERSION (``mvn -Dkafka.version=VERSION``, which
overrides the pom's pin) into ``$KCONFORM_CACHE/java-driver@VERSION/<digest>/``; ``java`` is the
pom's pin. The driver reaches the few APIs younger than the oldest release by name (Compat.java),
so an op an old release lacks answers UNSUPPORTED_BY_CLIENT instead of failing the build.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from conformance import buildcache
from conformance.clients import java_cds

JAVA_SRC = Path(__file__).resolve().parent / "java"
MAIN_CLASS = "kconform.driver.Driver"
BUILD = buildcache.maven("java-driver", JAVA_SRC)
#: The client-name prefix of a Java client at a chosen kafka-clients release.
VERSIONED_PREFIX = "java@"
#: A kafka-clients release as Maven Central names them: 2.8.2, 3.1.2, 4.0.0-rc1 (never a path or a range).
_RELEASE = re.compile(r"\d+\.\d+\.\d+(?:-[A-Za-z0-9]+)?")

JavaBuildError = buildcache.BuildError


def kafka_clients_version() -> str:
    """The kafka-clients version the pom pins (what the driver ``java`` links against)."""
    match = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", (JAVA_SRC / "pom.xml").read_text())
    if not match:
        raise JavaBuildError("pom.xml has no <kafka.version> property")
    return match.group(1)


def release_of(client: str) -> str | None:
    """The kafka-clients release a client name asks for: ``java@3.1.2`` -> ``3.1.2``; None for any
    name not of that form (``java`` itself included). Raises ValueError for ``java@`` followed by
    something that is no release number."""
    if not client.startswith(VERSIONED_PREFIX):
        return None
    release = client[len(VERSIONED_PREFIX):]
    if not _RELEASE.fullmatch(release):
        raise ValueError(f"{client!r}: expected java@MAJOR.MINOR.PATCH (a kafka-clients release, e.g. java@3.1.2)")
    return release


def build_for(release: str | None = None) -> buildcache.Build:
    """The build of the driver against kafka-clients `release` (None: the pom's pin, BUILD)."""
    if release is None:
        return BUILD
    if not _RELEASE.fullmatch(release):
        raise ValueError(f"{release!r} is not a kafka-clients release number")
    return buildcache.maven(f"java-driver@{release}", JAVA_SRC, properties={"kafka.version": release})


def built_releases() -> list[str]:
    """The releases a ``java@VERSION`` driver is already built for in the cache (for listings)."""
    found = set()
    for kind_dir in buildcache.cache_root().glob("java-driver@*"):
        release = kind_dir.name.split("@", 1)[1]
        if _RELEASE.fullmatch(release) and build_for(release).is_built():
            found.add(release)
    return sorted(found, key=lambda r: [int(x) if x.isdigit() else x for x in re.split(r"[.-]", r)])


def tools_missing() -> list[str]:
    return BUILD.tools_missing()


def is_built(release: str | None = None) -> bool:
    return build_for(release).is_built()


def ensure_built(release: str | None = None) -> Path:
    """Build if needed and return the build directory. Raises JavaBuildError with Maven's output
    (a release Maven Central does not serve fails here, with Maven's resolution error)."""
    return build_for(release).ensure()


def build_seconds(release: str | None = None) -> float | None:
    """How long the cached build took (from its stamp), for reports."""
    return build_for(release).build_seconds()


def classpath(release: str | None = None) -> str:
    target = ensure_built(release)
    return os.pathsep.join([str(target / "target" / "classes"), str(target / "target" / "lib" / "*")])


def java_command(heap: str = "256m", release: str | None = None) -> list[str]:
    """The command that runs the driver (against kafka-clients `release`); builds first if needed.
    With the build's class-data archive (java_cds: made on first use) the driver runs from its
    jars and maps its classes from the archive."""
    base = [
        "java", f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.logFile=System.err",
    ]
    cds = java_cds.archive_for(ensure_built(release), base, MAIN_CLASS)
    if cds is None:
        return [*base, "-cp", classpath(release), MAIN_CLASS]
    archive, class_path = cds
    return [base[0], f"-XX:SharedArchiveFile={archive}", "-Xshare:auto", *java_cds.LOGGING, *base[1:],
            "-cp", class_path, MAIN_CLASS]
