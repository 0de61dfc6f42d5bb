"""`java@VERSION` clients: the release a name asks for, the build (and cache directory) per release,
the registry's lookups of the form, and how cases address a client at a release (a `java` entry
covers its releases; a client regression runs with its own client only). No build runs here."""

from __future__ import annotations

import pytest

from conformance import buildcache
from conformance.clients import java_build
from conformance.clients.registry import CLIENTS, availability
from conformance.dsl.model import CheckDef, Case, Expect, RegressionDef, Step, client_listed


@pytest.mark.parametrize("name, release", [("java", None), ("confluent", None), ("java@3.1.2", "3.1.2"),
                                           ("java@2.8.2", "2.8.2"), ("java@4.0.0-rc1", "4.0.0-rc1")])
def test_release_of_reads_the_release_a_name_asks_for(name, release):
    assert java_build.release_of(name) == release


@pytest.mark.parametrize("name", ["java@", "java@3.1", "java@latest", "java@3.1.2/../x", "java@3.1.2 "])
def test_release_of_refuses_what_is_no_release_number(name):
    with pytest.raises(ValueError, match="java@MAJOR.MINOR.PATCH"):
        java_build.release_of(name)


def test_each_release_builds_into_its_own_cache_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("KCONFORM_CACHE", str(tmp_path))
    assert java_build.build_for(None) is java_build.BUILD
    old, new = java_build.build_for("2.8.2"), java_build.build_for("3.1.2")
    assert old.directory().parent == tmp_path / "java-driver@2.8.2"
    assert new.directory().parent == tmp_path / "java-driver@3.1.2"
    assert "-Dkafka.version=2.8.2" in old.command and "-Dkafka.version=3.1.2" in new.command
    assert not any(arg.startswith("-D") for arg in java_build.BUILD.command)
    assert old.sources() == java_build.BUILD.sources()  # one driver source for every release
    with pytest.raises(ValueError):
        java_build.build_for("3.1")


def test_built_releases_are_those_with_a_complete_build(tmp_path, monkeypatch):
    monkeypatch.setenv("KCONFORM_CACHE", str(tmp_path))
    assert java_build.built_releases() == []
    for release in ("3.10.0", "2.8.2", "3.2.3"):
        directory = java_build.build_for(release).directory()
        directory.mkdir(parents=True)
        (directory / buildcache.STAMP).write_text("built in 1.0 s\n")
    java_build.build_for("3.6.2").directory().mkdir(parents=True)  # an unfinished build
    assert java_build.built_releases() == ["2.8.2", "3.2.3", "3.10.0"]


def test_registry_accepts_java_at_a_release_beside_the_fixed_clients():
    assert "java@3.1.2" in CLIENTS and "java@3.1" not in CLIENTS and "kafkajs@2.2.4" not in CLIENTS
    spec = CLIENTS["java@3.1.2"]
    assert spec.name == "java@3.1.2" and spec.version() == "3.1.2" and "3.1.2" in spec.description
    assert CLIENTS.get("java@3.1.2") is spec and CLIENTS.get("java@x") is None
    with pytest.raises(KeyError):
        CLIENTS["java@x"]
    assert "java@3.1.2" not in list(CLIENTS) and "java@3.1.2" not in availability()
    assert spec.features == frozenset()  # group features are measured for `java` only


def test_a_java_entry_covers_its_releases_unless_the_release_has_its_own():
    expect = Expect(per_client={"java": Expect(ok=False, errors=("X",)), "java@2.8.2": Expect(),
                                "default": Expect(any=True)})
    assert expect.for_client("java@3.1.2").errors == ("X",)
    assert expect.for_client("java@2.8.2").ok and expect.for_client("confluent").any
    assert client_listed("java@3.1.2", ("java",)) and not client_listed("confluent", ("java",))
    assert client_listed("sarama", ())
    assert Step(index=0, kind="op", clients=("java",)).runs_for("java@3.1.2")
    assert CheckDef("records", {}, "records", clients=("java",)).applies_to("java@2.8.2")


def test_a_client_regression_runs_with_its_client_and_its_releases_only():
    reg = RegressionDef(key="KAFKA-9279", component="java", affected="<= 3.1.2", fixed="3.2.0", summary="s")
    case = Case(id="regressions/KAFKA-9279", title="t", path="p", regression=reg)
    assert case.not_for_client("java") is None and case.not_for_client("java@3.1.2") is None
    assert "KAFKA-9279" in case.not_for_client("confluent")
    broker = Case(id="x", title="t", path="p", regression=RegressionDef("KAFKA-1", "broker", "a", "b", "s"))
    assert broker.not_for_client("confluent") is None
