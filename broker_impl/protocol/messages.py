"""The API registry: every Kafka API as generated request/response codecs.

``API[name]`` / ``API_BY_KEY[key]`` give an :class:`Api` with its request
and response :class:`~.codegen.Codec`, its valid versions, and the header
versions Kafka uses for it. Classes are reachable as ``Api.Request`` and
``Api.Response`` (e.g. ``API["Produce"].Response``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .codegen import Codec
from .schema import MessageSpec, load_all


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
