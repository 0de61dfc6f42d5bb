"""Builds the KafkaJS driver (``conformance/clients/kafkajs``) into the cache and says how to run it.

The build is conformance/buildcache's npm preset: package.json, package-lock.json (kafkajs pinned
by version and integrity) and the driver's .js files are copied to
``$KCONFORM_CACHE/kafkajs-driver/<digest>/`` and ``npm ci`` installs there, with the machine's
own npm config (registry, proxy, CA). This module knows only what is KafkaJS-specific: the pinned
version and the command.
"""

from __future__ import annotations

import json
from pathlib import Path

from conformance import buildcache
from conformance.clients.errors import error_table_file

KAFKAJS_SRC = Path(__file__).resolve().parent / "kafkajs"
BUILD = buildcache.npm("kafkajs-driver", KAFKAJS_SRC)


def kafkajs_version() -> str:
    """The kafkajs version the lock file pins (what the driver runs)."""
    lock = json.loads((KAFKAJS_SRC / "package-lock.json").read_text())
    return lock["packages"]["node_modules/kafkajs"]["version"]


def command() -> list[str]:
    """The command that runs the driver; builds first if needed."""
    return ["node", str(BUILD.ensure() / "driver.js"), "--errors", str(error_table_file())]
