"""Build something from sources in the repository into the cache, once per source version.

Why: client drivers (Java, Go, Node) and peer brokers (kfake) are built from small sources kept
in the repository, but build output must never land in the repository, a build must not run
again while its sources are unchanged, and parallel test processes must not race on one build.
So every build runs in ``$KCONFORM_CACHE/<kind>/<digest>/`` (default ``~/.cache/kconform``),
where ``digest`` hashes the source files, the command and its environment: an edited source is
rebuilt, an unchanged one is reused. Downloads go to the tools' own caches (``~/.m2``,
``~/go/pkg/mod``, ``~/.npm``), which outlive any one build.

API (everything a caller needs):

    from conformance import buildcache
    BUILD = buildcache.go("kfake", Path(__file__).parent / "kfake", output="kfake")
    BUILD.tools_missing()   # ["go"] when go is not on PATH (check before building)
    BUILD.is_built()        # the current sources are built (no build is started)
    path = BUILD.ensure()   # build if needed (waits for a build another process runs); the directory
    BUILD.build_seconds()   # how long the cached build took, for reports

``maven(kind, dir, properties=...)`` runs ``mvn -q -B [-Dname=value...] package`` over pom.xml and src/; ``go(kind, dir, output)``
runs ``go build -o OUTPUT .`` over go.mod, go.sum and the .go files with GOFLAGS=-mod=mod (the
module cache stays the user's ~/go); ``npm(kind, dir)`` runs ``npm ci`` over package.json,
package-lock.json and the .js/.mjs/.cjs files. ``Build(...)`` takes any other command. A failed
build raises BuildError with the tail of its log (the whole log stays in the build directory,
``build.log``); a build taking over ``timeout`` seconds (default BUILD_TIMEOUT) is killed.

``once(directory, make)`` is the locking underneath, for things that are not built from
repository files (e.g. a Kafka release resolved from Maven Central): ``make(directory)`` runs
under the lock into a fresh directory, and a stamp file marks the result complete.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

#: Seconds a build may take before it is killed (a first Maven or Go build downloads a lot).
BUILD_TIMEOUT = 900.0
#: The file whose presence says "this directory holds a complete build".
STAMP = "kconform-build-ok"
LOG = "build.log"
#: Lines of the build log an error message carries.
TAIL_LINES = 40
#: Directories never taken as sources (another tool's output left in the source tree).
IGNORED_DIRS = frozenset({"node_modules", "target", "__pycache__", ".git"})


class BuildError(RuntimeError):
    """The build failed, timed out or lacks its tools; the message says why, with the log tail."""


def cache_root() -> Path:
    """$KCONFORM_CACHE, else ~/.cache/kconform: every cache of the project lives under it."""
    return Path(os.environ.get("KCONFORM_CACHE", Path.home() / ".cache" / "kconform"))


def once(directory: Path, make: Callable[[Path], None]) -> Path:
    """Return `directory` once it holds a complete result; run make(directory) first if it does not.

    One file lock (``<directory>.lock`` beside it) makes concurrent callers -- threads or
    processes -- wait for one run of `make` instead of racing. The directory is emptied before
    `make` runs, so a half-finished earlier attempt never leaks into the result, and the stamp is
    written only after `make` returned.
    """
    if (directory / STAMP).exists():
        return directory
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / f"{directory.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (directory / STAMP).exists():  # another process made it while we waited
            return directory
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        t0 = time.monotonic()
        make(directory)
        (directory / STAMP).write_text(f"built in {time.monotonic() - t0:.1f} s\n")
    return directory


def stamp_seconds(directory: Path) -> float | None:
    """How long the run that made `directory` took (from its stamp), or None when it is not made."""
    try:
        match = re.search(r"built in ([0-9.]+) s", (directory / STAMP).read_text())
    except OSError:
        return None
    return float(match.group(1)) if match else None


def run_logged(argv: list[str], cwd: Path, env: Mapping[str, str] | None, timeout: float, what: str) -> None:
    """Run argv in cwd with stdout and stderr appended to cwd/build.log; BuildError on failure.

    The command runs in its own session, so a timeout kills its whole process group (Maven's JVM,
    the Go compiler's children) -- the group of the process we started, by its id.
    """
    log_path = cwd / LOG
    with open(log_path, "ab") as log:
        log.write(f"$ {' '.join(argv)}\n".encode())
        log.flush()
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=None if env is None else dict(env),
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        except OSError as exc:
            raise BuildError(f"{what}: cannot run {argv[0]!r}: {exc}") from exc
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise BuildError(f"{what} took over {timeout:.0f} s in {cwd} and was killed:\n{log_tail(log_path)}") from None
    if code != 0:
        raise BuildError(f"{what} failed (exit {code}) in {cwd}:\n{log_tail(log_path)}")


def log_tail(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


@dataclass(frozen=True)
class Build:
    """A build of the files matching `patterns` under `source_dir` with `command` (see module doc).

    patterns: globs relative to source_dir ("pom.xml", "src/**/*"); every matching file is copied
    (keeping its relative path) and hashed. env: variables set over the caller's environment.
    tools: executables that must be on PATH. products: paths (relative to the build directory)
    that must exist after the command, else the build counts as failed.
    """

    kind: str
    source_dir: Path
    patterns: tuple[str, ...]
    command: tuple[str, ...]
    tools: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    products: tuple[str, ...] = ()
    timeout: float = BUILD_TIMEOUT

    def sources(self) -> list[Path]:
        files = {p for pattern in self.patterns for p in self.source_dir.glob(pattern)
                 if p.is_file() and not IGNORED_DIRS & set(p.relative_to(self.source_dir).parts)}
        if not files:
            raise BuildError(f"no source files match {list(self.patterns)} in {self.source_dir}")
        return sorted(files)

    def digest(self) -> str:
        h = hashlib.sha256()
        for part in (self.kind, *self.command, *sorted(f"{k}={v}" for k, v in self.env.items())):
            h.update(part.encode() + b"\0")
        for path in self.sources():
            h.update(str(path.relative_to(self.source_dir)).encode() + b"\0")
            h.update(path.read_bytes() + b"\0")
        return h.hexdigest()[:16]

    def directory(self) -> Path:
        return cache_root() / self.kind / self.digest()

    def is_built(self) -> bool:
        return (self.directory() / STAMP).exists()

    def tools_missing(self) -> list[str]:
        return [tool for tool in self.tools if shutil.which(tool) is None]

    def build_seconds(self) -> float | None:
        return stamp_seconds(self.directory())

    def ensure(self) -> Path:
        """The build directory with a complete build of the current sources; builds if needed."""
        directory = self.directory()
        if (directory / STAMP).exists():
            return directory
        missing = self.tools_missing()
        if missing:
            raise BuildError(f"cannot build {self.kind}: {', '.join(missing)} not on PATH")
        return once(directory, self._make)

    def _make(self, directory: Path) -> None:
        for path in self.sources():
            dest = directory / path.relative_to(self.source_dir)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest)
        env = {**os.environ, **self.env} if self.env else None
        run_logged(list(self.command), directory, env, self.timeout, f"{self.kind}: {' '.join(self.command)}")
        absent = [p for p in self.products if not (directory / p).exists()]
        if absent:
            raise BuildError(f"{self.kind}: the build left no {', '.join(absent)} in {directory}:\n"
                             f"{log_tail(directory / LOG)}")


def maven(kind: str, source_dir: Path, *, properties: Mapping[str, str] | None = None,
          timeout: float = BUILD_TIMEOUT) -> Build:
    """`mvn -q -B package` over pom.xml and src/ (artifacts resolve into ~/.m2); `properties`
    become `-Dname=value`, overriding the pom's own (e.g. the version of a dependency)."""
    defines = tuple(f"-D{k}={v}" for k, v in sorted((properties or {}).items()))
    return Build(kind, source_dir, ("pom.xml", "src/**/*"), ("mvn", "-q", "-B", *defines, "package"),
                 tools=("java", "mvn"), timeout=timeout)


def go(kind: str, source_dir: Path, output: str, *, timeout: float = BUILD_TIMEOUT) -> Build:
    """`go build -o OUTPUT .` over go.mod, go.sum and the .go files.

    GOFLAGS=-mod=mod lets go fetch what go.sum pins from the module proxy into the user's module
    cache (~/go/pkg/mod) -- the build directory holds no vendor tree. Flags the caller's GOFLAGS
    already carries (e.g. -buildvcs=false) are kept.
    """
    flags = " ".join(f for f in (os.environ.get("GOFLAGS", ""), "-mod=mod") if f)
    return Build(kind, source_dir, ("go.mod", "go.sum", "**/*.go"), ("go", "build", "-o", output, "."),
                 tools=("go",), env={"GOFLAGS": flags}, products=(output,), timeout=timeout)


def npm(kind: str, source_dir: Path, *, timeout: float = BUILD_TIMEOUT) -> Build:
    """`npm ci` over package.json, package-lock.json and the JavaScript sources.

    npm runs in the build directory (not with --prefix, which would also move npm's global config
    and lose the machine's registry, proxy and CA settings).
    """
    return Build(kind, source_dir, ("package.json", "package-lock.json", "**/*.js", "**/*.mjs", "**/*.cjs"),
                 ("npm", "ci", "--no-audit", "--no-fund"), tools=("node", "npm"),
                 products=("node_modules",), timeout=timeout)
