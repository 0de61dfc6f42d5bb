"""Kafka client drivers: real client libraries in their own processes behind one JSON-lines protocol.

Runner-side API::

    from conformance.clients import ClientProcess, CLIENTS, Outcome
    with ClientProcess("java") as producer:          # starts the driver, waits for hello
        producer.call("create_producer", config={...})
        outcome = producer.call("init_transactions", deadline_ms=10_000)

See ``protocol`` for the wire format and the op list, README.md for both in prose.
"""

from conformance.clients.process import ClientProcess, DriverStartError
from conformance.clients.protocol import OPS, ErrorInfo, Outcome
from conformance.clients.registry import CLIENTS, ClientSpec, availability

__all__ = ["CLIENTS", "OPS", "ClientProcess", "ClientSpec", "DriverStartError", "ErrorInfo", "Outcome",
           "availability"]
