"""`franz-go@VERSION` / `sarama@VERSION` clients: the release a name asks for, the build (and cache
directory) per release with the repository's go.mod left alone, the build tags an old release
needs, the registry's lookups of the form, and which regression cases run with them. No build runs
here (tests/integration/clients/test_go_release_driver.py builds one)."""

from __future__ import annotations

import pytest

from conformance import buildcache
from conformance.clients import go_build
from conformance.clients.registry import CLIENTS, VERSIONED_FORMS, availability
from conformance.dsl.model import Case, RegressionDef


@pytest.mark.parametrize("name, expected", [
    ("franz-go", None), ("sarama", None), ("java@3.1.2", None), ("confluent", None),
    ("franz-go@1.21.3", ("franz-go", "1.21.3")), ("sarama@1.60.0", ("sarama", "1.60.0")),
    ("franz-go@1.0.0-rc1", ("franz-go", "1.0.0-rc1"))])
def test_release_of_reads_the_client_and_release_a_name_asks_for(name, expected):
    assert go_build.release_of(name) == expected


@pytest.mark.parametrize("name", ["franz-go@", "franz-go@1.21", "franz-go@v1.21.3", "franz-go@latest",
                                  "sarama@1.60.0/../x", "sarama@1.60.0 ", "franz-go@1.21.3;rm"])
def test_release_of_refuses_what_is_no_release_number(name):
    with pytest.raises(ValueError, match="MAJOR.MINOR.PATCH"):
        go_build.release_of(name)


def test_each_release_builds_into_its_own_cache_directory_from_the_same_sources(tmp_path, monkeypatch):
    monkeypatch.setenv("KCONFORM_CACHE", str(tmp_path))
    assert go_build.build_for("franz-go", None) is go_build.BUILD
    old, new = go_build.build_for("franz-go", "1.21.3"), go_build.build_for("franz-go", "1.22.3")
    assert old.directory().parent == tmp_path / "go-drivers@franz-go@1.21.3"
    assert new.directory().parent == tmp_path / "go-drivers@franz-go@1.22.3"
    assert old.sources() == go_build.BUILD.sources() and old.source_dir == go_build.GO_SRC
    script = old.command[-1]
    # the copy's go.mod is rewritten to the release (and the kmsg it requires), then checked
    assert "go get github.com/twmb/franz-go@v1.21.3" in script and "pkg/kmsg@" in script
    # built without moving a requirement, and the binary must link the release itself
    assert "go build -mod=readonly" in script and '!= "v1.21.3"' in script and "go version -m" in script
    assert "-tags franzgo_pre_1_22" in script and "-tags" not in new.command[-1]
    sarama = go_build.build_for("sarama", "1.60.0").command[-1]
    assert "go get github.com/IBM/sarama@v1.60.0" in sarama and "kmsg" not in sarama
    assert old.env["GOFLAGS"].endswith("-mod=mod") and old.products == (go_build.BINARY,)
    with pytest.raises(ValueError):
        go_build.build_for("franz-go", "1.21")
    with pytest.raises(ValueError):
        go_build.build_for("kafkajs", "2.2.4")


@pytest.mark.parametrize("release, tags", [("1.14.0", ["franzgo_pre_1_22"]), ("1.21.6", ["franzgo_pre_1_22"]),
                                           ("1.22.0", []), ("1.22.3", []), ("2.0.0", [])])
def test_franz_go_before_1_22_builds_with_the_old_kmsg_tag(release, tags):
    assert go_build.build_tags("franz-go", release) == tags
    assert go_build.build_tags("sarama", "1.60.0") == ["sarama_pre_1_60_1"] and go_build.build_tags("sarama", "1.60.1") == []


def test_built_releases_are_those_with_a_complete_build(tmp_path, monkeypatch):
    monkeypatch.setenv("KCONFORM_CACHE", str(tmp_path))
    assert go_build.built_releases("franz-go") == []
    for release in ("1.21.10", "1.18.0", "1.21.3"):
        directory = go_build.build_for("franz-go", release).directory()
        directory.mkdir(parents=True)
        (directory / buildcache.STAMP).write_text("built in 1.0 s\n")
    go_build.build_for("franz-go", "1.20.7").directory().mkdir(parents=True)  # an unfinished build
    assert go_build.built_releases("franz-go") == ["1.18.0", "1.21.3", "1.21.10"]
    assert go_build.built_releases("sarama") == []


def test_registry_accepts_go_clients_at_a_release_beside_the_fixed_clients():
    assert "franz-go@1.21.3" in CLIENTS and "sarama@1.60.0" in CLIENTS
    assert "franz-go@1.21" not in CLIENTS and "kafkajs@2.2.4" not in CLIENTS
    spec = CLIENTS["franz-go@1.21.3"]
    assert spec.name == "franz-go@1.21.3" and spec.version() == "1.21.3"
    assert "github.com/twmb/franz-go@v1.21.3" in spec.description
    assert CLIENTS.get("franz-go@x") is None and CLIENTS["sarama@1.60.0"].version() == "1.60.0"
    with pytest.raises(KeyError):
        CLIENTS["franz-go@x"]
    assert "franz-go@1.21.3" not in list(CLIENTS) and "franz-go@1.21.3" not in availability()
    assert spec.features == frozenset()  # group features are measured for the pinned clients only
    assert {"franz-go@VERSION", "sarama@VERSION", "java@VERSION"} <= set(VERSIONED_FORMS)


def test_a_franz_go_regression_runs_with_franz_go_and_its_releases_only():
    reg = RegressionDef(key="franz-go#1359", component="franz-go", affected="<= 1.21.5", fixed="1.21.6", summary="s")
    case = Case(id="regressions/franz-go-1359", title="t", path="p", regression=reg)
    assert case.not_for_client("franz-go") is None and case.not_for_client("franz-go@1.21.5") is None
    assert "franz-go#1359" in case.not_for_client("sarama") and case.not_for_client("sarama@1.60.0")
