"""The API registry: every Kafka API as generated request/response codecs.

``API[name]`` / ``API_BY_KEY[key]`` give an :class:`Api` with its request
and response :class:`~.codegen.Codec`, its valid versions, and the header
versions Kafka uses for it. Classes are reachable as ``Api.Request`` and
``Api.Response`` (e.g. ``API["Produce"].Response``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .codegen import Codec
from .schema import MessageSpec, load_all

_INT32 = struct.Struct(">i")


@dataclass
class Api:
    key: int
    name: str                # "Produce"
    request: Codec
    response: Codec

    @property
    def Request(self):  # noqa: N802 - a class
        return self.request.cls

    @property
    def Response(self):  # noqa: N802 - a class
        return self.response.cls

    @property
    def min_version(self) -> int:
        return self.request.spec.valid.lo

    @property
    def max_version(self) -> int:
        return min(self.request.spec.valid.hi, self.response.spec.valid.hi)

    def is_flexible(self, version: int) -> bool:
        return version in self.request.spec.flexible

    def request_header_version(self, version: int) -> int:
        """Request header v2 for flexible versions, else v1 (Kafka's rule)."""
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        """Response header v1 for flexible versions, else v0.

        ApiVersions always answers with header v0, so that a client that
        sent a version the broker does not know can still read the error.
        """
        if self.key == 18:
            return 0
        return 1 if version in self.response.spec.flexible else 0

    def request_frame(self, version: int, correlation_id: int, client_id: str | None, body) -> bytes:
        """A whole request as it goes on the wire: size prefix, request header, body."""
        parts: list[bytes] = [b""]
        hdr = REQUEST_HEADER.cls(request_api_key=self.key, request_api_version=version,
                                 correlation_id=correlation_id, client_id=client_id)
        REQUEST_HEADER.encode_into(self.request_header_version(version), hdr, parts.append)
        self.request.encode_into(version, body, parts.append)
        parts[0] = _INT32.pack(sum(map(len, parts)))
        return b"".join(parts)

    def response_frame(self, version: int, correlation_id: int, body) -> bytes:
        """A whole response: size prefix, response header, body -- joined in one copy, since
        the broker sends every answer through here and Fetch bodies are large."""
        parts: list[bytes] = [b""]
        hv = self.response_header_version(version)
        if hv == 0:
            parts.append(_INT32.pack(correlation_id))
        else:
            RESPONSE_HEADER.encode_into(hv, RESPONSE_HEADER.cls(correlation_id=correlation_id), parts.append)
        self.response.encode_into(version, body, parts.append)
        parts[0] = _INT32.pack(sum(map(len, parts)))
        return b"".join(parts)


def _build() -> tuple[dict[str, Api], dict[int, Api], dict[str, Codec]]:
    specs = load_all()
    by_name: dict[str, Api] = {}
    by_key: dict[int, Api] = {}
    others: dict[str, Codec] = {}
    for name, spec in specs.items():
        if spec.type == "request":
            base = name[: -len("Request")]
            resp = specs.get(base + "Response")
            if resp is None:
                continue
            api = Api(spec.api_key, base, Codec(spec), Codec(resp))
            by_name[base] = api
            by_key[spec.api_key] = api
        elif spec.type in ("header", "data"):
            others[name] = Codec(spec)
    return by_name, by_key, others


API, API_BY_KEY, DATA = _build()
REQUEST_HEADER: Codec = DATA["RequestHeader"]
RESPONSE_HEADER: Codec = DATA["ResponseHeader"]


def message_spec(name: str) -> MessageSpec:
    return load_all()[name]
