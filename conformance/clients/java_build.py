"""Builds the Java driver (``conformance/clients/java``) outside the repository, once per source version.

The build itself is conformance/buildcache's Maven build: the pom and ``src/`` are copied into
``$KCONFORM_CACHE/java-driver/<digest>/`` and packaged there, kafka-clients resolves from Maven
Central into ``~/.m2``, and parallel test processes wait for one build. This module knows only what
is Java-specific: the pinned kafka-clients version and the command that runs the driver.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from conformance import buildcache

JAVA_SRC = Path(__file__).resolve().parent / "java"
MAIN_CLASS = "kconform.driver.Driver"
BUILD = buildcache.maven("java-driver", JAVA_SRC)

JavaBuildError = buildcache.BuildError


def kafka_clients_version() -> str:
    """The kafka-clients version the pom pins (what the driver links against)."""
    match = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", (JAVA_SRC / "pom.xml").read_text())
    if not match:
        raise JavaBuildError("pom.xml has no <kafka.version> property")
    return match.group(1)


def tools_missing() -> list[str]:
    return BUILD.tools_missing()


def is_built() -> bool:
    return BUILD.is_built()


def ensure_built() -> Path:
    """Build if needed and return the build directory. Raises JavaBuildError with Maven's output."""
    return BUILD.ensure()


def build_seconds() -> float | None:
    """How long the cached build took (from its stamp), for reports."""
    return BUILD.build_seconds()


def classpath() -> str:
    target = ensure_built()
    return os.pathsep.join([str(target / "target" / "classes"), str(target / "target" / "lib" / "*")])


def java_command(heap: str = "256m") -> list[str]:
    """The command that runs the driver; builds first if needed."""
    return [
        "java", f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.logFile=System.err",
        "-cp", classpath(), MAIN_CLASS,
    ]
