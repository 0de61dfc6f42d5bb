"""Listeners and TLS (server/listeners): Kafka's listener configs, the order SaslHandshake lists
the mechanisms in, and the principal of a TLS client from a real handshake."""

from __future__ import annotations

import ssl

import pytest
import trio
import trio.testing

from broker_impl.config import BrokerConfig, ConfigError
from broker_impl.server.listeners import inter_broker_listener, java_hash_set_order, parse_listeners, secure, ssl_principal

trustme = pytest.importorskip("trustme")


def test_default_is_plaintext_on_the_given_address():
    (listener,) = parse_listeners(BrokerConfig({}), "127.0.0.1", 9092)
    assert (listener.name, listener.protocol, listener.host, listener.port) == ("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092)


def test_named_listeners_map_to_protocols():
    config = BrokerConfig({"listeners": "CLIENT://127.0.0.1:0,PLAINTEXT://localhost:19092",
                           "listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
                           "sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    a, b = parse_listeners(config, "127.0.0.1", 1)
    assert (a.name, a.protocol, a.sasl, a.port) == ("CLIENT", "SASL_PLAINTEXT", True, 0)
    assert (b.protocol, b.host, b.port, b.sasl) == ("PLAINTEXT", "localhost", 19092, False)


@pytest.mark.parametrize("values", [
    {"listeners": "SASL_PLAINTEXT://127.0.0.1:0"},                                  # GSSAPI, Kafka's default
    {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "GSSAPI,OAUTHBEARER"},
    {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
     "kconform.sasl.users": "alice"},                                                # no password
    {"listeners": "PLAINTEXT://0.0.0.0:9092"},                                       # not loopback
    {"listeners": "CLIENT://127.0.0.1:0"},                                           # not in the map
    {"listeners": "SSL://127.0.0.1:0"},                                              # no keystore
    {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": "/nonexistent.pem", "ssl.keystore.type": "PEM"},
    {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": "/etc/hostname"},    # JKS, the default type
])
def test_refused_configs(values):
    with pytest.raises(ConfigError):
        parse_listeners(BrokerConfig(values), "127.0.0.1", 0)


def test_inter_broker_listener_by_name_else_the_first():
    values = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0,REPLICATION://127.0.0.1:0",
              "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,REPLICATION:PLAINTEXT",
              "sasl.enabled.mechanisms": "PLAIN", "kconform.sasl.users": "a:b"}
    listeners = parse_listeners(BrokerConfig(values), "127.0.0.1", 1)
    assert inter_broker_listener(BrokerConfig(values), listeners).name == "SASL_PLAINTEXT"
    named = BrokerConfig({**values, "inter.broker.listener.name": "replication"})
    assert inter_broker_listener(named, listeners) is listeners[1]
    with pytest.raises(ConfigError, match="INTERNAL: no such listener"):
        inter_broker_listener(BrokerConfig({**values, "inter.broker.listener.name": "INTERNAL"}), listeners)


def test_mechanisms_in_javas_hash_set_order():
    # measured on Kafka 4.3.1: sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
    assert java_hash_set_order(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]) == ["PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256"]
    assert java_hash_set_order(["PLAIN", "PLAIN"]) == ["PLAIN"]


def test_principal_string_escapes_and_order():
    cert = {"subject": ((("countryName", "FR"),), (("organizationName", "Acme, Inc"),),
                        (("commonName", "alice"), ("userId", "a1")))}
    assert ssl_principal(cert) == r"User:CN=alice+UID=a1,O=Acme\, Inc,C=FR"
    assert ssl_principal(None) == ssl_principal({}) == "User:ANONYMOUS"


def _keystore_configs(ca, tmp_path, form: str) -> dict[str, str]:
    """The broker's key and chain in each of Kafka's PEM forms."""
    cert = ca.issue_cert("127.0.0.1")
    if form == "inline":
        return {"ssl.keystore.certificate.chain": "".join(b.bytes().decode() for b in cert.cert_chain_pems),
                "ssl.keystore.key": cert.private_key_pem.bytes().decode()}
    keystore = tmp_path / "server.pem"
    if form == "file":
        cert.private_key_and_cert_chain_pem.write_to_path(str(keystore))
        return {"ssl.keystore.location": str(keystore)}
    from cryptography.hazmat.primitives import serialization   # trustme's own dependency
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(b"key-password"))
    keystore.write_bytes(encrypted + b"".join(b.bytes() for b in cert.cert_chain_pems))
    return {"ssl.keystore.location": str(keystore), "ssl.key.password": "key-password"}


async def _principal_over_tls(tmp_path, client_auth: str, client_cert: bool, form: str = "file") -> str:
    ca = trustme.CA()
    config = BrokerConfig({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
                           **_keystore_configs(ca, tmp_path, form), "ssl.truststore.type": "PEM",
                           "ssl.truststore.certificates": ca.cert_pem.bytes().decode(),
                           "ssl.client.auth": client_auth})
    (listener,) = parse_listeners(config, "127.0.0.1", 0)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    if client_cert:
        ca.issue_cert("alice@example.com", common_name="alice",
                      organization_name="kconform", organization_unit_name="tests").configure_cert(client_ctx)
    server_side, client_side = trio.testing.memory_stream_pair()
    client = trio.SSLStream(client_side, client_ctx, server_hostname="127.0.0.1")
    result = []
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            async def serve():
                result.append((await secure(listener, server_side))[1])
            nursery.start_soon(serve)
            await client.do_handshake()
    return result[0]


@pytest.mark.parametrize("form", ["file", "inline", "encrypted"])
def test_tls_principal_is_the_client_certificates_subject(tmp_path, form):
    principal = trio.run(_principal_over_tls, tmp_path, "required", True, form)
    assert principal == "User:CN=alice,OU=tests,O=kconform"


def test_wrong_key_password_is_refused(tmp_path):
    configs = _keystore_configs(trustme.CA(), tmp_path, "encrypted")
    with pytest.raises(ConfigError):
        parse_listeners(BrokerConfig({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM", **configs,
                                      "ssl.key.password": "wrong"}), "127.0.0.1", 0)


def test_tls_without_client_certificate_request_is_anonymous(tmp_path):
    assert trio.run(_principal_over_tls, tmp_path, "none", True) == "User:ANONYMOUS"


def test_a_cluster_broker_needs_a_plaintext_inter_broker_listener(tmp_path):
    """A broker of a cluster may serve its clients SASL when the brokers dial each other on a
    PLAINTEXT listener (its replication and marker connections do not authenticate)."""
    from broker_impl.server.broker import Broker
    values = {"controller.quorum.voters": "0@127.0.0.1:1", "node.id": "1",
              "listeners": "SASL_PLAINTEXT://127.0.0.1:0,REPLICATION://127.0.0.1:0",
              "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,REPLICATION:PLAINTEXT",
              "sasl.enabled.mechanisms": "PLAIN", "kconform.sasl.users": "a:b"}
    with pytest.raises(ConfigError, match="needs a PLAINTEXT inter-broker listener"):
        Broker(BrokerConfig(values), tmp_path / "a")
    broker = Broker(BrokerConfig({**values, "inter.broker.listener.name": "REPLICATION"}), tmp_path / "b")
    assert broker.inter_broker_listener.name == "REPLICATION"
    assert broker.inter_broker_address == ("127.0.0.1", 0)   # bound at start, then registered
