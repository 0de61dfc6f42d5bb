"""Builds the Go client drivers (``conformance/clients/go``: franz-go and Sarama) into the cache.

One Go module, one binary (``kconform-go-driver``): both drivers share the protocol loop, so one
build serves both, with the argument naming the driver. The build is conformance/buildcache's Go
preset: go.mod, go.sum and the .go files are copied to ``$KCONFORM_CACHE/go-drivers/<digest>/`` and
built there; modules resolve from the Go module proxy into ``~/go/pkg/mod`` as go.sum pins them.
This module knows only what is Go-specific: the pinned library versions (read from go.mod, so the
version reported never disagrees with what is linked) and the driver's command line.
"""

from __future__ import annotations

import re
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


def binary() -> Path:
    """The driver binary; builds first if needed (BuildError with the log tail on failure)."""
    return BUILD.ensure() / BINARY


def command(client: str) -> list[str]:
    """The command that runs ``client``'s driver: the op list goes along, defined once (ops.yaml)."""
    return [str(binary()), client, f"--ops={','.join(OPS)}"]
