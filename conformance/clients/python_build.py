"""Python client libraries at chosen PyPI releases: ``confluent@2.3.0``, ``aiokafka@0.12.0``,
``kafka-python@2.2.15``.

The client name ``<client>@VERSION`` is the same driver module as ``<client>`` (confluent.py,
aiokafka_driver.py, kafka_python.py) run with that PyPI release of its library: on first use the
release is installed by name from PyPI, without its dependencies (those of the interpreter's own
install serve), into ``$KCONFORM_CACHE/python-clients/cp311/<dist>@VERSION/site`` --

    pip install --no-deps --only-binary :all: --target .../site <dist>==VERSION

and, when PyPI has no wheel for this interpreter, once more letting pip build the sdist. A release
with neither (confluent-kafka before 2.0.2 has no cp311 wheel, and its sdist needs librdkafka's
headers) fails with a BuildError naming the release and why. The install runs under
buildcache.once, so parallel runs wait for one install; the directory goes first on the driver's
PYTHONPATH (ClientSpec.pythonpath). After installing, the release is imported once in a child
interpreter: its version (and librdkafka's, for confluent-kafka) is recorded in ``release.json``
beside ``site`` -- what results record as client_version -- and a release that installs but cannot
import fails here, not inside a driver.

The drivers reach APIs an old release lacks by name and answer UNSUPPORTED_BY_CLIENT for them.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from conformance import buildcache

#: Seconds an install may take: a wheel is a download, an sdist build compiles.
INSTALL_TIMEOUT = 600.0
#: The file in an install directory saying which release it holds ({"version": ..., "librdkafka": ...}).
RELEASE_FILE = "release.json"
#: A PyPI release as these projects number them (PEP 440's common shapes: 2.3.0, 0.12.0, 2.2.15,
#: 3.0.0rc1, 2.0.2.post1) -- never a path, a range or a specifier.
_RELEASE = re.compile(r"\d+(?:\.\d+){1,3}(?:(?:a|b|rc)\d+)?(?:\.post\d+)?")

PythonBuildError = buildcache.BuildError


@dataclass(frozen=True)
class PyLib:
    """A Python client: its driver module and the PyPI distribution and import name of its library."""

    client: str
    dist: str
    module: str
    driver: str
    #: A release, for messages.
    example: str


LIBS = {lib.client: lib for lib in (
    PyLib("confluent", "confluent-kafka", "confluent_kafka", "conformance.clients.confluent", "2.3.0"),
    PyLib("aiokafka", "aiokafka", "aiokafka", "conformance.clients.aiokafka_driver", "0.12.0"),
    PyLib("kafka-python", "kafka-python", "kafka", "conformance.clients.kafka_python", "2.2.15"),
)}

#: Run in a child interpreter with the install first on sys.path: prints what it imported.
_PROBE = """
import json, sys
sys.path.insert(0, sys.argv[1])
mod = __import__(sys.argv[2])
out = {"version": getattr(mod, "__version__", None), "file": mod.__file__}
if sys.argv[2] == "confluent_kafka":
    out["version"] = mod.version()[0]
    out["librdkafka"] = mod.libversion()[0]
print(json.dumps(out))
"""


def interpreter_tag() -> str:
    """cp311 for CPython 3.11: the wheels an install needs."""
    return f"cp{sys.version_info.major}{sys.version_info.minor}"


def check_release(lib: PyLib, release: str) -> str:
    """`release` itself, or ValueError when it is no release number."""
    if not _RELEASE.fullmatch(release):
        raise ValueError(f"{lib.client}@{release!r}: expected {lib.client}@VERSION with a {lib.dist} release "
                         f"from PyPI (e.g. {lib.client}@{lib.example})")
    return release


def install_dir(lib: PyLib, release: str) -> Path:
    return buildcache.cache_root() / "python-clients" / interpreter_tag() / f"{lib.dist}@{check_release(lib, release)}"


def site_dir(lib: PyLib, release: str) -> Path:
    """The directory the driver puts first on its PYTHONPATH."""
    return install_dir(lib, release) / "site"


def is_installed(lib: PyLib, release: str) -> bool:
    return (install_dir(lib, release) / buildcache.STAMP).exists()


def installed_releases(lib: PyLib) -> list[str]:
    """The releases of `lib` installed in the cache (for listings), in version order."""
    base = buildcache.cache_root() / "python-clients" / interpreter_tag()
    found = [d.name.split("@", 1)[1] for d in base.glob(f"{lib.dist}@*")
             if (d / buildcache.STAMP).exists() and _RELEASE.fullmatch(d.name.split("@", 1)[1])]
    return sorted(found, key=lambda r: [int(x) if x.isdigit() else x for x in re.findall(r"\d+|[a-z]+", r)])


#: Releases that failed to install in this process: (dist, release) -> the error, so a run does not
#: try a hopeless sdist build once per row.
_FAILED: dict[tuple[str, str], str] = {}


def ensure(lib: PyLib, release: str) -> Path:
    """Install `release` if needed (waiting for an install another process runs); its install
    directory. Raises PythonBuildError naming the release and why it cannot be installed."""
    key = (lib.dist, release)
    if key in _FAILED:
        raise PythonBuildError(_FAILED[key])
    try:
        return buildcache.once(install_dir(lib, release), lambda d: _install(lib, release, d))
    except PythonBuildError as exc:
        _FAILED[key] = str(exc)
        raise


def _install(lib: PyLib, release: str, directory: Path) -> None:
    site = directory / "site"
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-input", "--disable-pip-version-check",
           "--no-compile", "--target", str(site)]
    what = f"{lib.dist} {release}"
    try:
        buildcache.run_logged([*pip, "--only-binary", ":all:", f"{lib.dist}=={release}"], directory, None,
                              INSTALL_TIMEOUT, f"pip install {what} (wheels only)")
    except PythonBuildError:
        log = buildcache.log_tail(directory / buildcache.LOG, 400)
        if "No matching distribution found" not in log:
            raise PythonBuildError(f"{what}: pip could not install it from PyPI:\n{log[-3000:]}") from None
        try:
            buildcache.run_logged([*pip, f"{lib.dist}=={release}"], directory, None, INSTALL_TIMEOUT,
                                  f"pip install {what} (sdist)")
        except PythonBuildError:
            log = buildcache.log_tail(directory / buildcache.LOG, 400)
            causes = [line.strip() for line in log.splitlines()
                      if "fatal error:" in line or "No matching distribution found" in line][-1:]
            raise PythonBuildError(
                f"{what} cannot be installed for CPython {sys.version_info.major}.{sys.version_info.minor} "
                f"({sysconfig.get_platform()}): PyPI has no {interpreter_tag()} wheel of it for this platform "
                f"and its sdist does not build here (or PyPI has no release {release})"
                f"{': ' + causes[0] if causes else ''}. pip's output "
                f"({directory / buildcache.LOG}):\n{buildcache.log_tail(directory / buildcache.LOG, 25)}") from None
    probe = subprocess.run([sys.executable, "-c", _PROBE, str(site), lib.module], capture_output=True, text=True,
                           timeout=120, cwd=directory)
    if probe.returncode != 0:
        raise PythonBuildError(f"{what} installed into {site} but does not import on "
                               f"{sys.executable}:\n{probe.stderr[-2000:]}")
    info = json.loads(probe.stdout.strip().splitlines()[-1])
    if not str(info.get("file", "")).startswith(str(site)):
        raise PythonBuildError(f"{what}: importing {lib.module} found {info.get('file')}, not the install in {site}")
    (directory / RELEASE_FILE).write_text(json.dumps(info) + "\n")


def release_info(lib: PyLib, release: str) -> dict:
    """What the installed release reported when imported ({"version": ..., "librdkafka": ...})."""
    return json.loads((ensure(lib, release) / RELEASE_FILE).read_text())


def client_version(lib: PyLib, release: str) -> str:
    """The version results record: the release, and for confluent-kafka the librdkafka it bundles
    ("2.3.0 (librdkafka 2.3.0)"). Installs first if needed; the bare release when it cannot be
    installed (the driver's start then fails with the reason)."""
    try:
        info = release_info(lib, release)
    except PythonBuildError:
        return release
    version = info.get("version") or release
    return f"{version} (librdkafka {info['librdkafka']})" if info.get("librdkafka") else version


def pythonpath(lib: PyLib, release: str) -> list[str]:
    """The directories to put first on the driver's PYTHONPATH (installs first if needed)."""
    return [str(ensure(lib, release) / "site")]


def command(lib: PyLib, release: str) -> list[str]:
    """The driver's argv (the release comes from PYTHONPATH); installs first, so a release that
    cannot be installed fails the driver's start with the reason."""
    ensure(lib, release)
    return [sys.executable, "-m", lib.driver]


def pip_available() -> tuple[bool, str]:
    """(usable, reason): releases can be installed here (pip in this interpreter)."""
    if importlib.util.find_spec("pip") is None:
        return False, f"pip is not installed in {sys.executable}"
    return True, f"pip in {sys.executable}"


def availability(lib: PyLib, release: str) -> tuple[bool, str]:
    if is_installed(lib, release):
        return True, f"{lib.dist} {release} (installed)"
    ok, why = pip_available()
    return (True, f"{lib.dist} {release} (installed on first use from PyPI)") if ok else (False, why)
