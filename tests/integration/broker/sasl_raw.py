"""SASL exchanges over a raw connection, byte for byte (tests/integration/broker/test_sasl.py), and
a SCRAM client written from RFC 5802 alone -- not the broker's code -- so that a mistake in
the broker cannot hide behind the same mistake in the client."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import struct

from .rawclient import RawConnection


def plain_token(user: str, password: str, authzid: str = "") -> bytes:
    return f"{authzid}\0{user}\0{password}".encode()


class ScramClient:
    def __init__(self, mechanism: str, user: str, password: str):
        self.hash = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
        self.user, self.password = user, password
        self.nonce = base64.b64encode(secrets.token_bytes(18)).decode()
        self.first_bare = f"n={user},r={self.nonce}"
        self.server_signature = b""

    def first(self) -> bytes:
        return ("n,," + self.first_bare).encode()

    def final(self, server_first: bytes) -> bytes:
        fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
        assert fields["r"].startswith(self.nonce)
        salted = hashlib.pbkdf2_hmac(self.hash, self.password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
        ck = hmac.new(salted, b"Client Key", self.hash).digest()
        without_proof = f"c=biws,r={fields['r']}"
        auth = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        sig = hmac.new(hashlib.new(self.hash, ck).digest(), auth, self.hash).digest()
        proof = bytes(a ^ b for a, b in zip(ck, sig))
        sk = hmac.new(salted, b"Server Key", self.hash).digest()
        self.server_signature = hmac.new(sk, auth, self.hash).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def handshake(conn: RawConnection, mechanism: str, version: int = 1):
    from broker_impl.codec import API
    return conn.request("SaslHandshake", version, API["SaslHandshake"].Request(mechanism=mechanism))


def authenticate(conn: RawConnection, token: bytes, version: int = 2):
    from broker_impl.codec import API
    return conn.request("SaslAuthenticate", version, API["SaslAuthenticate"].Request(auth_bytes=token))


def login(conn: RawConnection, mechanism: str, user: str, password: str, version: int = 2):
    """SaslHandshake v1 then SaslAuthenticate: the last SaslAuthenticate response."""
    assert handshake(conn, mechanism).error_code == 0
    if mechanism == "PLAIN":
        return authenticate(conn, plain_token(user, password), version)
    client = ScramClient(mechanism, user, password)
    first = authenticate(conn, client.first(), version)
    if first.error_code:
        return first
    final = authenticate(conn, client.final(bytes(first.auth_bytes)), version)
    if final.error_code == 0:
        assert bytes(final.auth_bytes) == b"v=" + base64.b64encode(client.server_signature)
    return final


def raw_token(conn: RawConnection, token: bytes) -> bytes | None:
    """After SaslHandshake v0: a token as a bare size-prefixed frame; the broker's bare answer
    (None: the connection was closed)."""
    conn.send_raw(struct.pack(">i", len(token)) + token)
    return conn.recv_frame()
