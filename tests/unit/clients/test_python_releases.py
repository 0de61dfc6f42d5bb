"""`confluent@VERSION`, `aiokafka@VERSION`, `kafka-python@VERSION`: the release a name asks for, one
versioned-name table shared with `java@VERSION`, where each release is installed in the cache, and
the errors for names that are no release. Nothing is installed here (tests/integration/clients/
test_python_release_driver.py installs a real release)."""

from __future__ import annotations

import sys

import pytest

from conformance import buildcache
from conformance.clients import python_build
from conformance.clients.registry import CLIENTS, VERSIONED, VERSIONED_FORMS, availability, versioned_spec
from conformance.runner.cli import invalid_targets_or_clients

LIBS = python_build.LIBS


@pytest.mark.parametrize("name, dist, release", [
    ("confluent@2.3.0", "confluent-kafka", "2.3.0"), ("aiokafka@0.12.0", "aiokafka", "0.12.0"),
    ("kafka-python@2.2.15", "kafka-python", "2.2.15"), ("kafka-python@3.0.0rc1", "kafka-python", "3.0.0rc1"),
    ("confluent@2.0.2.post1", "confluent-kafka", "2.0.2.post1")])
def test_a_python_client_at_a_release_is_its_driver_with_that_pypi_release(name, dist, release):
    spec = versioned_spec(name)
    assert spec is not None and spec.name == name and name in CLIENTS
    assert f"{dist} {release}" in spec.description
    client = name.split("@")[0]
    assert CLIENTS[client].description in spec.description  # the same driver as the plain name
    assert spec.features == frozenset()                       # group features are measured per fixed client


@pytest.mark.parametrize("name", ["confluent@", "confluent@latest", "aiokafka@0.12.0/../x", "kafka-python@>=2.2",
                                  "aiokafka@0", "confluent@2.3.0 ", "kafka-python@2.2.15;rm"])
def test_a_python_client_at_no_release_number_is_refused_saying_what_is_expected(name):
    client = name.split("@")[0]
    with pytest.raises(ValueError, match=rf"expected {client}@VERSION .*e\.g\. {client}@\d"):
        versioned_spec(name)
    assert name not in CLIENTS and CLIENTS.get(name) is None
    assert f"expected {client}@VERSION" in invalid_targets_or_clients([], [name])


def test_one_table_holds_every_versioned_form():
    assert set(VERSIONED) >= {"java", "confluent", "aiokafka", "kafka-python"}
    assert set(VERSIONED_FORMS) == {f"{prefix}@VERSION" for prefix in VERSIONED}
    assert versioned_spec("java@3.1.2").version() == "3.1.2"
    assert versioned_spec("kafkajs@2.2.4") is None and versioned_spec("confluent") is None
    with pytest.raises(ValueError, match="java@MAJOR.MINOR.PATCH"):
        versioned_spec("java@3.1")
    # A release is chosen by name, never listed or run by default.
    assert not any("@" in name for name in CLIENTS) and not any("@" in name for name in availability())
    assert "unknown client(s) ['nope@1.0.0']" in invalid_targets_or_clients([], ["nope@1.0.0"])


def test_each_release_installs_into_its_own_directory_per_interpreter(tmp_path, monkeypatch):
    monkeypatch.setenv("KCONFORM_CACHE", str(tmp_path))
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    lib = LIBS["aiokafka"]
    assert python_build.install_dir(lib, "0.12.0") == tmp_path / "python-clients" / tag / "aiokafka@0.12.0"
    assert python_build.site_dir(lib, "0.12.0") == tmp_path / "python-clients" / tag / "aiokafka@0.12.0" / "site"
    assert python_build.install_dir(LIBS["confluent"], "2.3.0").name == "confluent-kafka@2.3.0"
    with pytest.raises(ValueError):
        python_build.install_dir(lib, "../x")


def test_installed_releases_are_those_with_a_complete_install_in_version_order(tmp_path, monkeypatch):
    monkeypatch.setenv("KCONFORM_CACHE", str(tmp_path))
    lib = LIBS["kafka-python"]
    assert python_build.installed_releases(lib) == []
    for release in ("2.3.1", "2.2.15", "3.0.0", "2.2.9"):
        directory = python_build.install_dir(lib, release)
        directory.mkdir(parents=True)
        (directory / buildcache.STAMP).write_text("built in 1.0 s\n")
    python_build.install_dir(lib, "2.2.0").mkdir(parents=True)  # an unfinished install
    python_build.install_dir(LIBS["aiokafka"], "0.12.0").mkdir(parents=True)
    assert python_build.installed_releases(lib) == ["2.2.9", "2.2.15", "2.3.1", "3.0.0"]
    assert python_build.is_installed(lib, "3.0.0") and not python_build.is_installed(lib, "2.2.0")
    assert CLIENTS["kafka-python@3.0.0"].availability() == (True, "kafka-python 3.0.0 (installed)")
    ok, why = CLIENTS["kafka-python@2.2.0"].availability()
    assert ok and "installed on first use from PyPI" in why
    assert VERSIONED["kafka-python"].ready() == ["2.2.9", "2.2.15", "2.3.1", "3.0.0"]


def test_the_recorded_version_names_librdkafka_for_confluent(tmp_path, monkeypatch):
    monkeypatch.setenv("KCONFORM_CACHE", str(tmp_path))
    for client, info in (("confluent", '{"version": "2.3.0", "librdkafka": "2.3.0"}'),
                         ("aiokafka", '{"version": "0.12.0"}')):
        release = info.split('"')[3]
        directory = python_build.install_dir(LIBS[client], release)
        directory.mkdir(parents=True)
        (directory / python_build.RELEASE_FILE).write_text(info)
        (directory / buildcache.STAMP).write_text("built in 1.0 s\n")
    assert CLIENTS["confluent@2.3.0"].version() == "2.3.0 (librdkafka 2.3.0)"
    assert CLIENTS["aiokafka@0.12.0"].version() == "0.12.0"
    assert CLIENTS["aiokafka@0.12.0"].pythonpath() == [str(python_build.site_dir(LIBS["aiokafka"], "0.12.0"))]
    assert CLIENTS["aiokafka@0.12.0"].command()[-2:] == ["-m", "conformance.clients.aiokafka_driver"]
    assert CLIENTS["aiokafka"].pythonpath() == []  # the fixed clients run the interpreter's own install
