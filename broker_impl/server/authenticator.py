"""Authentication of a connection before its requests reach the handlers: Kafka's
SaslServerAuthenticator for SASL listeners, nothing for PLAINTEXT and SSL ones (whose principal
is ANONYMOUS or the client certificate's subject: server/listeners).

Kafka's rules, from SaslServerAuthenticator and the SocketServer's Processor (apache/kafka
4.x), which this follows state by state:

- Before authenticating, a connection may send one ApiVersions (answered as usual), then a
  SaslHandshake. Any other request closes the connection without an answer ("Unexpected Kafka
  request of type METADATA during SASL handshake."), as does a second ApiVersions or a frame
  that is no Kafka request.
- SaslHandshake naming a mechanism that is not enabled is answered UNSUPPORTED_SASL_MECHANISM
  with the enabled mechanisms, then the connection is closed. Otherwise it is answered NONE with
  the enabled mechanisms and the exchange begins.
- After SaslHandshake v1 the client's tokens come in SaslAuthenticate requests; any other
  request is answered with its error response carrying ILLEGAL_SASL_STATE (where that response
  is known here: ``_illegal_state_response``), then the connection is closed.
  After SaslHandshake v0 the tokens come raw, each a size-prefixed frame without a request
  header, and so do the answers (a failure closes without an answer).
- A failed exchange is answered SASL_AUTHENTICATION_FAILED with Kafka's message (the mechanism's
  own for PLAIN; for SCRAM's failures "Authentication failed during authentication due to invalid
  credentials with SASL mechanism SCRAM-SHA-512"), sent ``connection.failed.authentication.delay.ms``
  after the failure, then the connection is closed. No handler ever sees the connection's other
  requests.
- ``connections.max.reauth.ms`` > 0, or a credential that expires (OAUTHBEARER's token; the
  smaller of the two) (KIP-368): the successful SaslAuthenticate says ``session_lifetime_ms``; once the session has expired, any request but a SaslHandshake closes
  the connection; a SaslHandshake on the authenticated connection (at most one a second) begins
  re-authentication with the same mechanism and the same principal, else the connection is closed
  ("Cannot change principals during re-authentication from User.alice: User.bob").
  Re-authentication and its failures say "re-authentication" where the first says
  "authentication".

The principal (``User:NAME``) is the SASL authorization id; the connection records it on every
RequestContext it builds. Credentials are read when an exchange names its user, so a password
changed by AlterUserScramCredentials counts from the next (re-)authentication. A mechanism
server that fails the way Kafka's throws an unexpected exception (``SaslServerError``) closes
the connection without an answer.
"""

from __future__ import annotations

import re
import struct
import time
from typing import Awaitable, Callable, NoReturn

import trio

from ..handlers import HANDLERS
from ..protocol.codegen import ProtocolError
from ..protocol.errors import Errors
from ..protocol.messages import API, REQUEST_HEADER
from .listeners import ANONYMOUS, Listener, sasl_enabled_mechanisms
from .sasl_mechanisms import CredentialStore, SaslAuthenticationFailed, SaslServerError, new_server

_HDR = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
_ERROR_CODE = struct.Struct(">h")
_API_VERSIONS, _SASL_HANDSHAKE, _SASL_AUTHENTICATE = 18, 17, 36
#: Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS
MIN_REAUTH_INTERVAL_S = 1.0


class AuthenticationClose(Exception):
    """The connection is closed by its authenticator (the reason is for the broker's log)."""


class Authenticator:
    """PLAINTEXT and SSL: the connection is authenticated when it opens."""

    def __init__(self, principal: str = ANONYMOUS):
        self.principal = principal

    async def authenticate(self, next_frame, send) -> bool:
        return True

    async def before_request(self, frame: bytes, next_frame, send) -> bool:
        """Whether the authenticator took ``frame`` (re-authentication); raises
        AuthenticationClose when the connection must close."""
        return False


class SaslUsers:
    """The broker's SASL configuration, shared by its connections (``Broker.sasl_users``); the
    SCRAM credentials are derived once, at start-up."""

    def __init__(self, config):
        self.enabled = sasl_enabled_mechanisms(config)
        self.store = CredentialStore(CredentialStore.parse_users(config.str("kconform.sasl.users")), self.enabled)
        self.max_reauth_s = config.int("connections.max.reauth.ms") / 1000.0
        self.failure_delay_s = config.int("connection.failed.authentication.delay.ms") / 1000.0


def new_authenticator(broker, listener: Listener | None, principal: str, dispatch) -> Authenticator:
    if listener is not None and listener.sasl:
        return SaslServerAuthenticator(broker.sasl_users, dispatch)
    return Authenticator(principal)


class SaslServerAuthenticator(Authenticator):
    # states (Kafka's SaslState)
    HANDSHAKE_OR_VERSIONS_REQUEST = "HANDSHAKE_OR_VERSIONS_REQUEST"
    HANDSHAKE_REQUEST = "HANDSHAKE_REQUEST"
    AUTHENTICATE = "AUTHENTICATE"
    REAUTH_BAD_MECHANISM = "REAUTH_BAD_MECHANISM"
    COMPLETE = "COMPLETE"

    def __init__(self, users: SaslUsers, dispatch: Callable[[bytes], Awaitable[bytes | None]],
                 clock=trio.current_time, wall_clock=time.time):
        super().__init__(ANONYMOUS)
        self.users = users
        self.dispatch = dispatch          # the connection's own handling of a frame (ApiVersions)
        self.clock = clock
        self.wall_clock = wall_clock      # a token's exp is wall-clock time
        self.state = self.HANDSHAKE_OR_VERSIONS_REQUEST
        self.mechanism: str | None = None
        self.server = None
        self.kafka_headers = False       # SaslHandshake v1+: tokens inside SaslAuthenticate
        self.session_expires_at: float | None = None
        self.reauthenticating = False
        self._reauth_started_at: float | None = None
        self._bad_mechanism_message = ""

    @property
    def _what(self) -> str:
        return "re-authentication" if self.reauthenticating else "authentication"

    # -- the exchange ------------------------------------------------------------------------
    async def authenticate(self, next_frame, send) -> bool:
        """Run the exchange to the end; False if the client closed the connection meanwhile."""
        while self.state != self.COMPLETE:
            frame = await next_frame()
            if frame is None:
                return False
            await self._step(frame, send)
        return True

    async def before_request(self, frame: bytes, next_frame, send) -> bool:
        api_key = _HDR.unpack_from(frame, 4)[0] if len(frame) >= 12 else None
        now = self.clock()
        if (api_key == _SASL_HANDSHAKE and self.session_expires_at is not None
                and (self._reauth_started_at is None or now - self._reauth_started_at >= MIN_REAUTH_INTERVAL_S)):
            self._reauth_started_at = now
            self.reauthenticating = True
            self.state = self.HANDSHAKE_REQUEST
            self.server = None
            await self._step(frame, send)
            await self.authenticate(next_frame, send)   # False: closed by the client, seen next read
            return True
        if self.session_expires_at is not None and now > self.session_expires_at:
            raise AuthenticationClose("Disconnecting expired channel (the SASL session expired)")
        return False

    async def _step(self, frame: bytes, send) -> None:
        if self.state in (self.HANDSHAKE_OR_VERSIONS_REQUEST, self.HANDSHAKE_REQUEST):
            await self._kafka_request(frame, send)
        elif self.state == self.REAUTH_BAD_MECHANISM:
            await self._fail(send, None, self._bad_mechanism_message)
        elif self.kafka_headers:
            await self._sasl_authenticate(frame, send)
        else:
            await self._raw_token(frame, send)

    async def _kafka_request(self, frame: bytes, send) -> None:
        # Kafka's authentication failures (closed after the delay, without an answer)
        if len(frame) < 12 or _HDR.unpack_from(frame, 4)[0] not in API_NAMES:
            await self._fail(send, None, "the first packet is no Kafka request and GSSAPI is not enabled")
        api_key, version, correlation_id = _HDR.unpack_from(frame, 4)
        if api_key not in (_API_VERSIONS, _SASL_HANDSHAKE):
            await self._fail(send, None, f"Unexpected Kafka request of type {API_NAMES[api_key]} during SASL handshake.")
        if api_key == _API_VERSIONS:
            if self.state != self.HANDSHAKE_OR_VERSIONS_REQUEST:
                raise AuthenticationClose(f"Unexpected ApiVersions request received during SASL authentication state {self.state}")
            out = await self.dispatch(frame)
            if out is not None:
                await send(out)
                if _ERROR_CODE.unpack_from(out, 8)[0] == Errors.NONE:   # after size and correlation id
                    self.state = self.HANDSHAKE_REQUEST
            return
        api = API["SaslHandshake"]
        req = self._decode(api, version, frame)
        mechanism = req.mechanism
        self.kafka_headers = version >= 1
        ok = mechanism in self.users.enabled
        resp = api.Response(error_code=Errors.NONE if ok else Errors.UNSUPPORTED_SASL_MECHANISM,
                            mechanisms=list(self.users.enabled))
        frame_out = api.response_frame(version, correlation_id, resp)
        if not ok:
            await self._fail(send, frame_out, f"Unsupported SASL mechanism {mechanism}")
        await send(frame_out)
        if self.reauthenticating and mechanism != self.mechanism:
            self._bad_mechanism_message = (f"SASL mechanism '{mechanism}' requested by client is not supported "
                                           f"for re-authentication of mechanism '{self.mechanism}'")
            self.state = self.REAUTH_BAD_MECHANISM
            return
        self.mechanism = mechanism
        self.server = new_server(mechanism, self.users.store)
        self.state = self.AUTHENTICATE

    @staticmethod
    def _decode(api, version: int, frame: bytes):
        if not api.min_version <= version <= api.max_version:
            raise AuthenticationClose(f"Version {version} is not supported for apiKey {api.name}")
        try:
            _, pos = REQUEST_HEADER.decode(api.request_header_version(version), frame, 4)
            return api.request.decode(version, frame, pos)[0]
        except ProtocolError as exc:
            raise AuthenticationClose(f"malformed {api.name} v{version} during SASL authentication: {exc}") from None

    async def _sasl_authenticate(self, frame: bytes, send) -> None:
        if len(frame) < 12:
            raise AuthenticationClose("a frame shorter than a request header during SASL authentication")
        api_key, version, correlation_id = _HDR.unpack_from(frame, 4)
        if api_key != _SASL_AUTHENTICATE:
            name = API_NAMES.get(api_key, str(api_key))
            message = f"Unexpected Kafka request of type {name} during SASL authentication."
            error = _illegal_state_response(api_key, version, correlation_id, frame)
            await self._fail(send, error, message)
        api = API["SaslAuthenticate"]
        req = self._decode(api, version, frame)
        R = api.Response
        try:
            token = self.server.evaluate(bytes(req.auth_bytes))
            if self.server.complete:
                self._check_principal()
        except SaslServerError as exc:
            raise AuthenticationClose(f"the SASL server failed: {exc}") from None
        except SaslAuthenticationFailed as exc:
            message = self._client_message(exc)
            resp = R(error_code=Errors.SASL_AUTHENTICATION_FAILED, error_message=message, auth_bytes=b"",
                     session_lifetime_ms=0)
            await self._fail(send, api.response_frame(version, correlation_id, resp), message)
        lifetime_ms = self._complete() if self.server.complete else 0
        # Kafka's SaslAuthenticateResponseData leaves ErrorMessage at its default, "" (measured)
        resp = R(error_code=Errors.NONE, error_message="", auth_bytes=token, session_lifetime_ms=lifetime_ms)
        await send(api.response_frame(version, correlation_id, resp))

    async def _raw_token(self, frame: bytes, send) -> None:
        try:
            token = self.server.evaluate(frame[4:])
            if self.server.complete:
                self._check_principal()
        except SaslServerError as exc:
            raise AuthenticationClose(f"the SASL server failed: {exc}") from None
        except SaslAuthenticationFailed as exc:
            await self._fail(send, None, self._client_message(exc))
        if self.server.complete:
            self._complete()
        await send(_SIZE.pack(len(token)) + token)

    def _client_message(self, exc: SaslAuthenticationFailed) -> str:
        if exc.generic:
            return (f"Authentication failed during {self._what} due to invalid credentials with SASL "
                    f"mechanism {self.mechanism}")
        return str(exc)

    def _check_principal(self) -> None:
        principal = "User:" + self.server.authorization_id
        if self.reauthenticating and principal != self.principal:
            before, after = self.principal.replace(":", ".", 1), principal.replace(":", ".", 1)
            raise SaslAuthenticationFailed(f"Cannot change principals during re-authentication from {before}: {after}")

    def _complete(self) -> int:
        """The exchange succeeded: the principal, and the session's lifetime in ms (0: none) --
        Kafka's ReauthInfo: ``connections.max.reauth.ms``, bounded by the credential's own
        expiry when the mechanism has one (OAUTHBEARER's token ``exp``), which sets a lifetime
        even without ``connections.max.reauth.ms``."""
        self.principal = "User:" + self.server.authorization_id
        self.state = self.COMPLETE
        self.reauthenticating = False
        max_reauth_ms = int(self.users.max_reauth_s * 1000)
        expires_ms = getattr(self.server, "credential_expiration_ms", None)
        if expires_ms is None and max_reauth_ms <= 0:
            self.session_expires_at = None
            return 0
        lifetime_ms = max_reauth_ms
        if expires_ms is not None:
            left_ms = max(0, expires_ms - int(self.wall_clock() * 1000))
            lifetime_ms = left_ms if max_reauth_ms <= 0 else min(left_ms, max_reauth_ms)
        self.session_expires_at = self.clock() + lifetime_ms / 1000
        return lifetime_ms

    async def _fail(self, send, response: bytes | None, reason: str) -> NoReturn:
        """Kafka's failed authentication: the answer (if any) after the delay, then the close."""
        await trio.sleep(self.users.failure_delay_s)
        if response is not None:
            await send(response)
        raise AuthenticationClose(f"Failed {self._what}: {reason}")


def _illegal_state_response(api_key: int, version: int, correlation_id: int, frame: bytes) -> bytes | None:
    """Kafka answers a request that came instead of SaslAuthenticate with that request's error
    response (``AbstractRequest.getErrorResponse``) carrying ILLEGAL_SASL_STATE, then closes.
    Built here where Kafka's is the empty response with the top-level error code (ApiVersions,
    SaslHandshake, most group and transaction APIs) and for Metadata naming no topics (an empty
    response: measured on 4.3.1); the others (whose error responses list the request's topics)
    are closed without an answer."""
    handler = HANDLERS.get(api_key)
    if handler is None or not handler.min_version <= version <= handler.max_version:
        return None
    api = handler.api
    try:
        _, pos = REQUEST_HEADER.decode(api.request_header_version(version), frame, 4)
        req = api.request.decode(version, frame, pos)[0]
    except ProtocolError:
        return None
    resp = api.Response()
    error_code = next((f for f in api.response.spec.root.fields if f.attr == "error_code"), None)
    if error_code is not None and version in error_code.versions:
        resp.error_code = Errors.ILLEGAL_SASL_STATE
    elif not (api.name == "Metadata" and not req.topics):
        return None
    return api.response_frame(version, correlation_id, resp)


#: Kafka's ApiKeys names (``METADATA``, ``SASL_HANDSHAKE``), which its messages use.
API_NAMES = {api.key: re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", api.name).upper() for api in API.values()}
