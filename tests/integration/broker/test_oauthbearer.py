"""SASL/OAUTHBEARER with unsecured JWTs on the embedded broker, over real sockets: librdkafka's
own unsecured tokens (``enable.sasl.oauthbearer.unsecure.jwt``) producing and consuming, and
raw exchanges -- the invalid-token challenge and failure, and the session bounded by the
token's ``exp`` (KIP-368), after which a request closes the connection and a new token
re-authenticates. Kafka's rules: broker_impl/server/sasl_mechanisms.OAuthBearerServer.

The raw tests run against Apache Kafka too: a 4.3.1 broker with a SASL_PLAINTEXT listener,
``sasl.enabled.mechanisms=SCRAM-SHA-512,OAUTHBEARER``,
``listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule
required unsecuredLoginStringClaim_sub="kafka";`` (no callback handler: Kafka's default
unsecured validator) and ``connections.max.reauth.ms=60000``; then
``KCONFORM_OAUTH_KAFKA=127.0.0.1:PORT pytest tests/integration/broker/test_oauthbearer.py -k raw``.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import time
import uuid

import pytest

ck = pytest.importorskip("confluent_kafka")

from broker_impl.codec import API  # noqa: E402

from .rawclient import RawConnection  # noqa: E402
from .sasl_raw import authenticate, handshake  # noqa: E402

pytestmark = [pytest.mark.timeout(120)]

CONFIG = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "OAUTHBEARER,SCRAM-SHA-512",
          "kconform.sasl.users": "alice:alice-secret", "connections.max.reauth.ms": "60000"}
SASL_AUTHENTICATION_FAILED = 58


def _jwt(sub: str, lifetime_s: float) -> str:
    def b64(obj) -> str:
        return base64.b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode().rstrip("=")
    now = time.time()
    return f"{b64({'alg': 'none'})}.{b64({'sub': sub, 'iat': int(now), 'exp': now + lifetime_s})}."


def _first(token: str) -> bytes:
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def _closed(conn: RawConnection, limit_s: float = 10.0) -> bool:
    conn.sock.settimeout(limit_s)
    try:
        return conn.recv_frame() is None
    except (socket.timeout, ConnectionError):
        return False


def test_librdkafka_unsecured_jwt_round_trip(broker_factory):
    b = broker_factory(CONFIG)
    conf = {"bootstrap.servers": b.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config": "principal=alice"}
    topic = f"oauth-{uuid.uuid4().hex[:8]}"
    p = ck.Producer(conf)
    for i in range(5):
        p.produce(topic, value=f"v{i}".encode())
    assert p.flush(30) == 0
    c = ck.Consumer({**conf, "group.id": "g", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got, deadline = [], time.monotonic() + 30
    while len(got) < 5 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    assert got == [f"v{i}".encode() for i in range(5)]


@pytest.fixture(scope="module")
def oauth_bootstrap(tmp_path_factory):
    """An embedded broker with OAUTHBEARER -- or Kafka's, when KCONFORM_OAUTH_KAFKA names one."""
    if os.environ.get("KCONFORM_OAUTH_KAFKA"):
        yield os.environ["KCONFORM_OAUTH_KAFKA"]
        return
    from tests.conftest import BrokerProcess
    b = BrokerProcess(tmp_path_factory.mktemp("oauth") / "broker", CONFIG).start()
    try:
        yield b.bootstrap
    finally:
        b.stop()


def test_raw_invalid_token_is_the_json_challenge_then_the_failure(oauth_bootstrap):
    with RawConnection(oauth_bootstrap) as conn:
        assert handshake(conn, "OAUTHBEARER").error_code == 0
        r = authenticate(conn, _first(_jwt("alice", -5)))     # expired
        assert (r.error_code, bytes(r.auth_bytes), r.session_lifetime_ms) == (0, b'{"status":"invalid_token"}', 0)
        r = authenticate(conn, b"\x01")
        assert (r.error_code, r.error_message) == (SASL_AUTHENTICATION_FAILED, '{"status":"invalid_token"}')
        assert _closed(conn)


def test_raw_session_ends_with_the_token_and_a_new_token_reauthenticates(oauth_bootstrap):
    metadata = API["Metadata"].Request(topics=None)
    with RawConnection(oauth_bootstrap) as conn:
        assert handshake(conn, "OAUTHBEARER").error_code == 0
        r = authenticate(conn, _first(_jwt("alice", 10)))
        # the token's, not the 60 s: its exp rounded to the ms less now floored to the ms, so a
        # token authenticated within half a millisecond of its issue has 10001 ms (CI saw it)
        assert r.error_code == 0 and 5000 < r.session_lifetime_ms <= 10001
        assert conn.request("Metadata", 1, metadata).brokers
        time.sleep(1.1)
        assert handshake(conn, "OAUTHBEARER").error_code == 0                # re-authentication, a new token
        r = authenticate(conn, _first(_jwt("alice", 120)))
        assert r.error_code == 0 and r.session_lifetime_ms == 60000          # now connections.max.reauth.ms
        assert conn.request("Metadata", 1, metadata).brokers
    with RawConnection(oauth_bootstrap) as conn:   # not re-authenticated: the session expires with the token
        assert handshake(conn, "OAUTHBEARER").error_code == 0
        assert authenticate(conn, _first(_jwt("alice", 2))).error_code == 0
        time.sleep(2.3)
        conn.send_raw(conn.encode_request("Metadata", 1, metadata))
        assert _closed(conn)


GENERIC = "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER"


def _b64(obj) -> str:
    return base64.b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode().rstrip("=")


@pytest.mark.parametrize("name", ["malformed", "no_auth", "extension_named_auth", "authzid", "iat_future",
                                  "with_extension", "scheme_basic", "header_without_alg"])
def test_raw_first_message_answers(oauth_bootstrap, name):
    """Each answer as Kafka 4.3.1 gave it (the same on both brokers): the failure's code and
    message, the challenge, or the close without an answer."""
    exp = time.time() + 100
    good = _jwt("alice", 100)
    message = {
        "malformed": b"n,,auth=Bearer x\x01\x01",
        "no_auth": b"n,,\x01x=1\x01\x01",
        "extension_named_auth": _first(good)[:-1] + b"auth=x\x01\x01",
        "authzid": f"n,a=bob,\x01auth=Bearer {good}\x01\x01".encode(),
        "iat_future": _first(f"{_b64({'alg': 'none'})}.{_b64({'sub': 'alice', 'exp': exp, 'iat': exp - 50})}."),
        "with_extension": _first(good)[:-1] + b"traceId=abc\x01\x01",
        "scheme_basic": b"n,,\x01auth=Basic abc\x01\x01",
        "header_without_alg": _first(f"{_b64({})}.{_b64({'sub': 'alice', 'exp': exp})}."),
    }[name]
    expected = {
        "malformed": (SASL_AUTHENTICATION_FAILED, b"", GENERIC),
        "no_auth": (SASL_AUTHENTICATION_FAILED, b"", GENERIC),
        "extension_named_auth": (SASL_AUTHENTICATION_FAILED, b"", GENERIC),
        "authzid": (SASL_AUTHENTICATION_FAILED, b"", "Authentication failed: Client requested an authorization id "
                    "(bob) that is different from the token's principal name (alice)"),
        "iat_future": (0, b'{"status":"invalid_token"}', ""),
        "with_extension": (0, b"", ""),
        "scheme_basic": None,           # closed, no answer
        "header_without_alg": None,
    }[name]
    with RawConnection(oauth_bootstrap) as conn:
        assert handshake(conn, "OAUTHBEARER").error_code == 0
        if expected is None:
            conn.send_raw(conn.encode_request("SaslAuthenticate", 2, API["SaslAuthenticate"].Request(auth_bytes=message)))
            assert _closed(conn)
            return
        r = authenticate(conn, message)
        assert (r.error_code, bytes(r.auth_bytes), r.error_message) == expected
