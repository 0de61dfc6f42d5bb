"""apps/tools.Tool: the JVM a tool runs in gets a java.io.tmpdir of its own, removed once the
process has ended -- Flink's MiniCluster and Kafka's test utilities otherwise leave theirs in /tmp
at every run. A real JVM (a source-file program) writes into it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conformance.apps.tools import Tool

PROBE = """
public class Probe {
    public static void main(String[] args) throws Exception {
        java.nio.file.Path dir = java.nio.file.Paths.get(System.getProperty("java.io.tmpdir"));
        java.nio.file.Files.createTempFile(dir, "flink-rpc-akka", ".jar");
        System.out.println("{\\"tmpdir\\": \\"" + dir + "\\"}");
    }
}
"""


@pytest.mark.skipif(shutil.which("java") is None, reason="no java on PATH")
def test_a_tools_tmpdir_is_its_own_and_removed_when_it_ends(tmp_path):
    source = tmp_path / "kconform.probe.Probe.java"      # dots: Tool takes it for a full name
    source.write_text(PROBE)
    tool = Tool("", str(source), [], tmp_path, "probe")
    assert tool.wait(60) == 0, (tmp_path / "probe.stderr").read_text()
    written = Path(json.loads(tool.lines[-1])["tmpdir"])
    assert written == tool.tmpdir and written.name.startswith("kconform-probe-")
    assert not written.exists()                        # removed with what the JVM wrote
