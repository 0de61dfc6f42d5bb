"""SaslHandshake (17) and SaslAuthenticate (36) after authentication, as Kafka's KafkaApis answers
them: the exchange itself runs before any request reaches a handler (server/authenticator), so
one that arrives here is out of place -- on a PLAINTEXT or SSL listener, or a second exchange
on a SASL connection that is not a re-authentication (KIP-368: a session without a lifetime, or
within a second of the last one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import handles
from ..protocol.errors import Errors

if TYPE_CHECKING:
    from ..server.broker import Broker


@handles("SaslHandshake")
async def handle_sasl_handshake(broker: Broker, ctx, req):
    return ctx.api.Response(error_code=Errors.ILLEGAL_SASL_STATE, mechanisms=[])


@handles("SaslAuthenticate")
async def handle_sasl_authenticate(broker: Broker, ctx, req):
    return ctx.api.Response(error_code=Errors.ILLEGAL_SASL_STATE,
                            error_message="SaslAuthenticate request received after successful authentication",
                            auth_bytes=b"", session_lifetime_ms=0)
