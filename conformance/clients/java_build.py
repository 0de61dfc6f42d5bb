"""Builds the Java driver (``conformance/clients/java``) outside the repository, once per source version.

Why outside: build output must never land in the repo (no ``target/``). The pom and ``src/`` are copied
into ``$KCONFORM_CACHE/java-driver/<digest>/`` (default ``~/.cache/kconform``), where ``digest`` hashes
the pom and every source file, so an edited driver is rebuilt and an unchanged one is reused. Maven
resolves kafka-clients from Maven Central into ``~/.m2``. A file lock makes parallel test processes wait
for one build instead of racing.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

JAVA_SRC = Path(__file__).resolve().parent / "java"
MAIN_CLASS = "kconform.driver.Driver"
STAMP = "kconform-build-ok"
BUILD_TIMEOUT_S = 900


class JavaBuildError(RuntimeError):
    pass


def cache_root() -> Path:
    return Path(os.environ.get("KCONFORM_CACHE", Path.home() / ".cache" / "kconform"))


def _sources() -> list[Path]:
    files = [JAVA_SRC / "pom.xml"]
    files += sorted(p for p in (JAVA_SRC / "src").rglob("*") if p.is_file())
    return files


def source_digest() -> str:
    h = hashlib.sha256()
    for path in _sources():
        h.update(str(path.relative_to(JAVA_SRC)).encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:16]


def build_dir() -> Path:
    return cache_root() / "java-driver" / source_digest()


def kafka_clients_version() -> str:
    """The kafka-clients version the pom pins (what the driver links against)."""
    match = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", (JAVA_SRC / "pom.xml").read_text())
    if not match:
        raise JavaBuildError("pom.xml has no <kafka.version> property")
    return match.group(1)


def tools_missing() -> list[str]:
    return [tool for tool in ("java", "mvn") if shutil.which(tool) is None]


def is_built() -> bool:
    return (build_dir() / STAMP).exists()


def ensure_built() -> Path:
    """Build if needed and return the build directory. Raises JavaBuildError with Maven's output."""
    target = build_dir()
    if (target / STAMP).exists():
        return target
    missing = tools_missing()
    if missing:
        raise JavaBuildError(f"cannot build the Java driver: {', '.join(missing)} not on PATH")
    target.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / STAMP).exists():  # another process built it while we waited
            return target
        for path in _sources():
            dest = target / path.relative_to(JAVA_SRC)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest)
        t0 = time.monotonic()
        try:
            proc = subprocess.run(["mvn", "-q", "-B", "package"], cwd=target, capture_output=True,
                                  text=True, timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise JavaBuildError(f"mvn package took over {BUILD_TIMEOUT_S} s in {target}") from exc
        if proc.returncode != 0:
            raise JavaBuildError(f"mvn package failed in {target}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
        seconds = time.monotonic() - t0
        (target / STAMP).write_text(f"built in {seconds:.1f} s\n")
    return target


def build_seconds() -> float | None:
    """How long the cached build took (from its stamp), for reports."""
    stamp = build_dir() / STAMP
    if not stamp.exists():
        return None
    match = re.search(r"built in ([0-9.]+) s", stamp.read_text())
    return float(match.group(1)) if match else None


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
