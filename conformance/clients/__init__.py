"""Kafka client drivers: real client libraries in their own processes behind one JSON-lines protocol.

Runner-side API::

    from conformance.clients import ClientProcess, CLIENTS, Outcome
    with ClientProcess("java") as producer:          # starts the driver, waits for hello
        producer.call("create_producer", config={...})
        outcome = producer.call("init_transactions", deadline_ms=10_000)

See ``protocol`` for the wire format and the op list, README.md for both in prose.
"""

from __future__ import annotations

import importlib
from typing import Any

#: The runner-side names -> the module that defines them, imported on first use: a driver process
#: imports this package too (its modules live here), and the process and registry modules would
#: cost it a quarter of a second at every start without serving it.
_EXPORTS = {
    "ClientProcess": "process", "DriverStartError": "process",
    "OPS": "protocol", "ErrorInfo": "protocol", "Outcome": "protocol",
    "CLIENTS": "registry", "ClientSpec": "registry", "availability": "registry",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
