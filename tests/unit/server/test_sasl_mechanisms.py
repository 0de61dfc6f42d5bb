"""SCRAM and PLAIN on the broker's side (server/sasl_mechanisms): RFC 7677's test vector for
SCRAM-SHA-256, a SCRAM-SHA-512 exchange against a client written from RFC 5802, and Kafka's
messages for failures."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from broker_impl.server import sasl_mechanisms as sm
from broker_impl.server.sasl_mechanisms import (CredentialStore, PlainServer, SaslAuthenticationFailed,
                                                ScramCredential, ScramServer)


def _store_with(mechanism: str, user: str, credential: ScramCredential) -> CredentialStore:
    store = CredentialStore({}, [])
    store.scram_credentials.base[(mechanism, user)] = credential
    return store


def test_rfc7677_sha256_vector(monkeypatch):
    # RFC 7677 section 3: user "user", password "pencil"
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = ScramCredential.generate("SCRAM-SHA-256", "pencil", 4096, salt)
    server = ScramServer("SCRAM-SHA-256", _store_with("SCRAM-SHA-256", "user", credential))
    monkeypatch.setattr(sm, "secure_random_string", lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.authorization_id == "user"


def test_rfc7677_vector_with_a_wrong_proof_fails_with_kafkas_generic_failure(monkeypatch):
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = ScramCredential.generate("SCRAM-SHA-256", "pencil", 4096, salt)
    server = ScramServer("SCRAM-SHA-256", _store_with("SCRAM-SHA-256", "user", credential))
    monkeypatch.setattr(sm, "secure_random_string", lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    with pytest.raises(SaslAuthenticationFailed) as exc:
        server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        b"p=eHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert exc.value.generic and not server.complete
    with pytest.raises(SaslAuthenticationFailed):   # no second attempt on the same exchange
        server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")


def test_sha512_exchange_and_stored_credentials():
    store = CredentialStore({"alice": "alice-secret"}, ["SCRAM-SHA-512"])
    credential = store.scram("SCRAM-SHA-512", "alice")
    assert credential.iterations == 4096 and len(credential.stored_key) == 64
    assert b"alice-secret" not in repr(credential).encode()
    server = ScramServer("SCRAM-SHA-512", store)
    first = server.evaluate(b"n,,n=alice,r=abc").decode()
    fields = dict(kv.split("=", 1) for kv in first.split(","))
    salted = hashlib.pbkdf2_hmac("sha512", b"alice-secret", base64.b64decode(fields["s"]), int(fields["i"]))
    ck = hmac.new(salted, b"Client Key", "sha512").digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth = f"n=alice,r=abc,{first},{without_proof}".encode()
    proof = bytes(a ^ b for a, b in zip(ck, hmac.new(hashlib.sha512(ck).digest(), auth, "sha512").digest()))
    final = server.evaluate(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    sk = hmac.new(salted, b"Server Key", "sha512").digest()
    assert final == b"v=" + base64.b64encode(hmac.new(sk, auth, "sha512").digest())


@pytest.mark.parametrize("message", [b"n,,n=mallory,r=abc", b"y,,n=alice,r=abc", b"n,,n=al=ice,r=abc"])
def test_scram_client_first_failures_are_generic(message):
    server = ScramServer("SCRAM-SHA-512", CredentialStore({"alice": "pw"}, ["SCRAM-SHA-512"]))
    with pytest.raises(SaslAuthenticationFailed) as exc:
        server.evaluate(message)
    assert exc.value.generic


def test_scram_authzid_other_than_user_is_said():
    server = ScramServer("SCRAM-SHA-512", CredentialStore({"alice": "pw"}, ["SCRAM-SHA-512"]))
    with pytest.raises(SaslAuthenticationFailed) as exc:
        server.evaluate(b"n,a=bob,n=alice,r=abc")
    assert not exc.value.generic
    assert str(exc.value) == "Authentication failed: Client requested an authorization id that is different from username"


@pytest.mark.parametrize("token, message", [
    (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
    (b"\0mallory\0alice-secret", "Authentication failed: Invalid username or password"),
    (b"\0\0x", "Authentication failed: username not specified"),
    (b"\0alice\0", "Authentication failed: password not specified"),
    (b"alice\0alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"a\0b\0c\0d", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"bob\0alice\0alice-secret",
     "Authentication failed: Client requested an authorization id that is different from username"),
])
def test_plain_failures_say_kafkas_messages(token, message):
    server = PlainServer(CredentialStore({"alice": "alice-secret"}, ["PLAIN"]))
    with pytest.raises(SaslAuthenticationFailed) as exc:
        server.evaluate(token)
    assert str(exc.value) == message and not exc.value.generic and not server.complete


def test_plain_success():
    server = PlainServer(CredentialStore({"alice": "alice-secret"}, ["PLAIN"]))
    assert server.evaluate(b"\0alice\0alice-secret") == b""
    assert server.complete and server.authorization_id == "alice"


def test_users_config():
    assert CredentialStore.parse_users("alice:a:b, bob:c") == {"alice": "a:b", "bob": "c"}
    with pytest.raises(ValueError):
        CredentialStore.parse_users("alice")
