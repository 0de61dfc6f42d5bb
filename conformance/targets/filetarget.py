"""A target defined by a small file: a broker team's own broker as a full target, without Python.

`external` knows a cluster only by its address, so no case can kill, pause or restart a node of
it; a vendor who wants the fault cases -- coordinator kills, pauses, restarts, 3-node failover
-- on their binary writes a YAML file saying how to start node N on given ports and a data
directory, how to stop it, kill -9 it, pause and resume it, and which of those it has; then
`kconform run --target path/to/mybroker.yaml` runs every case on it. targets/README.md is the
reference of the format; targets/tansu.yaml and targets/kfake.yaml define two peers this way,
with the same verdicts as their built-in targets.

    name: mybroker                        # how results name the target (not a built-in name)
    version: {command: [mybroker, --version], pattern: "(\\S+)$"}    # or a plain string
    nodes: 3                              # the most nodes it can run (default 1)
    process: node                         # node: a process per node (default); cluster: one process for all
    features: [kill, pause, restart, stop_node]    # what a case may do to a node
    start: [mybroker, --id, "{node}", --listen, "{host}:{port}", --peers, "{bootstrap_raft}",
            --data, "{data_dir}", "{configs}"]
    extra_ports: [raft]                   # more ports per node: {port_raft}, {ports_raft}, {bootstrap_raft}
    ready: port                           # port (default) | {stdout: REGEX}: a line the process prints
    stop: [mybroker-ctl, stop, "{node}"]  # optional, as kill/pause/resume: default SIGTERM, SIGKILL,
                                          # SIGSTOP, SIGCONT to the process `start` started
    broker_configs:                       # ignored (default): the broker takes no Kafka configs
      args: [--set, "{key}={value}"]      # how one config is passed (into "{configs}", else at the end)
    env: {MYBROKER_LOG: debug, UNWANTED: null}    # null: removed from the environment

Templates: `{node}` (1..N), `{nodes}`, `{host}`, `{port}`, `{ports}` (every node's, comma
separated), `{bootstrap}` (host:port,...), `{data_dir}` (the node's own; with `process:
cluster` one for all), `{workdir}`, `{config[KEY]}`; `${VAR}` and `${VAR:-default}` from the
environment. Node ids are the broker's own: read from its Metadata by port, as a client would.

Why node control by signals by default: kill -9 must be the same as for the other local targets
(no flush, no goodbye), and it is the PID the start command gave us that is signalled (never a
process looked up by name); a broker that runs in a container names its own commands instead.
"""
from __future__ import annotations

import os
import re
import shutil
import string
import subprocess
from pathlib import Path
from typing import Any, ClassVar

import yaml

from ..results import NotApplicable
from . import wire
from .base import TargetStartError, Topology, wait_until
from .local import LocalProcessTarget
from .process import NodeProcess, StdoutLines, free_ports, port_accepts

HOST = "127.0.0.1"
FEATURES = ("kill", "pause", "restart", "stop_node")
KEYS = {"name", "about", "version", "nodes", "process", "features", "start", "stop", "kill", "pause", "resume",
        "ready", "ready_timeout", "stop_grace", "extra_ports", "broker_configs", "env", "reusable", "shareable",
        "heavy", "client_differences"}
ENV_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
#: How long an operator command (stop, kill, pause, resume) may take.
COMMAND_TIMEOUT = 60.0


class TargetFileError(ValueError):
    """A target file kconform cannot use; the message names the file and what is wrong."""


def is_target_file(name: str) -> bool:
    """Whether a --target value names a file rather than a built-in target."""
    return name.endswith((".yaml", ".yml")) or os.sep in name


def expand_env(text: str, env: dict[str, str] | None = None) -> str:
    """`${VAR}` and `${VAR:-default}` from `env` (default: os.environ); KeyError names an unset
    variable that has no default."""
    env = os.environ if env is None else env

    def one(m: re.Match) -> str:
        if m.group(1) in env and env[m.group(1)] != "":
            return env[m.group(1)]
        if m.group(2) is not None:
            return m.group(2)
        raise KeyError(m.group(1))

    return ENV_VAR.sub(one, text)


def load_spec(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise TargetFileError(f"{path}: {exc}") from None
    return check_spec(spec, str(path))


def check_spec(spec: Any, where: str) -> dict[str, Any]:
    if not isinstance(spec, dict):
        raise TargetFileError(f"{where}: a target file is a mapping (name, start, ...)")
    unknown = sorted(set(spec) - KEYS)
    if unknown:
        raise TargetFileError(f"{where}: unknown key(s) {unknown}; known: {sorted(KEYS)}")
    for key in ("name", "start"):
        if not spec.get(key):
            raise TargetFileError(f"{where}: `{key}` is required")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", str(spec["name"])):
        raise TargetFileError(f"{where}: name {spec['name']!r}: letters, digits, '.', '_' and '-' only")
    for key in ("start", "stop", "kill", "pause", "resume"):
        if key in spec and not (isinstance(spec[key], list) and spec[key] and all(isinstance(a, (str, int, float))
                                                                                  for a in spec[key])):
            raise TargetFileError(f"{where}: `{key}` is a command: a list of arguments")
    features = spec.get("features") or []
    bad = sorted(set(features) - set(FEATURES))
    if bad:
        raise TargetFileError(f"{where}: unknown feature(s) {bad}; known: {list(FEATURES)}")
    if spec.get("process", "node") not in ("node", "cluster"):
        raise TargetFileError(f"{where}: process is `node` (a process per node) or `cluster` (one for all)")
    nodes = spec.get("nodes", 1)
    if not isinstance(nodes, int) or nodes < 1:
        raise TargetFileError(f"{where}: nodes is the most nodes it can run: 1 or more")
    ready = spec.get("ready", "port")
    if ready != "port" and not (isinstance(ready, dict) and set(ready) == {"stdout"}):
        raise TargetFileError(f"{where}: ready is `port` or {{stdout: REGEX}}")
    if isinstance(ready, dict):
        re.compile(ready["stdout"])
    bc = spec.get("broker_configs", "ignored")
    if bc != "ignored":
        if not isinstance(bc, dict) or not isinstance(bc.get("args"), list):
            raise TargetFileError(f"{where}: broker_configs is `ignored` or {{args: [...], map: ..., defaults: ..., "
                                  "unsupported: REGEX}}")
        extra = sorted(set(bc) - {"args", "map", "defaults", "unsupported"})
        if extra:
            raise TargetFileError(f"{where}: broker_configs: unknown key(s) {extra}")
        if bc.get("unsupported") and not isinstance(ready, dict):
            raise TargetFileError(f"{where}: broker_configs.unsupported reads stdout: it needs ready: {{stdout: ...}}")
    version = spec.get("version", "unknown")
    if isinstance(version, dict) and not isinstance(version.get("command"), list):
        raise TargetFileError(f"{where}: version is a string or {{command: [...], pattern: REGEX}}")
    return spec


class _Template(string.Formatter):
    """str.format with the target's variables; an unknown one is an error naming it."""

    def get_value(self, key, args, kwargs):
        if key not in kwargs:
            raise TargetFileError(f"unknown template variable {{{key}}}; known: {sorted(kwargs)}")
        return kwargs[key]


def render(args: list, variables: dict[str, Any], configs: list[str] | None = None,
           env: dict[str, str] | None = None) -> list[str]:
    """A command template as argv: `{configs}` alone as an argument becomes the config arguments
    (appended at the end when the template has none)."""
    out: list[str] = []
    placed = False
    for a in args:
        a = str(a)
        if a == "{configs}":
            out += configs or []
            placed = True
            continue
        try:
            out.append(_Template().format(expand_env(a, env), **variables))
        except KeyError as exc:
            raise TargetFileError(f"environment variable {exc.args[0]} is not set (the target file uses it)") from None
    return out if placed or configs is None else out + configs


class FileTarget(LocalProcessTarget):
    """A target whose node control a file defines (module doc). One subclass per file (define)."""

    spec: ClassVar[dict[str, Any]] = {}
    spec_path: ClassVar[str] = ""
    per_node_configs = True

    def __init__(self) -> None:
        super().__init__()
        self._version: str | None = None
        self._ports: dict[int, dict[str, int]] = {}      # node index -> port name -> port
        self._index_of: dict[int, int] = {}              # node id -> node index (1..N)
        self._stdout: dict[int, StdoutLines] = {}
        self._configs: dict[int, dict[str, str]] = {}
        self.ready_timeout = float(self.spec.get("ready_timeout", 60))
        self.stop_grace = float(self.spec.get("stop_grace", 10))

    # ----------------------------------------------------------------- identity
    @classmethod
    def availability(cls) -> tuple[bool, str]:
        try:
            program = expand_env(str(cls.spec["start"][0]))
        except KeyError as exc:
            return False, f"{cls.spec_path}: set {exc.args[0]} (the file's start command names it)"
        found = program if os.path.isabs(program) else shutil.which(program)
        if not found or not os.access(found, os.X_OK):
            return False, f"{cls.spec_path}: {program} is not an executable here"
        return True, f"{cls.spec_path}: {found}"

    @property
    def version(self) -> str:
        if self._version is None:
            v = self.spec.get("version", "unknown")
            if isinstance(v, dict):
                try:
                    argv = render(v["command"], {})
                    out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
                    text = (out.stdout or out.stderr).strip()
                    m = re.search(v.get("pattern", r"(.+)"), text)
                    v = (m.group(1) if m and m.groups() else m.group(0) if m else text) or "unknown"
                except (OSError, subprocess.SubprocessError, TargetFileError):
                    v = "unknown"
            self._version = str(v)
        return self._version

    # ----------------------------------------------------------------- launch
    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        for k, v in (self.spec.get("env") or {}).items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = expand_env(str(v))
        return env

    def _config_args(self, configs: dict[str, str]) -> list[str]:
        bc = self.spec.get("broker_configs", "ignored")
        if bc == "ignored":
            return []
        mapped = bc.get("map") or {}
        given = {**{k: str(v) for k, v in (bc.get("defaults") or {}).items()}, **configs}
        out: list[str] = []
        for key, value in given.items():
            how = mapped.get(key, bc["args"])
            if isinstance(how, dict):  # value -> arguments
                norm = value.strip().lower()
                how = how.get(norm, how.get(value, []))
            out += [_Template().format(str(a), key=key, value=value) for a in how]
        return out

    def _variables(self, index: int, workdir: Path, n: int) -> dict[str, Any]:
        names = ["port"] + [f"port_{x}" for x in self.spec.get("extra_ports") or []]
        variables: dict[str, Any] = {"node": index, "nodes": n, "host": HOST, "workdir": str(workdir),
                                     "data_dir": str(workdir / ("data" if self._cluster() else f"node-{index}")),
                                     "config": self._configs.get(index, {})}
        for name in names:
            ports = [self._ports[i][name] for i in range(1, n + 1)]
            suffix = name[len("port"):]
            variables[name] = self._ports[index][name]
            variables[f"ports{suffix}"] = ",".join(str(p) for p in ports)
            variables[f"bootstrap{suffix}"] = ",".join(f"{HOST}:{p}" for p in ports)
        return variables

    def _cluster(self) -> bool:
        return self.spec.get("process", "node") == "cluster"

    def _may_have_nodes(self, nodes: int) -> bool:
        return nodes <= int(self.spec.get("nodes", 1))

    def _launch(self, topology: Topology, broker_configs: dict[str, str], workdir: Path) -> None:
        n = topology.nodes
        if self._cluster() and any(self.node_configs.values()):
            raise NotApplicable(f"target {self.name!r} runs every node in one process with one set of broker "
                                "configs; the run gives nodes configs of their own")
        names = ["port"] + [f"port_{x}" for x in self.spec.get("extra_ports") or []]
        ports = iter(free_ports(n * len(names)))
        self._ports = {i: {name: next(ports) for name in names} for i in range(1, n + 1)}
        self._configs = {i: {**broker_configs, **self.node_configs.get(i, {})} for i in range(1, n + 1)}
        env = self._env()
        for index in ([1] if self._cluster() else range(1, n + 1)):
            variables = self._variables(index, workdir, n)
            Path(variables["data_dir"]).mkdir(parents=True, exist_ok=True)
            argv = render(self.spec["start"], variables, self._config_args(self._configs[index]), env)
            proc = NodeProcess(argv, workdir / f"node-{index}.log", cwd=workdir, env=env,
                               stdout_pipe=isinstance(self.spec.get("ready"), dict))
            self.procs[-index] = proc   # stop() ends it whatever fails next; keyed by node id below
            proc.start()
        for index in ([1] if self._cluster() else range(1, n + 1)):
            self._await_ready(index)
        # The broker's own node ids, by port, as its Metadata says.
        want = {self._ports[i]["port"]: i for i in range(1, n + 1)}

        def all_listed():
            md = wire.metadata((HOST, self._ports[1]["port"]), [])
            found = {nid: addr for nid, addr in md.brokers.items() if addr[1] in want}
            return found if len(found) == n else None

        brokers = wait_until(f"{n} node(s) of {self.name} in its Metadata", all_listed, self.ready_timeout)
        for node_id, (host, port) in sorted(brokers.items()):
            self._index_of[node_id] = want[port]
        # In place: the proxy follows this very dict (runner/proxying.ProxyFront.follow).
        self.addresses.update(sorted((nid, (HOST, port)) for nid, (_, port) in brokers.items()))
        if self._cluster():
            self.procs = {min(self.addresses): self.procs.pop(-1)}
        else:
            self.procs = {nid: self.procs.pop(-self._index_of[nid]) for nid in self.addresses}

    def _await_ready(self, index: int, proc: NodeProcess | None = None) -> None:
        proc = proc or self.procs[-index]
        ready = self.spec.get("ready", "port")
        if isinstance(ready, dict):
            lines = StdoutLines(proc)
            self._stdout[index] = lines
            pattern = re.compile(ready["stdout"])
            try:
                seen = lines.read_until(lambda line: bool(pattern.search(line)), self.ready_timeout)
            except (TimeoutError, EOFError) as exc:
                raise TargetStartError(f"{self.name} node {index} did not start: {exc}") from None
            unsupported = (self.spec.get("broker_configs") or {}) if isinstance(self.spec.get("broker_configs"),
                                                                                dict) else {}
            if unsupported.get("unsupported"):
                rx = re.compile(unsupported["unsupported"])
                for line in seen:
                    m = rx.search(line)
                    if m:
                        self.unapplied_configs[m.group(1)] = self.broker_configs.get(m.group(1), "")
            return
        port = self._ports[index]["port"]

        def listening():
            if not proc.running():
                raise TargetStartError(f"{self.name} node {index} exited with code {proc.returncode()}:\n"
                                       f"{proc.log_tail()}")
            return True if port_accepts(HOST, port) else None

        wait_until(f"{self.name} node {index} to listen on {port}", listening, self.ready_timeout)

    # ----------------------------------------------------------------- node control
    def _check_exact(self, node_id: int, action: str) -> None:
        if self._cluster() and len(self.addresses) > 1:
            raise NotApplicable(f"{self.name} cannot {action} one node of {len(self.addresses)}: its nodes live in "
                                "one process (process: cluster), so a signal reaches them all")

    def _command(self, what: str, node_id: int) -> bool:
        """Run the file's own command for `what` on the node, when it names one."""
        template = self.spec.get(what)
        if not template:
            return False
        index = self._index_of.get(node_id, 1)
        argv = render(template, {**self._variables(index, self.workdir, len(self._ports)), "pid": self._proc(node_id).pid},
                      None, self._env())
        done = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT, cwd=self.workdir)
        if done.returncode != 0:
            raise RuntimeError(f"{self.name}: `{' '.join(argv)}` ({what} node {node_id}) exited "
                               f"{done.returncode}: {(done.stderr or done.stdout).strip()[-500:]}")
        return True

    def kill(self, node_id: int) -> None:
        if self.spec.get("kill"):
            self.require("kill", "kill a node")
            self._check_exact(node_id, "kill")
            self._command("kill", node_id)
            self._proc(node_id).wait_exited(COMMAND_TIMEOUT)
            self.down.add(node_id)
            return
        super().kill(node_id)

    def pause(self, node_id: int) -> None:
        if self.spec.get("pause"):
            self.require("pause", "pause a node")
            self._check_exact(node_id, "pause")
            self._command("pause", node_id)
            self.down.add(node_id)
            return
        super().pause(node_id)

    def resume(self, node_id: int) -> None:
        if self.spec.get("resume"):
            self.require("pause", "resume a node")
            self._check_exact(node_id, "resume")
            self._command("resume", node_id)
            self.down.discard(node_id)
            return
        super().resume(node_id)

    def stop_node(self, node_id: int) -> None:
        if self.spec.get("stop"):
            self.require("stop_node", "stop a single node")
            self._check_exact(node_id, "stop")
            self._command("stop", node_id)
            if not self._proc(node_id).wait_exited(self.stop_grace):
                self._proc(node_id).kill()
            self.down.add(node_id)
            return
        super().stop_node(node_id)

    def _relaunch(self, node_id: int) -> None:
        proc = self._proc(node_id)
        proc.start()
        self._await_ready(self._index_of.get(node_id, 1), proc)


def define(path: str | Path) -> type[FileTarget]:
    """The target class a file defines (module doc)."""
    spec = load_spec(path)
    features = set(spec.get("features") or [])
    if int(spec.get("nodes", 1)) > 1:
        features.add("multi_node")
    attrs = {
        "name": str(spec["name"]),
        "spec": spec,
        "spec_path": str(path),
        "static_capabilities": frozenset(features),
        "applies_broker_configs": spec.get("broker_configs", "ignored") != "ignored",
        "reusable": bool(spec.get("reusable", False)),
        "shareable": bool(spec.get("shareable", False)),
        "heavy_nodes": bool(spec.get("heavy", False)),
        "client_differences": {str(k): str(v) for k, v in (spec.get("client_differences") or {}).items()},
        "__doc__": spec.get("about") or f"target {spec['name']} defined by {path}",
    }
    cls = type(f"FileTarget_{re.sub(r'[^A-Za-z0-9]', '_', attrs['name'])}", (FileTarget,), attrs)
    return cls
