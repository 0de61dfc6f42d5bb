"""Synthesized responses: the proxy answering a request in the broker's place.

Why: to classify how a client reacts to "the coordinator answered X" (S26, EndTxn errors), the
error must reach the client exactly as a broker would send it, while the broker never sees the
request -- so the same case means the same thing on every target, including Apache Kafka, whose
coordinator cannot be told to fail. The response is built with the project's codec from Kafka's
own message schemas: Kafka's defaults for every field (throttle 0, ProducerId -1, ...), the
given top-level ``ErrorCode``, the response header version Kafka uses for that request version,
and the request's correlation id.

Only responses whose schema has a top-level ``ErrorCode`` at the negotiated version can be
synthesized (EndTxn, InitProducerId, AddOffsetsToTxn; FindCoordinator v0-3, OffsetFetch v2-7,
AddPartitionsToTxn v4+). Errors that live per partition need the request's contents mirrored,
which this module does not do.
"""

from __future__ import annotations

from functools import cache

from broker_impl.codec import API_BY_KEY, Errors

ERROR_FIELD = "error_code"


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
def answerable_versions(api_key: int) -> frozenset[int]:
    """Versions of this API whose response has a top-level ErrorCode (empty: none)."""
    api = API_BY_KEY.get(api_key)
    if api is None:
        return frozenset()
    field = next((f for f in api.response.spec.root.fields if f.attr == ERROR_FIELD), None)
    if field is None:
        return frozenset()
    return frozenset(v for v in range(api.min_version, api.max_version + 1)
                     if v in field.versions and v in api.response.spec.valid)


def can_answer(api_key: int | None, version: int | None) -> bool:
    return api_key is not None and version is not None and version in answerable_versions(api_key)


def synthesize_response(api_key: int, version: int, correlation_id: int, error: int | str) -> bytes:
    """The whole response frame (size prefix included) a broker would send with this error."""
    if not can_answer(api_key, version):
        raise AnswerError(f"API {api_key} v{version}: the response has no top-level ErrorCode")
    api = API_BY_KEY[api_key]
    resp = api.Response()
    setattr(resp, ERROR_FIELD, error_code_of(error))
    return api.response_frame(version, correlation_id, resp)
