"""conformance.buildcache: real builds (tiny commands) into a temporary cache."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conformance import buildcache
from conformance.buildcache import Build, BuildError

pytestmark = pytest.mark.timeout(120)

#: A build command: appends one line to COUNT (outside the build directory, so it survives
#: the build directory being emptied), waits SLEEP seconds, then writes out.txt from in.txt.
BUILD_PY = textwrap.dedent("""
    import os, sys, time
    with open(os.environ["COUNT"], "a") as f:
        f.write("built\\n")
    time.sleep(float(os.environ.get("SLEEP", "0")))
    print("building from", open("in.txt").read().strip())
    if os.environ.get("FAIL"):
        print("the compiler says no"); sys.exit(3)
    open("out.txt", "w").write(open("in.txt").read().upper())
""")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("KCONFORM_CACHE", str(root))
    return root


def source(tmp_path: Path, text: str) -> Path:
    """A source directory holding in.txt."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "in.txt").write_text(text)
    return src


def make_build(src: Path, count: Path, **env) -> Build:
    (src / "build.py").write_text(BUILD_PY)
    return Build("thing", src, ("in.txt", "build.py"), (sys.executable, "build.py"),
                 env={"COUNT": str(count), **env}, products=("out.txt",))


def builds(count: Path) -> int:
    return len(count.read_text().splitlines()) if count.exists() else 0


def test_builds_once_into_the_cache(cache, tmp_path):
    src = source(tmp_path, "hello\n")
    (src / "unrelated.md").write_text("not a source")
    count = tmp_path / "count"
    build = make_build(src, count)
    assert not build.is_built() and build.build_seconds() is None
    out = build.ensure()
    assert out == cache / "thing" / build.digest()
    assert (out / "out.txt").read_text() == "HELLO\n"
    assert not (out / "unrelated.md").exists(), "only the files the patterns name are copied"
    assert "building from hello" in (out / buildcache.LOG).read_text()
    assert build.is_built() and build.build_seconds() is not None
    assert build.ensure() == out
    assert builds(count) == 1, "an unchanged source is not built again"


def test_changed_source_is_rebuilt_beside_the_old_build(cache, tmp_path):
    src = source(tmp_path, "one\n")
    count = tmp_path / "count"
    build = make_build(src, count)
    first = build.ensure()
    (src / "in.txt").write_text("two\n")
    assert not build.is_built()
    second = build.ensure()
    assert second != first
    assert (second / "out.txt").read_text() == "TWO\n"
    assert (first / "out.txt").read_text() == "ONE\n"
    assert builds(count) == 2
    # The command and its environment are part of the digest too.
    assert make_build(src, count, EXTRA="1").digest() != build.digest()


def test_parallel_processes_wait_for_one_build(cache, tmp_path):
    src = source(tmp_path, "shared\n")
    count = tmp_path / "count"
    make_build(src, count, SLEEP="1.5")  # writes build.py
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from conformance.buildcache import Build
        b = Build("thing", Path({str(src)!r}), ("in.txt", "build.py"), (sys.executable, "build.py"),
                  env={{"COUNT": {str(count)!r}, "SLEEP": "1.5"}}, products=("out.txt",))
        print(b.ensure())
    """)
    env = {**os.environ, "KCONFORM_CACHE": str(cache),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[3]),
                                                      os.environ.get("PYTHONPATH")]))}
    procs = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outs[0] == outs[1] and (Path(outs[0]) / "out.txt").read_text() == "SHARED\n"
    assert builds(count) == 1, "the second process waited on the lock and reused the first one's build"


def test_failed_build_says_why_and_is_retried(cache, tmp_path):
    src = source(tmp_path, "x\n")
    count = tmp_path / "count"
    build = make_build(src, count, FAIL="1")
    with pytest.raises(BuildError, match=r"(?s)exit 3.*the compiler says no"):
        build.ensure()
    assert not build.is_built()
    with pytest.raises(BuildError):
        build.ensure()
    assert builds(count) == 2, "a failed build leaves no stamp, so the next call builds again"


def test_missing_product_is_a_failed_build(cache, tmp_path):
    src = source(tmp_path, "x\n")
    build = Build("thing", src, ("in.txt",), (sys.executable, "-c", "print('made nothing')"), products=("bin",))
    with pytest.raises(BuildError, match=r"(?s)left no bin.*made nothing"):
        build.ensure()
    assert not build.is_built()


def test_timeout_kills_the_build(cache, tmp_path):
    src = source(tmp_path, "x\n")
    build = Build("thing", src, ("in.txt",), (sys.executable, "-c", "import time; time.sleep(60)"), timeout=1.0)
    t0 = time.monotonic()
    with pytest.raises(BuildError, match="took over 1 s"):
        build.ensure()
    assert time.monotonic() - t0 < 30


def test_missing_tool_is_named(cache, tmp_path):
    src = source(tmp_path, "x\n")
    build = Build("thing", src, ("in.txt",), ("no-such-compiler",), tools=("no-such-compiler",))
    assert build.tools_missing() == ["no-such-compiler"]
    with pytest.raises(BuildError, match="no-such-compiler not on PATH"):
        build.ensure()


def test_sources_skip_other_tools_output(tmp_path):
    src = tmp_path / "src"
    (src / "node_modules" / "dep").mkdir(parents=True)
    (src / "node_modules" / "dep" / "index.js").write_text("dependency")
    (src / "main.js").write_text("driver")
    (src / "package.json").write_text("{}")
    (src / "package-lock.json").write_text("{}")
    assert [p.name for p in buildcache.npm("node-thing", src).sources()] == [
        "main.js", "package-lock.json", "package.json"]


@pytest.mark.skipif(shutil.which("go") is None, reason="needs go")
def test_go_build_of_a_module(cache, tmp_path):
    src = tmp_path / "gosrc"
    src.mkdir()
    (src / "go.mod").write_text("module example.com/hello\n\ngo 1.21\n")
    (src / "main.go").write_text('package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello from go") }\n')
    build = buildcache.go("go-hello", src, output="hello")
    assert "-mod=mod" in build.env["GOFLAGS"]
    out = build.ensure()
    run = subprocess.run([str(out / "hello")], capture_output=True, text=True, timeout=30)
    assert run.stdout == "hello from go\n"
