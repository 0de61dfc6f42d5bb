"""Which metadata mode, Scala build and cache directory each Kafka release gets."""
from __future__ import annotations

import pytest

from conformance.targets.kafka_releases import RELEASES, metadata_mode, release_of, scala_binary, version_tuple
from conformance.targets.maven import broker_artifact, kafka_home


def test_kraft_from_3_0_zookeeper_before():
    assert metadata_mode("2.8.2") == "zookeeper"
    assert metadata_mode("0.11.0.3") == "zookeeper"
    assert metadata_mode("3.0.2") == "kraft"
    assert metadata_mode("4.4.0") == "kraft"
    assert metadata_mode("3.5.2-zk") == "zookeeper"
    with pytest.raises(ValueError, match="no ZooKeeper mode"):
        metadata_mode("4.0.2-zk")


def test_the_scala_build_on_maven_central():
    assert broker_artifact("2.8.2") == "kafka_2.13"
    assert broker_artifact("2.4.1") == "kafka_2.13"
    assert broker_artifact("2.3.1") == "kafka_2.12"
    assert scala_binary("0.11.0.3") == "2.12"


def test_a_zookeeper_variant_shares_the_release_jars():
    assert release_of("3.5.2-zk") == "3.5.2"
    assert kafka_home("3.5.2-zk") == kafka_home("3.5.2")
    assert version_tuple("4.4.0-rc1") == (4, 4, 0)


def test_the_table_is_ordered_and_has_one_release_per_minor_line():
    versions = [version_tuple(r.version) for r in RELEASES]
    assert versions == sorted(versions)
    assert len({v[:2] for v in versions}) == len(versions)


def test_kafka_0_11_gets_the_jaxb_api_and_later_releases_do_not(tmp_path, monkeypatch):
    """0.11 exits at start on Java 17 without javax.xml.bind (measured); 1.0 starts without it.
    The resolution is recorded (Maven itself is not run: what it would copy is the question)."""
    from conformance.targets import maven

    asked: list[str] = []

    def fake_mvn(args, cwd, timeout):
        lib = cwd / "lib"
        lib.mkdir(exist_ok=True)
        if args[0] == "dependency:copy-dependencies":
            artifact = maven.broker_artifact(cwd.name)
            (lib / f"{artifact}-{cwd.name}.jar").write_bytes(b"")
            (lib / "slf4j-api-1.7.25.jar").write_bytes(b"")
        else:
            asked.append(args[1].split("=", 1)[1])

    monkeypatch.setattr(maven, "_mvn", fake_mvn)
    for version in ("0.11.0.3", "1.0.2"):
        home = tmp_path / version
        home.mkdir()
        asked.clear()
        maven._resolve_into(home, version, 10)
        assert (maven.JAXB_API in asked) == (version == "0.11.0.3"), (version, asked)
