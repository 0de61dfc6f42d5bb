"""What a handler knows about the request it is answering."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

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
    #: Runs a callable once this request's response is on its way to the client (handed to the
    #: socket, or the client gone); None where nothing is written (requests answered in process,
    #: tests), and there the caller runs it at once. Why: Kafka's TransactionCoordinator answers
    #: EndTxn (responseCallback) *before* it hands the markers over (addTxnMarkersToSend), so a
    #: coordinator that dies after completing the transaction has answered its client; a task
    #: started before the answer was written could win the race to the crash on a TLS stream,
    #: whose write yields to the scheduler.
    after_response: Callable[[Callable[[], object]], None] | None = None
