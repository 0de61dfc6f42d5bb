"""The target registry and the availability checks (no broker is started here)."""
from __future__ import annotations

import pytest

from conformance.targets import (
    TARGETS,
    ApacheKafkaTarget,
    TargetUnavailable,
    Topology,
    make_target,
    target_class,
    target_rows,
)
from conformance.targets.apache_kafka import kafka_uuid
from conformance.targets.external import parse_bootstrap


def test_rows_cover_every_target_and_every_kafka_release():
    from conformance.targets.kafka_releases import RELEASES

    rows = target_rows()
    releases = [f"apache-kafka@{r.version}" for r in RELEASES]
    assert [r[0] for r in rows] == ["embedded", "apache-kafka", *releases, "tansu", "kfake", "librdkafka-mock",
                                    "external"]
    for name, ok, detail in rows:
        assert isinstance(ok, bool) and detail, name
    by_name = {name: (ok, detail) for name, ok, detail in rows}
    if by_name["apache-kafka"][0]:
        assert by_name["apache-kafka@0.11.0.3"] == (True, f"zookeeper: {RELEASES[0].note}")
        assert by_name["apache-kafka@2.0.1"][0] is False and "ZooKeeper 3.4.13" in by_name["apache-kafka@2.0.1"][1]


def test_make_target_rejects_unknown_names():
    with pytest.raises(KeyError, match="known: embedded"):
        make_target("redpanda")
    assert isinstance(make_target("apache-kafka", version="4.1.0"), TARGETS["apache-kafka"])
    assert make_target("apache-kafka", version="4.1.0").version == "4.1.0"


def test_name_at_version_picks_a_release():
    target = make_target("apache-kafka@3.9.1")
    assert isinstance(target, ApacheKafkaTarget)
    assert (target.name, target.version) == ("apache-kafka@3.9.1", "3.9.1")
    assert make_target("apache-kafka").name == "apache-kafka"
    assert target_class("apache-kafka@4.2.0") is ApacheKafkaTarget
    with pytest.raises(KeyError, match="no releases to choose from"):
        make_target("tansu@0.6.0")
    with pytest.raises(KeyError, match="empty version"):
        make_target("apache-kafka@")
    with pytest.raises(KeyError, match="unknown target"):
        target_class("redpanda@24.1")


def test_missing_java_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no java, no mvn
    ok, reason = ApacheKafkaTarget.availability()
    assert not ok
    assert "apt-get install openjdk-17-jre-headless maven" in reason
    target = ApacheKafkaTarget()
    with pytest.raises(TargetUnavailable, match="openjdk-17-jre-headless"):
        target.start(Topology(), {}, tmp_path / "work")
    assert target.procs == {}


def test_kafka_uuid_is_a_kafka_style_id():
    ids = {kafka_uuid() for _ in range(200)}
    assert len(ids) == 200
    assert all(len(i) == 22 and not i.startswith("-") and "=" not in i for i in ids)


def test_parse_bootstrap():
    assert parse_bootstrap("127.0.0.1:9092, localhost:9093") == [("127.0.0.1", 9092), ("localhost", 9093)]
    with pytest.raises(ValueError):
        parse_bootstrap("no-port")


def test_run_cli_accepts_name_at_version_and_rejects_the_rest(tmp_path, capsys):
    from conformance.cli import main

    args = ["run", "--client", "confluent", "--results", str(tmp_path), "--no-progress"]
    assert main([*args, "--target", "redpanda"]) == 2
    assert "unknown target 'redpanda'" in capsys.readouterr().err
    assert main([*args, "--target", "tansu@0.6.0"]) == 2
    assert "no releases to choose from" in capsys.readouterr().err
    # A known NAME@VERSION passes validation; with no matching case the run stops there.
    assert main([*args, "--target", "apache-kafka@3.9.1", "--case", "no/such-case"]) == 2
    assert "no case matches" in capsys.readouterr().err
