"""Pairing a transcript's responses with their requests."""
from __future__ import annotations

from typing import Any, Generic, TypeVar


_T = TypeVar("_T")


class Asked(Generic[_T]):
    """What each request of a transcript asked, kept until its response: Kafka answers in order
    per connection, a response naming its request by correlation id, so (connection,
    correlation id) pairs them. A judge that reads both sides (the batches a Produce sent and
    the errors it got, the group a JoinGroup named and the generation it was given) keeps here
    what it needs from the request."""

    def __init__(self) -> None:
        self._asked: dict[tuple[Any, Any], _T] = {}

    def ask(self, line: dict, what: _T) -> None:
        """Remember ``what`` for the request ``line``."""
        self._asked[(line.get("conn"), line.get("correlation_id"))] = what

    def answered(self, line: dict, default: _T | None = None) -> _T | None:
        """What the request that the response ``line`` answers asked (``default`` when the
        request was not seen or not kept); forgotten then."""
        return self._asked.pop((line.get("conn"), line.get("correlation_id")), default)
