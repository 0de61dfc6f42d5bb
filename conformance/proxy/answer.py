"""Synthesized responses: the proxy answering a request in the broker's place.

Why: to classify how a client reacts to "the coordinator answered X" (S26, EndTxn errors), the
error must reach the client exactly as a broker would send it, while the broker never sees the
request -- so the same case means the same thing on every target, including Apache Kafka, whose
coordinator cannot be told to fail. The response is built with the project's codec from Kafka's
own message schemas: Kafka's defaults for every field (throttle 0, ProducerId -1, ...), the
given top-level ``ErrorCode``, the response header version Kafka uses for that request version,
and the request's correlation id.

Where the response has a top-level ``ErrorCode`` at the negotiated version (EndTxn,
InitProducerId, AddOffsetsToTxn; FindCoordinator v0-3, OffsetFetch v2-7, AddPartitionsToTxn v4+)
that is where the error goes. Where errors live per partition (Produce, TxnOffsetCommit,
OffsetCommit, AddPartitionsToTxn v0-3), the request is decoded and mirrored: one result for
every topic and partition it named, each carrying the error -- as Kafka answers a request whose
every partition failed the same way (a fenced producer, a coordinator that moved).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from broker_impl.codec import API_BY_KEY, REQUEST_HEADER, Errors, ProtocolError

ERROR_FIELD = "error_code"


@dataclass(frozen=True)
class Mirror:
    """Where a request names its partitions and where its response answers each one."""

    versions: range
    req_topics: str
    req_partitions: str
    req_index: str | None  # None: the request's partitions are a list of numbers
    resp_topics: str
    resp_partitions: str
    resp_index: str
    resp_error: str
    #: Fields of a failed partition's answer other than the error (Kafka's values for a failure).
    failed: tuple[tuple[str, int], ...] = ()


#: Responses whose errors live per partition: the answer mirrors the request (module doc).
MIRRORS: dict[str, Mirror] = {
    "Produce": Mirror(range(0, 1 << 15), "topic_data", "partition_data", "index",
                      "responses", "partition_responses", "index", "error_code",
                      failed=(("base_offset", -1),)),
    "TxnOffsetCommit": Mirror(range(0, 1 << 15), "topics", "partitions", "partition_index",
                              "topics", "partitions", "partition_index", "error_code"),
    "OffsetCommit": Mirror(range(0, 1 << 15), "topics", "partitions", "partition_index",
                           "topics", "partitions", "partition_index", "error_code"),
    "AddPartitionsToTxn": Mirror(range(0, 4), "v3_and_below_topics", "partitions", None,
                                 "results_by_topic_v3_and_below", "results_by_partition", "partition_index",
                                 "partition_error_code"),
}
#: What names a topic in both a request and its response (a name, or an id from Produce v13).
TOPIC_KEYS = ("name", "topic_id")


class AnswerError(ValueError):
    """The response cannot be synthesized (unknown error, no top-level ErrorCode)."""


def error_code_of(error: int | str) -> int:
    """Kafka's wire code for an error given by name (``NOT_COORDINATOR``) or number."""
    if isinstance(error, bool):
        raise AnswerError(f"an error name or code, not {error!r}")
    if isinstance(error, int):
        try:
            return int(Errors(error))
        except ValueError:
            raise AnswerError(f"unknown Kafka error code {error}") from None
    s = str(error).strip()
    if s.lstrip("-").isdigit():
        return error_code_of(int(s))
    try:
        return int(Errors[s.upper()])
    except KeyError:
        raise AnswerError(f"unknown Kafka error {error!r} (Kafka's Errors enum name)") from None


@cache
def top_level_versions(api_key: int) -> frozenset[int]:
    """Versions of this API whose response has a top-level ErrorCode (empty: none)."""
    api = API_BY_KEY.get(api_key)
    if api is None:
        return frozenset()
    field = next((f for f in api.response.spec.root.fields if f.attr == ERROR_FIELD), None)
    if field is None:
        return frozenset()
    return frozenset(v for v in range(api.min_version, api.max_version + 1)
                     if v in field.versions and v in api.response.spec.valid)


@cache
def answerable_versions(api_key: int) -> frozenset[int]:
    """Versions of this API the proxy can answer: a top-level ErrorCode, or per-partition
    errors mirrored from the request (MIRRORS)."""
    api = API_BY_KEY.get(api_key)
    if api is None:
        return frozenset()
    mirror = MIRRORS.get(api.name)
    mirrored = {v for v in range(api.min_version, api.max_version + 1)
                if mirror is not None and v in mirror.versions and v in api.response.spec.valid}
    return frozenset(top_level_versions(api_key) | mirrored)


def can_answer(api_key: int | None, version: int | None) -> bool:
    return api_key is not None and version is not None and version in answerable_versions(api_key)


def synthesize_response(api_key: int, version: int, correlation_id: int, error: int | str,
                        request: bytes | None = None) -> bytes:
    """The whole response frame (size prefix included) a broker would send with this error.
    ``request``: the request frame (size prefix included), mirrored where errors are per partition."""
    if not can_answer(api_key, version):
        raise AnswerError(f"API {api_key} v{version}: the proxy cannot answer this version")
    api = API_BY_KEY[api_key]
    resp = api.Response()
    code = error_code_of(error)
    if version in top_level_versions(api_key):
        setattr(resp, ERROR_FIELD, code)
    else:
        if request is None:
            raise AnswerError(f"{api.name} v{version}: errors are per partition, the request is needed to mirror")
        _mirror(api, version, request, resp, MIRRORS[api.name], code)
    return api.response_frame(version, correlation_id, resp)


def _field(spec, attr: str):
    return next(f for f in spec.fields if f.attr == attr)


def _mirror(api, version: int, request: bytes, resp, mirror: Mirror, code: int) -> None:
    """Every topic and partition of the request, answered with ``code`` (module doc)."""
    try:
        _, pos = REQUEST_HEADER.decode(api.request_header_version(version), request, 4)
        req, _ = api.request.decode(version, request, pos)
    except (ProtocolError, ValueError, IndexError) as exc:
        raise AnswerError(f"{api.name} v{version}: the request cannot be read to mirror it ({exc})") from None
    topic_spec = _field(api.response.spec.root, mirror.resp_topics).struct
    part_spec = _field(topic_spec, mirror.resp_partitions).struct
    topics = []
    for t in getattr(req, mirror.req_topics) or []:
        parts = []
        for p in getattr(t, mirror.req_partitions) or []:
            index = p if mirror.req_index is None else getattr(p, mirror.req_index)
            parts.append(api.response.classes[part_spec.name](
                **{mirror.resp_index: index, mirror.resp_error: code, **dict(mirror.failed)}))
        ident = {k: getattr(t, k) for k in TOPIC_KEYS
                 if any(f.attr == k for f in topic_spec.fields) and hasattr(t, k)}
        topics.append(api.response.classes[topic_spec.name](**ident, **{mirror.resp_partitions: parts}))
    setattr(resp, mirror.resp_topics, topics)
