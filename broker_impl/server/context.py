"""What a handler knows about the request it is answering."""

from __future__ import annotations

from dataclasses import dataclass

from ..protocol.messages import Api


@dataclass(slots=True)
class RequestContext:
    api: Api
    version: int
    correlation_id: int
    client_id: str | None
    peer: str
    connection_id: int
    #: who the connection authenticated as (server/authenticator): ``User:NAME``, ``User:ANONYMOUS``
    principal: str = "User:ANONYMOUS"
