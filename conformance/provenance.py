"""What made a run: the command line as typed (without this machine's paths) and the versions of
kconform and Python -- recorded in run.json so that the compatibility page and CI reports say
how to make the same run again.

Why no machine paths: a page committed to a repository, or a report a vendor publishes, must
not say `--results /tmp/mx/run1` or `/home/ci/work/...`: the path means nothing anywhere else,
and it is a detail of someone's machine. A path under the working directory is written relative
to it; any other absolute path by its last component (`run1`).
"""
from __future__ import annotations

import functools
import os
import platform
import shlex
import subprocess
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def portable_path(value: str | os.PathLike) -> str:
    """`value` as a command line may show it: relative to the working directory when inside it,
    else its last component when absolute (or under ~); a relative path as given."""
    text = os.fspath(value)
    expanded = os.path.expanduser(text)
    if not os.path.isabs(expanded):
        return text
    path = Path(expanded)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve())) or "."
    except ValueError:
        return path.name or text


def _portable_arg(arg: str) -> str:
    if arg.startswith("--") and "=" in arg:
        opt, _, value = arg.partition("=")
        return f"{opt}={_portable_arg(value)}"
    if arg.startswith(("/", "~")):
        return portable_path(arg)
    return arg


def command_line(argv: list[str], prog: str = "kconform") -> str:
    """The command `argv` (sys.argv: the program first) as one shell line, the program named
    `prog` and every path portable (module doc)."""
    return shlex.join([prog] + [_portable_arg(a) for a in argv[1:]])


@functools.cache
def kconform_version() -> str:
    """`0.1.0 (git 3b3b087)`: the package version and, in a git checkout, the commit (with
    `+dirty` when the tree has changes)."""
    try:
        version = metadata.version("kconform")
    except metadata.PackageNotFoundError:
        version = "unknown"
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, timeout=5)
        if commit.returncode != 0:
            return version
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5)
        mark = "+dirty" if dirty.returncode == 0 and dirty.stdout.strip() else ""
        return f"{version} (git {commit.stdout.strip()}{mark})"
    except (OSError, subprocess.SubprocessError):
        return version


def environment() -> dict[str, str]:
    """The versions run.json records beside the command line."""
    return {"kconform": kconform_version(), "python": platform.python_version(),
            "platform": f"{platform.system()} {platform.machine()}"}
