"""Builds the Go client drivers (``conformance/clients/go``: franz-go and Sarama) into the cache.

One Go module, one binary (``kconform-go-driver``): both drivers share the protocol loop, so one
build serves both, with the argument naming the driver. The build is conformance/buildcache's Go
preset: go.mod, go.sum and the .go files are copied to ``$KCONFORM_CACHE/go-drivers/<digest>/`` and
built there; modules resolve from the Go module proxy into ``~/go/pkg/mod`` as go.sum pins them.
This module knows only what is Go-specific: the pinned library versions (read from go.mod, so the
version reported never disagrees with what is linked) and the driver's command line.

Clients at other releases: ``franz-go@VERSION`` (``franz-go@1.21.5``) and ``sarama@VERSION`` are
the same driver source built against that release of the library, one cache directory per release
(``$KCONFORM_CACHE/go-drivers@franz-go@1.21.5/<digest>/``), built on first use under the build
cache's lock. The repository's go.mod is never touched: the build copies it and, in the copy, runs
``go get MODULE@vVERSION`` (which downgrades what requires a newer one, kadm for franz-go) and, for
franz-go, ``go get`` of the kmsg that release itself requires (an old kgo never speaks a newer
kmsg's request versions), builds with -mod=readonly, and checks the binary links the release. Sources
an old release cannot compile are version-gated by build tags the build passes
(``franzgo_pre_1_22``: kmsg before v1.14, see internal/franzgo/kmsg_*.go).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from conformance import buildcache
from conformance.clients.protocol import OPS

GO_SRC = Path(__file__).resolve().parent / "go"
BINARY = "kconform-go-driver"
BUILD = buildcache.go("go-drivers", GO_SRC, output=BINARY)

#: client key -> the Go module whose version go.mod pins for it
MODULES = {"franz-go": "github.com/twmb/franz-go", "sarama": "github.com/IBM/sarama"}


def module_version(client: str) -> str:
    """The version go.mod requires of the client's library, without the leading 'v'."""
    module = MODULES[client]
    match = re.search(rf"^\s*{re.escape(module)}\s+v(\S+)", (GO_SRC / "go.mod").read_text(), re.MULTILINE)
    if not match:
        raise buildcache.BuildError(f"go.mod does not require {module}")
    return match.group(1)


#: A release as the Go module proxy names them, without the leading v (one name per build): 1.21.5, 1.0.0-rc1.
_RELEASE = re.compile(r"\d+\.\d+\.\d+(?:-[A-Za-z0-9.]+)?")
#: Build tags per client: (tag, the first release that no longer needs it).
_TAGS = {"franz-go": (("franzgo_pre_1_22", (1, 22, 0)),), "sarama": (("sarama_pre_1_60_1", (1, 60, 1)),)}


def release_of(name: str) -> tuple[str, str] | None:
    """(client, release) a client name asks for: ``franz-go@1.21.5`` -> ("franz-go", "1.21.5"); None
    for any name not of that form (``franz-go`` itself included). ValueError for ``franz-go@`` or
    ``sarama@`` followed by something that is no release number."""
    client, at, release = name.partition("@")
    if not at or client not in MODULES:
        return None
    if not _RELEASE.fullmatch(release):
        raise ValueError(f"{name!r}: expected {client}@MAJOR.MINOR.PATCH (a release of {MODULES[client]} without its v, "
                         f"e.g. {client}@{'1.21.5' if client == 'franz-go' else '1.60.0'})")
    return client, release


def _numbers(release: str) -> tuple[int, ...]:
    return tuple(int(x) for x in release.split("-", 1)[0].split("."))


def build_tags(client: str, release: str) -> list[str]:
    """The build tags the driver source needs to compile against `release` of `client`."""
    return [tag for tag, until in _TAGS[client] if _numbers(release) < until]


def _script(client: str, release: str) -> str:
    """The shell script of a versioned build, run in the build directory (a copy of the sources)."""
    module, v = MODULES[client], f"v{release}"
    lines = ["set -eu", f"go get {shlex.quote(f'{module}@{v}')}"]
    if client == "franz-go":
        kmsg = f"{module}/pkg/kmsg"
        # the kmsg the release requires: its edge in the module graph
        lines.append(f"kmsg=$(go mod graph | awk '$1 == \"{module}@{v}\" && index($2, \"{kmsg}@\") == 1 "
                     f"{{ sub(/.*@/, \"\", $2); print $2 }}')")
        lines.append(f'if [ -n "$kmsg" ]; then go get "{kmsg}@$kmsg"; fi')
    tags = build_tags(client, release)
    # -mod=readonly: the build must not add or move a requirement (a module `go get` removed for
    # want of a release old enough -- kadm before franz-go 1.15 -- would come back at its newest and
    # pull the newest library with it); then the binary itself must link the release.
    lines.append(f"go build -mod=readonly {'-tags ' + ','.join(tags) + ' ' if tags else ''}-o {BINARY} .")
    lines.append(f"linked=$(go version -m {BINARY} | awk '$1 == \"dep\" && $2 == \"{module}\" {{ print $3 }}')")
    lines.append(f'if [ "$linked" != "{v}" ]; then echo "the driver links {module} $linked, not {v}"; exit 1; fi')
    return "\n".join(lines)


def build_for(client: str, release: str | None = None):
    """The build of the driver against `release` of `client`'s library (None: go.mod's pin, BUILD)."""
    if release is None:
        return BUILD
    if client not in MODULES or not _RELEASE.fullmatch(release):
        raise ValueError(f"{client}@{release} is no release of a Go client ({', '.join(MODULES)})")
    base = buildcache.go(f"go-drivers@{client}@{release}", GO_SRC, output=BINARY)
    return buildcache.Build(base.kind, base.source_dir, base.patterns, ("sh", "-c", _script(client, release)),
                            tools=base.tools, env=base.env, products=base.products, timeout=base.timeout)


def built_releases(client: str) -> list[str]:
    """The releases a ``client@VERSION`` driver is already built for in the cache (for listings)."""
    found = set()
    for kind_dir in buildcache.cache_root().glob(f"go-drivers@{client}@*"):
        release = kind_dir.name.rsplit("@", 1)[1]
        if _RELEASE.fullmatch(release) and build_for(client, release).is_built():
            found.add(release)
    return sorted(found, key=_numbers)


def binary(client: str | None = None, release: str | None = None) -> Path:
    """The driver binary (against `release` of `client`'s library); builds first if needed
    (BuildError with the log tail on failure)."""
    return build_for(client or "franz-go", release).ensure() / BINARY


def command(client: str, release: str | None = None) -> list[str]:
    """The command that runs ``client``'s driver (at `release`): the op list goes along, defined
    once (ops.yaml)."""
    return [str(binary(client, release)), client, f"--ops={','.join(OPS)}"]
