"""A class-data archive (JDK application class-data sharing) for the Java driver.

Why: a conformance row starts two or more Java driver JVMs (its actors, then the observer), and
each spent about 1.2 s of CPU loading and verifying the same ~4,000 classes of kafka-clients,
Jackson and the driver; with the classes mapped from an archive it spends about 0.75 s
(docs/measurements.md). On a 2-core machine running four rows at once that CPU is the run's
bottleneck, not the wall time of one start.

How: once per driver build (beside it in the cache), a training session -- a transactional
producer, a read_committed group consumer and an admin client of the driver, against the
project's own broker started for it on loopback -- lists the classes it loaded
(``-XX:DumpLoadedClassList``; the driver ends with ``halt``, so a dump at exit would never be
written), and ``java -Xshare:dump`` makes the archive of them. JDK 17 maps an archive only for
the class path it was made with, and only jar files: the driver then runs from its packaged jar
and its dependency jars, listed in a fixed order. The JVM loads any class outside the archive as
usual, and with ``-Xshare:auto`` an archive it cannot use is ignored; nothing the driver does
depends on it. When the training or the dump fails, the reason is kept in the cache and the
driver runs as before (from its class directory), so a run never fails for want of an archive.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from conformance import buildcache
from conformance.clients.protocol import decode_reply, encode_request

#: The checkout: the training broker is its broker_impl.
REPO_ROOT = Path(__file__).resolve().parents[2]

#: Where the archive of a build lives, and what says why there is none.
DIRECTORY = "class-data"
ARCHIVE = "driver.jsa"
CLASS_PATH = "classpath.txt"
UNAVAILABLE = "unavailable.txt"
TRAINING_TIMEOUT_S = 120.0
#: JVM output goes to stderr: the driver's stdout is its reply channel, and a CDS warning written
#: there (the JVM's default for warnings) would break the protocol.
LOGGING = ["-Xlog:disable", "-Xlog:all=warning:stderr"]


def jar_class_path(build: Path) -> list[str]:
    """The driver's packaged jar, then its dependencies, in a fixed order (the archive's class
    path must be the same at every start)."""
    target = build / "target"
    own = sorted(target.glob("kconform-java-driver-*.jar"))
    return [str(p) for p in own] + sorted(str(p) for p in (target / "lib").glob("*.jar"))


def archive_for(build: Path, base_command: list[str], main_class: str) -> tuple[Path, str] | None:
    """(archive, the class path it was made with) for the driver build in ``build``, made on the
    first call; None when it cannot be made here (the reason is in the cache)."""
    directory = buildcache.once(build / DIRECTORY, lambda d: _make(d, build, base_command, main_class))
    archive = directory / ARCHIVE
    if not archive.exists():
        return None
    return archive, (directory / CLASS_PATH).read_text().strip()


def _make(directory: Path, build: Path, base_command: list[str], main_class: str) -> None:
    try:
        class_path = os.pathsep.join(jar_class_path(build))
        if not class_path.split(os.pathsep)[0].endswith(".jar") or "kconform-java-driver" not in class_path:
            raise RuntimeError(f"no packaged driver jar under {build / 'target'}")
        class_list = directory / "classes.lst"
        _train(base_command, class_path, main_class, class_list)
        dump = subprocess.run(["java", "-Xshare:dump", f"-XX:SharedClassListFile={class_list}",
                               f"-XX:SharedArchiveFile={directory / ARCHIVE}", "-cp", class_path, *LOGGING],
                              capture_output=True, text=True, timeout=TRAINING_TIMEOUT_S)
        if dump.returncode != 0 or not (directory / ARCHIVE).exists():
            raise RuntimeError(f"java -Xshare:dump exited {dump.returncode}: {dump.stderr[-2000:]}")
        (directory / CLASS_PATH).write_text(class_path + "\n")
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        (directory / ARCHIVE).unlink(missing_ok=True)
        (directory / UNAVAILABLE).write_text(f"no class-data archive for the Java driver: {exc}\n")


def _train(base_command: list[str], class_path: str, main_class: str, class_list: Path) -> None:
    """One driver session against a broker of our own, its loaded classes listed in class_list.
    The driver is spoken to over its protocol directly (not through ClientProcess, whose module
    needs the registry, which needs this one)."""
    java, options = base_command[0], base_command[1:]
    command = [java, f"-XX:DumpLoadedClassList={class_list}", *LOGGING, *options, "-cp", class_path, main_class]
    with tempfile.TemporaryDirectory(prefix="kconform-cds-") as data:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)}
        broker = subprocess.Popen(
            [sys.executable, "-m", "broker_impl", "--listen", "127.0.0.1:0", "--data-dir", data, "--node-id", "1",
             *[arg for key, value in TRAINING_BROKER.items() for arg in ("--set", f"{key}={value}")]],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        try:
            line = broker.stdout.readline()
            if not line.startswith("listening "):
                raise RuntimeError(f"the training broker did not start: {line!r}")
            driver = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL)
            watchdog = threading.Timer(TRAINING_TIMEOUT_S, driver.kill)   # a hung JVM ends the training
            watchdog.start()
            try:
                _session(driver, line.split()[-1])
            finally:
                watchdog.cancel()
                driver.stdin.close()
                try:
                    driver.wait(20)
                except subprocess.TimeoutExpired:
                    driver.kill()
                    driver.wait(10)
        finally:
            broker.terminate()
            try:
                broker.wait(20)
            except subprocess.TimeoutExpired:
                broker.kill()
                broker.wait(10)
    if not class_list.exists() or class_list.stat().st_size == 0:
        raise RuntimeError("the training session listed no classes")


TRAINING_BROKER = {"offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "1",
                   "transaction.state.log.num.partitions": "1", "transaction.state.log.replication.factor": "1",
                   "transaction.state.log.min.isr": "1", "group.initial.rebalance.delay.ms": "0"}


def _session(driver: subprocess.Popen, bootstrap: str) -> None:
    """What rows do most: a transaction, a read_committed group read and commit, an admin call."""
    steps = [
        ("hello", {}),
        ("create_producer", {"config": {"bootstrap.servers": bootstrap, "transactional.id": "cds-training"}}),
        ("init_transactions", {}), ("begin_transaction", {}),
        ("send", {"topic": "cds-training", "value": "v"}), ("commit_transaction", {}),
        ("create_consumer", {"config": {"bootstrap.servers": bootstrap, "group.id": "cds-training",
                                        "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                                        "enable.auto.commit": "false"}}),
        ("subscribe", {"topics": ["cds-training"]}), ("poll", {"timeout_ms": 5000}), ("commit", {}),
        ("create_admin", {"config": {"bootstrap.servers": bootstrap}}),
        ("describe_transactions", {"ids": ["cds-training"]}),
    ]
    for n, (op, args) in enumerate(steps):
        driver.stdin.write(encode_request(n, op, 20_000, args))
        driver.stdin.flush()
        reply = driver.stdout.readline()   # the driver answers every op within its deadline
        if not reply:
            raise RuntimeError(f"the driver ended during the training session (at {op})")
        _, out = decode_reply(reply, op, 0.0)
        if not out.ok and op in ("hello", "create_producer", "create_consumer", "create_admin"):
            raise RuntimeError(f"training {op} failed: {out.error}")
