"""The Kafka codec as the rest of kconform uses it: the one module conformance/, reports/ and
bench/ import from broker_impl (besides starting the broker).

Why one door: the codec (generated from Kafka's JSON schemas), the error table, framing and
frame naming live in broker_impl/protocol/ because the broker needs them, and their module
layout is the broker's business. Outsiders see only the names below, so that layout can change
without touching the proxy, the runner or the reports.

- the APIs: ``API[name]`` / ``API_BY_KEY[key]`` (:class:`Api`: request/response codecs, versions,
  ``request_frame`` / ``response_frame`` for whole frames), ``REQUEST_HEADER`` / ``RESPONSE_HEADER``;
- record batches: ``build_batch`` (the v2 batch a Produce request carries), ``batch_headers``
  (the headers of the batches in a records field: producer id, epoch, base sequence, ...),
  ``decode_records`` (the records of one whole batch);
- wire primitives: ``uvarint_bytes`` (Kafka's unsigned varint, for hand-made frames);
- errors: ``ERROR_TABLE`` (Kafka's table: code, name, Java exception, retriable), the ``Errors``
  enum made from it, ``error_name(code)`` / ``error_code(name)``; ``ProtocolError`` for bytes
  that do not follow the schema;
- framing: ``read_frame`` (one frame off a blocking socket), ``FrameBuffer`` (a stream cut into
  frames), ``frame_end``, ``FrameError``, ``SIZE``, ``MAX_FRAME_BYTES``, ``ANY_SIZE``,
  ``idle_connection_closed`` (a kept connection the other side ended);
- ``KAFKA_INTERNAL_TOPICS``: the topic names that are Kafka's own, never a case's;
- naming frames: ``FrameInfo``, ``request_info`` / ``response_info`` (headers only), ``sasl_token_span``,
  ``read_errors`` (a response's error codes), ``ConnectionDecoder`` (a recorded connection).
"""

from __future__ import annotations

import importlib
from typing import Any

#: Each name of the door -> (its module under broker_impl, its name there). Loaded on first use:
#: a client driver needs the error table only, and the generated message classes cost a tenth
#: of a second to import in each of the ~1,000 driver processes of a library run.
_EXPORTS: dict[str, tuple[str, str]] = {
    **{name: ("protocol.messages", name) for name in ("API", "API_BY_KEY", "REQUEST_HEADER", "RESPONSE_HEADER", "Api")},
    "batch_headers": ("log.records", "iter_batch_headers"),
    "build_batch": ("log.records", "build_batch"),
    "decode_records": ("log.records", "decode_records"),
    "uvarint_bytes": ("protocol.codegen", "uvarint_bytes"),
    "ProtocolError": ("protocol.codegen", "ProtocolError"),
    **{name: ("protocol.errors", name) for name in ("ERROR_TABLE", "ErrorSpec", "Errors", "error_code", "error_name")},
    **{name: ("protocol.framing", name)
       for name in ("ANY_SIZE", "MAX_FRAME_BYTES", "SIZE", "FrameBuffer", "FrameError", "frame_end", "read_frame",
                    "idle_connection_closed")},
    "KAFKA_INTERNAL_TOPICS": ("cluster.topics", "KAFKA_INTERNAL_TOPICS"),
    **{name: ("protocol.frame_info", name)
       for name in ("ConnectionDecoder", "FrameInfo", "read_errors", "request_info", "response_info", "sasl_token_span")},
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    try:
        module, attr = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"broker_impl.{module}"), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
