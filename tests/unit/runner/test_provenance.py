"""What run.json and the compatibility page say made a run (conformance/provenance.py): the
command line as typed, with no path of this machine in it -- a page committed to a repository or
a report a vendor publishes must not say `--results /tmp/mx/run1` -- and kconform's version."""
from __future__ import annotations

import os
from pathlib import Path

from conformance.provenance import command_line, environment, kconform_version, portable_path


def test_paths_under_the_working_directory_stay_relative_others_keep_their_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").mkdir()
    assert portable_path(str(tmp_path / "results" / "run1")) == os.path.join("results", "run1")
    assert portable_path("/tmp/mx/run1") == "run1"
    assert portable_path("results/x") == "results/x"
    assert portable_path(os.path.expanduser("~/work/r2")) == "r2"
    assert portable_path(str(tmp_path)) == "."


def test_the_command_line_names_no_machine_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["/root/.cache/kconform/venv/bin/kconform", "run", "--target", "kfake", "--results", "/tmp/mx/run1",
            f"--junit={tmp_path}/out/j.xml", "--case", "txn/*", "--baseline", str(Path.home() / "bl")]
    line = command_line(argv)
    assert line == "kconform run --target kfake --results run1 --junit=out/j.xml --case 'txn/*' --baseline bl"
    assert "/tmp" not in line and "/root" not in line


def test_versions():
    v = kconform_version()
    assert v.split()[0] == "0.1.0" or v == "unknown"
    env = environment()
    assert env["kconform"] == v and env["python"].count(".") == 2
