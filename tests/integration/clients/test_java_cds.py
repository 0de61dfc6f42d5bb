"""The Java driver's class-data archive (conformance/clients/java_cds.py): made from a real training
session against the embedded broker, used by the driver's command, and never in the way -- a
build it cannot be made for runs the driver as before and says why."""
from __future__ import annotations

import pytest

from conformance.clients import java_build, java_cds
from conformance.clients.process import ClientProcess


@pytest.fixture(scope="module")
def command() -> list[str]:
    missing = java_build.tools_missing()
    if missing:
        pytest.skip(f"{', '.join(missing)} not on PATH")
    return java_build.java_command()


def test_the_driver_maps_its_classes_from_the_archive(command):
    assert any(arg.startswith("-XX:SharedArchiveFile=") for arg in command), command
    # -Xshare:on makes the JVM refuse to start when it cannot map the archive (a class path that
    # is not the archive's, a stale or truncated file) instead of ignoring it as :auto does.
    strict = ["-Xshare:on" if arg == "-Xshare:auto" else arg for arg in command]
    driver = ClientProcess("java", command=strict, label="java-cds-strict").start()
    try:
        assert driver.hello["client"] == "java"
    finally:
        driver.close()


def test_a_build_without_a_jar_runs_without_an_archive(tmp_path):
    (tmp_path / "target" / "classes").mkdir(parents=True)
    assert java_cds.archive_for(tmp_path, ["java"], java_build.MAIN_CLASS) is None
    reason = (tmp_path / java_cds.DIRECTORY / java_cds.UNAVAILABLE).read_text()
    assert "no packaged driver jar" in reason
