"""The broker's side of SASL/PLAIN (RFC 4616) and SASL/SCRAM-SHA-256/512 (RFC 5802, RFC 7677),
as Kafka's PlainSaslServer and ScramSaslServer implement them, and the credentials they check.

Credentials come from the broker config ``kconform.sasl.users`` (``name:password,...``): Kafka
has no config that holds SCRAM credentials (they live in the cluster metadata, written by
``kafka-storage format --add-scram`` or AlterUserScramCredentials), and its PLAIN users are a
JAAS string under a listener-prefixed config. The SCRAM credentials are kept as Kafka keeps
them: a random salt, the iteration count (4096, Kafka's minimum and ``--add-scram``'s default),
StoredKey and ServerKey -- never the password. PLAIN keeps the password, as Kafka's JAAS
``user_NAME="password"`` entries do, compared in constant time.

A mechanism server is fed the client's tokens one by one (``evaluate``) and answers the next
server token; it raises :class:`SaslAuthenticationFailed` with the message Kafka sends to the
client. Kafka's servers throw two kinds of failures: ``SaslAuthenticationException``, whose
message reaches the client as is (PLAIN's, a SCRAM authorization id that is not the user), and
``SaslException`` (SCRAM's unknown user, wrong proof, malformed message), for which
SaslServerAuthenticator sends a fixed message naming the mechanism only
(``generic=True`` here).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import re
import time

from ..cluster.scram import (SCRAM_HASHES, SCRAM_SHA_256, SCRAM_SHA_512, ScramCredential, ScramCredentials,
                             scram_hmac, secure_random_string, stored_key)

PLAIN = "PLAIN"
OAUTHBEARER = "OAUTHBEARER"

SUPPORTED = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER)


class SaslAuthenticationFailed(Exception):
    """The exchange failed. ``generic``: Kafka replaces the message by
    "Authentication failed during authentication due to invalid credentials with SASL mechanism M"
    (its servers threw a SaslException, whose text stays in the broker)."""

    def __init__(self, message: str, generic: bool = False):
        super().__init__(message)
        self.generic = generic


class SaslServerError(Exception):
    """Kafka's mechanism server throws something that is neither kind of failure (a bug of
    Kafka's, reproduced): the connection is closed without an answer."""


class CredentialStore:
    """Users from ``kconform.sasl.users``: PLAIN passwords and SCRAM credentials per mechanism
    (the latter changed by AlterUserScramCredentials: cluster/scram)."""

    def __init__(self, users: dict[str, str], mechanisms: list[str]):

        self._plain = dict(users) if PLAIN in mechanisms else {}
        #: the config's users under what AlterUserScramCredentials changed since (the broker's
        #: ``scram_credentials``): read at each authentication, so a change counts from the next
        self.scram_credentials = ScramCredentials(
            {(m, u): ScramCredential.generate(m, p) for m in mechanisms if m in SCRAM_HASHES for u, p in users.items()})

    @staticmethod
    def parse_users(value: str) -> dict[str, str]:
        """``alice:alice-secret,bob:bob-secret`` (a name has no ``:`` or ``,``; a password no ``,``)."""
        users: dict[str, str] = {}
        for item in filter(None, (s.strip() for s in value.split(","))):
            name, sep, password = item.partition(":")
            if not sep or not name or not password:
                raise ValueError(f"kconform.sasl.users entry {item.split(':')[0]!r}: NAME:PASSWORD expected")
            users[name] = password
        return users

    def plain_ok(self, user: str, password: str) -> bool:
        expected = self._plain.get(user)
        # compare with something even for an unknown user: the time says nothing about the name
        ok = hmac.compare_digest((expected or "\0" + password).encode(), password.encode())
        return expected is not None and ok

    def scram(self, mechanism: str, user: str) -> ScramCredential | None:
        return self.scram_credentials.get(mechanism, user)


class PlainServer:
    """Kafka's PlainSaslServer: one token ``[authzid] NUL authcid NUL passwd``, no answer."""

    mechanism = PLAIN

    def __init__(self, store: CredentialStore):
        self.store = store
        self.complete = False
        self.authorization_id: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        text = token.decode("utf-8", errors="replace")
        tokens = text.split("\0", 3)
        if len(tokens) != 3:
            # Kafka splits at most 4 times; 4 pieces or 1-2 are "expected 3 tokens"
            raise SaslAuthenticationFailed(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(tokens), 4)}")
        authzid, user, password = tokens
        if not user:
            raise SaslAuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationFailed("Authentication failed: password not specified")
        if not self.store.plain_ok(user, password):
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username")
        self.authorization_id = user
        self.complete = True
        return b""


# Kafka's ScramMessages patterns (Java's ``[a&&[^b]]`` classes spelled out).
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"                      # [\x01-\x7F&&[^,]]
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"                  # [\x21-\x7E&&[^,]]
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_BASE64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_RESERVED = rf"(?:m={_VALUE},)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_RESERVED}n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})"
    rf"(?P<extensions>{_EXTENSIONS})")
_CLIENT_FINAL = re.compile(
    rf"c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS},p=(?P<proof>{_BASE64})")


def username_of(saslname: str) -> str:
    """Kafka's ScramFormatter.username: ``=2C`` is ``,``, ``=3D`` is ``=``, any other ``=`` is invalid."""
    name = saslname.replace("=2C", ",")
    if "=" in name.replace("=3D", ""):
        raise SaslAuthenticationFailed(f"Invalid username: {saslname}", generic=True)
    return name.replace("=3D", "=")


class ScramServer:
    """Kafka's ScramSaslServer: client-first -> server-first -> client-final -> server-final."""

    def __init__(self, mechanism: str, store: CredentialStore):
        self.mechanism = mechanism
        self.hash = SCRAM_HASHES[mechanism]
        self.store = store
        self.complete = False
        self.authorization_id: str | None = None
        self._client_first_bare: str | None = None
        self._server_first: str | None = None
        self._nonce: str | None = None
        self._credential: ScramCredential | None = None

    def evaluate(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationFailed("Invalid SCRAM message: not UTF-8", generic=True) from None
        if self._server_first is None:
            return self._client_first(message)
        if not self.complete and self._credential is not None:
            return self._client_final(message)
        raise SaslAuthenticationFailed("Unexpected challenge in Sasl server state COMPLETE")

    def _client_first(self, message: str) -> bytes:
        m = _CLIENT_FIRST.fullmatch(message)
        if m is None:
            raise SaslAuthenticationFailed(f"Invalid SCRAM client first message format: {message}", generic=True)
        user = username_of(m["saslname"])
        credential = self.store.scram(self.mechanism, user)
        if credential is None:
            raise SaslAuthenticationFailed("Authentication failed: Invalid user credentials", generic=True)
        if m["authzid"] and m["authzid"] != user:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username")
        self.authorization_id = user
        self._credential = credential
        self._client_first_bare = f"n={m['saslname']},r={m['nonce']}{m['extensions']}"
        self._nonce = m["nonce"] + secure_random_string()
        salt = base64.b64encode(credential.salt).decode("ascii")
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        return self._server_first.encode("ascii")

    def _client_final(self, message: str) -> bytes:
        credential, self._credential = self._credential, None   # one attempt (Kafka clears it)
        m = _CLIENT_FINAL.fullmatch(message)
        if m is None:
            raise SaslAuthenticationFailed(f"Invalid SCRAM client final message format: {message}", generic=True)
        if not m["nonce"].endswith(self._nonce):
            raise SaslAuthenticationFailed("Invalid client nonce in the final client message.", generic=True)
        without_proof = message[: message.rindex(",p=")]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode("utf-8")
        client_signature = scram_hmac(self.hash, credential.stored_key, auth_message)
        proof = base64.b64decode(m["proof"])
        if len(proof) != len(client_signature):
            raise SaslAuthenticationFailed("Invalid client credentials", generic=True)
        computed = stored_key(self.hash, bytes(a ^ b for a, b in zip(client_signature, proof)))
        if not hmac.compare_digest(computed, credential.stored_key):
            raise SaslAuthenticationFailed("Invalid client credentials", generic=True)
        signature = scram_hmac(self.hash, credential.server_key, auth_message)
        self.complete = True
        return b"v=" + base64.b64encode(signature)


class OAuthBearerServer:
    """Kafka's OAuthBearerSaslServer with its default validator for brokers,
    OAuthBearerUnsecuredValidatorCallbackHandler: unsigned JWTs (RFC 7628's client initial
    response, then RFC 7515's compact form ``header.claims.`` with ``"alg":"none"``), read from
    apache/kafka 4.x (OAuthBearerClientInitialResponse, OAuthBearerUnsecuredJws,
    OAuthBearerValidationUtils) with its defaults: principal claim ``sub``, no required scope, no
    clock skew.

    - A client first message Kafka's pattern does not match (``n,[a=authzid],^Aauth=Bearer
      TOKEN^A[key=value^A]*^A``), an ``auth`` missing or not ``Bearer TOKEN``, or an extension
      named ``auth``: a SaslException (the generic failure message).
    - A token that does not validate -- not three dot-separated parts with an empty signature, a
      part that is no base64 (Java's basic decoder: ``-`` and ``_`` are refused) or no JSON
      object, ``alg`` not ``none``, no numeric ``exp``, a blank or non-string ``sub``, ``exp`` at
      or before now, an ``iat`` after now, ``exp`` not after ``iat`` -- is answered, without
      failing yet, with the challenge ``{"status":"invalid_token"}``; the client then sends
      one byte 0x01 and the exchange fails with that JSON as the message.
    - Closed without an answer (Kafka throws something else: ``SaslServerError``): a scheme
      other than Bearer (Kafka formats its message with a group of the wrong matcher), a JWS
      header without ``alg`` (a NullPointerException; an empty header part reads as one).
    - An authorization id other than ``sub``: "Authentication failed: Client requested an
      authorization id (A) that is different from the token's principal name (P)".
    - Success: the principal is ``sub``; ``credential_expiration_ms`` (``exp``) bounds the
      session (SaslServerAuthenticator: the smaller of it and connections.max.reauth.ms).
    """

    mechanism = OAUTHBEARER
    INVALID_TOKEN = '{"status":"invalid_token"}'
    _SEP = "\x01"
    _KVPAIRS = r"(?:[A-Za-z]+=[\x21-\x7e \t\r\n]+\x01)*"
    _CLIENT_FIRST = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>{_KVPAIRS})\x01", re.S)
    _AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)")

    def __init__(self, store: CredentialStore | None = None, clock=time.time):
        self.clock = clock
        self.complete = False
        self.authorization_id: str | None = None
        self.credential_expiration_ms: int | None = None
        self._error: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if token == b"\x01" and self._error is not None:
            raise SaslAuthenticationFailed(self._error)
        self._error = None
        message = token.decode("utf-8", errors="replace")
        m = self._CLIENT_FIRST.fullmatch(message)
        if m is None:
            raise SaslAuthenticationFailed("Invalid OAUTHBEARER client first message", generic=True)
        pairs = dict(p.split("=", 1) for p in m["kvpairs"].split(self._SEP) if p)
        auth = pairs.pop("auth", None)
        if auth is None:
            raise SaslAuthenticationFailed("Invalid OAUTHBEARER client first message: 'auth' not specified",
                                           generic=True)
        a = self._AUTH.fullmatch(auth)
        if a is None:
            raise SaslAuthenticationFailed("Invalid OAUTHBEARER client first message: invalid 'auth' format",
                                           generic=True)
        if a["scheme"].lower() != "bearer":
            # Kafka formats its message with a group of the wrong matcher: IllegalArgumentException
            raise SaslServerError(f"Invalid scheme in OAUTHBEARER client first message: {a['scheme']}")
        claims = self._validate(a["token"])
        if claims is None:
            self._error = self.INVALID_TOKEN
            return self._error.encode("utf-8")
        principal = claims["sub"]
        authzid = m["authzid"] or ""
        if authzid and authzid != principal:
            raise SaslAuthenticationFailed(
                f"Authentication failed: Client requested an authorization id ({authzid}) that is different "
                f"from the token's principal name ({principal})")
        self.authorization_id = principal
        self.credential_expiration_ms = round(claims["exp"] * 1000)
        self.complete = True
        return b""

    def _validate(self, token: str) -> dict | None:
        """The token's claims, or None when Kafka's unsecured validator refuses it."""
        if ".." in token:
            return None
        parts = token.split(".")   # as Kafka's: Java's split, plus the empty part after a final '.'
        if len(parts) != 3 or parts[2] != "":
            return None
        try:
            header, claims = (self._json_object(p) for p in parts[:2])
        except ValueError:
            return None
        if "alg" not in header:   # Kafka: Objects.requireNonNull, a NullPointerException
            raise SaslServerError("JWS header must have an Algorithm value")
        if header["alg"] != "none":   # a JSON null is Jackson's text "null" there
            return None
        exp, iat, sub = claims.get("exp"), claims.get("iat"), claims.get("sub")
        number = (int, float)
        if not isinstance(exp, number) or isinstance(exp, bool) or not isinstance(sub, str) or not sub.strip():
            return None
        if iat is not None and (not isinstance(iat, number) or isinstance(iat, bool)):
            return None
        now_ms = self.clock() * 1000
        exp_ms = round(exp * 1000)
        if now_ms >= exp_ms:
            return None
        if iat is not None and (round(iat * 1000) > now_ms or exp_ms <= round(iat * 1000)):
            return None
        return claims

    @staticmethod
    def _json_object(part: str) -> dict:
        """Kafka's toMap: Java's basic base64 decoder, then Jackson; empty content and any JSON
        but an object are no members (not a failure); ValueError: "malformed"."""
        if not re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", part):
            raise ValueError("not Java's basic base64")
        try:
            raw = base64.b64decode(part + "=" * (-len(part) % 4), validate=True)
            value = json.loads(raw) if raw.strip() else {}
        except (binascii.Error, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(str(exc)) from None
        return value if isinstance(value, dict) else {}


def new_server(mechanism: str, store: CredentialStore):
    if mechanism == OAUTHBEARER:
        return OAuthBearerServer(store)
    return PlainServer(store) if mechanism == PLAIN else ScramServer(mechanism, store)
