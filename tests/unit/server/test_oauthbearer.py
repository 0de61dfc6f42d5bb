"""OAuthBearerServer: Kafka's OAUTHBEARER server with its default unsecured-JWT validator (rules
read from apache/kafka: OAuthBearerClientInitialResponse, OAuthBearerUnsecuredJws,
OAuthBearerValidationUtils, OAuthBearerSaslServer)."""

from __future__ import annotations

import base64
import json

import pytest

from broker_impl.server.sasl_mechanisms import OAuthBearerServer, SaslAuthenticationFailed, SaslServerError

NOW = 1_800_000_000.0


def _b64(obj) -> str:
    raw = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return base64.b64encode(raw).decode().rstrip("=")


def jwt(claims: dict, header: dict | None = None, signature: str = "") -> str:
    return f"{_b64(header or {'alg': 'none'})}.{_b64(claims)}.{signature}"


def first(token: str, authzid: str = "", extensions: str = "") -> bytes:
    a = f"a={authzid}" if authzid else ""
    return f"n,{a},\x01auth=Bearer {token}\x01{extensions}\x01".encode()


def server() -> OAuthBearerServer:
    return OAuthBearerServer(clock=lambda: NOW)


def test_a_valid_token_authenticates_its_sub_until_its_exp():
    s = server()
    assert s.evaluate(first(jwt({"sub": "alice", "iat": NOW - 10, "exp": NOW + 60}), extensions="traceId=1\x01")) == b""
    assert (s.complete, s.authorization_id, s.credential_expiration_ms) == (True, "alice", round((NOW + 60) * 1000))


@pytest.mark.parametrize("token", [
    jwt({"sub": "alice", "exp": NOW - 1}),                          # expired
    jwt({"sub": "alice", "exp": NOW}),                              # exp == now: on or after it
    jwt({"sub": "alice"}),                                          # no exp
    jwt({"sub": "alice", "exp": "soon"}),                           # exp not a number
    jwt({"exp": NOW + 60}),                                         # no sub
    jwt({"sub": "  ", "exp": NOW + 60}),                            # blank sub
    jwt({"sub": 7, "exp": NOW + 60}),                               # sub not a string
    jwt({"sub": "alice", "iat": NOW + 5, "exp": NOW + 60}),         # issued in the future
    jwt({"sub": "alice", "exp": NOW + 60}, {"alg": "HS256"}),       # signed algorithm
    jwt({"sub": "alice", "exp": NOW + 60}, signature="c2ln"),       # a signature
    _b64({"alg": "none"}) + "." + _b64({"sub": "alice", "exp": NOW + 60}),   # two parts
    _b64({"alg": "none"}) + "." + _b64(b"[1]") + ".",               # claims not an object
    jwt({"sub": "alice", "exp": NOW + 60}).replace("e", "-", 1),   # base64url's '-': Java's basic decoder refuses it
])
def test_an_invalid_token_gets_the_json_challenge_then_fails_with_it(token):
    s = server()
    assert s.evaluate(first(token)) == b'{"status":"invalid_token"}'
    assert not s.complete
    with pytest.raises(SaslAuthenticationFailed) as info:
        s.evaluate(b"\x01")
    assert (str(info.value), info.value.generic) == ('{"status":"invalid_token"}', False)


@pytest.mark.parametrize("message", [
    b"n,,auth=Bearer abc\x01\x01",                 # no separator after the GS2 header
    b"n,,\x01auth=Bearer abc\x01",                 # no final separator
    b"n,,\x01x=1\x01\x01",                         # no auth
    b"n,,\x01auth=Bearer a+b\x01\x01",             # not token characters
    b"\x01",                                        # 0x01 with no challenge before it
])
def test_a_malformed_first_message_is_the_generic_failure(message):
    with pytest.raises(SaslAuthenticationFailed) as info:
        server().evaluate(message)
    assert info.value.generic


def test_an_authorization_id_must_be_the_tokens_principal():
    token = jwt({"sub": "alice", "exp": NOW + 60})
    assert server().evaluate(first(token, authzid="alice")) == b""
    with pytest.raises(SaslAuthenticationFailed) as info:
        server().evaluate(first(token, authzid="bob"))
    assert str(info.value) == ("Authentication failed: Client requested an authorization id (bob) that is different "
                               "from the token's principal name (alice)")
    assert not info.value.generic


@pytest.mark.parametrize("message", [
    b"n,,\x01auth=Basic abc\x01\x01",                                         # another scheme
    first(jwt({"sub": "alice", "exp": NOW + 60}, header={"typ": "JWT"})),      # a header without alg
    first("." + _b64({"sub": "alice", "exp": NOW + 60}) + "."),               # an empty header
])
def test_what_throws_inside_kafka_closes_the_connection(message):
    # measured on 4.3.1: closed without an answer (an IllegalArgumentException, a NullPointerException)
    with pytest.raises(SaslServerError):
        server().evaluate(message)
