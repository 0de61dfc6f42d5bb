"""conformance/security.py: a run's security settings, as each side takes them."""
from __future__ import annotations

from pathlib import Path

import pytest

from conformance import security
from conformance.dsl import load_cases
from conformance.runner.proxying import ADVERTISE, REWRITE, front_mode
from conformance.security import ENV, Security
from conformance.targets import TARGETS
from conformance.targets.apache_kafka import _listener_named, sasl_broker_configs


def test_generate_makes_a_new_user_per_run_and_hides_the_password():
    a, b = Security.generate("sasl_plaintext"), Security.generate("sasl_plaintext")
    assert (a.protocol, a.mechanism) == ("SASL_PLAINTEXT", "SCRAM-SHA-512")
    assert a.username != b.username and a.password != b.password and len(a.password) >= 20
    assert a.password not in repr(a) and a.username in repr(a)
    assert Security.generate("plaintext") == Security()
    assert not a.tls and a.ca_file == "" and a.keystore_file == ""
    with pytest.raises(ValueError, match="sasl_ssl"):
        Security.generate("ssl_plaintext")


def test_sasl_ssl_makes_a_ca_and_a_pkcs8_broker_key_per_run(tmp_path):
    """The key as PKCS#8 (the only form Kafka reads), the certificate for 127.0.0.1 signed by the
    run's CA; each run its own; the settings of every side name the files."""
    import ssl
    import socket
    import threading

    ca, keystore = security.certificates(tmp_path)
    text = keystore.read_text()
    assert text.startswith("-----BEGIN PRIVATE KEY-----") and "BEGIN CERTIFICATE" in text
    assert oct(keystore.stat().st_mode & 0o777) == "0o600"
    s = Security("SASL_SSL", "SCRAM-SHA-512", "u1", "p-1", str(ca), str(keystore))
    assert s.tls and s.sasl
    assert s.client_properties()["ssl.truststore.location"] == str(ca)
    assert s.client_properties()["ssl.truststore.type"] == "PEM"
    assert s.librdkafka_config()["ssl.ca.location"] == str(ca)
    assert isinstance(s.python_kwargs()["ssl_context"], ssl.SSLContext)
    env = s.to_env()
    assert str(keystore) not in env[ENV]          # a driver gets the CA, never the key
    assert Security.from_env(env) == Security("SASL_SSL", "SCRAM-SHA-512", "u1", "p-1", str(ca))
    assert s.embedded_broker_configs("127.0.0.1:9") == {
        "listeners": "SASL_SSL://127.0.0.1:9", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "kconform.sasl.users": "u1:p-1", "ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca)}
    assert sasl_broker_configs(s)["ssl.keystore.location"] == str(keystore)

    # wrap(): a real handshake with a server holding the key, the host name checked.
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(str(keystore))
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)

    def serve():
        conn, _ = listener.accept()
        with server_ctx.wrap_socket(conn, server_side=True) as tls:
            tls.sendall(tls.recv(5))

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    with s.wrap(socket.create_connection(listener.getsockname(), timeout=10), "127.0.0.1") as sock:
        sock.sendall(b"hello")
        assert sock.recv(5) == b"hello"
    t.join(10)
    listener.close()
    other_ca, _ = security.certificates(tmp_path / "other" if (tmp_path / "other").mkdir() is None else None)
    assert other_ca.read_bytes() != ca.read_bytes()


def test_settings_per_client_family_and_the_driver_environment():
    s = Security("SASL_PLAINTEXT", "SCRAM-SHA-512", "u1", "p-1")
    assert s.client_properties() == {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="u1" password="p-1";'}
    assert s.librdkafka_config() == {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-512",
                                     "sasl.username": "u1", "sasl.password": "p-1"}
    assert s.python_kwargs()["sasl_plain_password"] == "p-1"
    assert Security.from_env(s.to_env()) == s
    assert Security.from_env({}) == Security() and Security().to_env() == {} and ENV in s.to_env()
    assert s.embedded_broker_configs("127.0.0.1:9092") == {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:9092", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "kconform.sasl.users": "u1:p-1"}
    assert Security().embedded_broker_configs("127.0.0.1:9092") == {}


def test_apache_kafka_broker_settings():
    s = Security("SASL_PLAINTEXT", "SCRAM-SHA-512", "u1", "p-1")
    assert sasl_broker_configs(s) == {
        "sasl.enabled.mechanisms": "SCRAM-SHA-512", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": s.client_properties()["sasl.jaas.config"]}
    assert sasl_broker_configs(Security()) == {}
    assert _listener_named("PLAINTEXT://127.0.0.1:5", "SASL_PLAINTEXT") == "SASL_PLAINTEXT://127.0.0.1:5"


def test_use_scopes_the_run_setting():
    s = Security.generate("sasl_plaintext")
    assert not security.current().sasl
    with security.use(s):
        assert security.current() is s
    assert not security.current().sasl


def test_embedded_broker_is_not_advertised_behind_the_proxy_over_sasl():
    """Its own AddPartitionsToTxn verification cannot authenticate to an advertised proxy."""
    case = load_cases(["txn/basic_commit"])[0]
    assert front_mode(TARGETS["embedded"], case) == ADVERTISE
    with security.use(Security.generate("sasl_plaintext")):
        assert front_mode(TARGETS["embedded"], case) == REWRITE
        assert front_mode(TARGETS["apache-kafka"], case) == ADVERTISE


def test_a_run_over_sasl_is_not_applicable_where_the_target_cannot_secure_it(tmp_path):
    """Checked before any process starts: a target without a SASL set-up."""
    from conformance.results import NotApplicable
    from conformance.targets.base import Target
    from conformance.targets.topology import Topology

    class Plain(Target):
        name = "plain-only"

        @classmethod
        def availability(cls):
            return True, "test"

    Plain.__abstractmethods__ = frozenset()
    with security.use(Security.generate("sasl_plaintext")):
        with pytest.raises(NotApplicable, match="does not set up a SASL_PLAINTEXT listener"):
            Plain().start(Topology(), {}, tmp_path)


def test_an_embedded_cluster_on_a_sasl_run_dials_its_brokers_on_a_plaintext_listener():
    """The clients' listener is the run's; the brokers of a cluster get a PLAINTEXT listener of
    their own for each other (Kafka's inter.broker.listener.name), so their replica fetches,
    markers and verifications need no credentials. A one-node broker has the run's only."""
    with security.use(Security.generate("sasl_ssl")) as sec:
        one = sec.embedded_broker_configs("127.0.0.1:9092")
        assert one["listeners"] == "SASL_SSL://127.0.0.1:9092" and "inter.broker.listener.name" not in one
        node = sec.embedded_broker_configs("127.0.0.1:9092", cluster=True)
        assert node["listeners"] == "SASL_SSL://127.0.0.1:9092,REPLICATION://127.0.0.1:0"
        assert node["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,REPLICATION:PLAINTEXT"
        assert node["inter.broker.listener.name"] == "REPLICATION"
        assert node["ssl.keystore.location"] == one["ssl.keystore.location"]


def test_properties_files_are_read_as_java_reads_them():
    from conformance.properties import parse_properties
    text = ("# comment\n! another\n\n"
            "a=1\n"
            "b : two words \n"
            "c three\n"
            "sasl.jaas.config=org.Module required \\\n"
            "    username=\"u\" \\\n"
            "    password=\"p\";\n"
            "path=C:\\\\dir\\\\file\n"
            "esc=tab\\there\\u0041\n"
            "a=later\n")
    assert parse_properties(text) == {
        "a": "later", "b": "two words ", "c": "three",
        "sasl.jaas.config": 'org.Module required username="u" password="p";',
        "path": "C:\\dir\\file", "esc": "tab\thereA"}


def test_a_users_own_properties_file(tmp_path):
    f = tmp_path / "client.properties"
    f.write_text("security.protocol=sasl_plaintext\nsasl.mechanism=SCRAM-SHA-256\n"
                 'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
                 'username="bob" password="a\\\\"b";\n')
    s = Security.from_properties(f)
    assert (s.protocol, s.mechanism, s.username, s.password, s.given) == \
        ("SASL_PLAINTEXT", "SCRAM-SHA-256", "bob", 'a"b', True)
    assert s.client_properties()["sasl.jaas.config"].endswith('username="bob" password="a\\"b";')
    # librdkafka's names, SSL only with a PEM CA
    ca, _ = security.certificates(tmp_path)
    f.write_text(f"security.protocol=SSL\nssl.ca.location={ca}\n")
    s = Security.from_properties(f)
    assert (s.protocol, s.sasl, s.tls, s.ca_file) == ("SSL", False, True, str(ca))
    assert s.librdkafka_config() == {"security.protocol": "SSL", "ssl.ca.location": str(ca)}
    assert s.client_properties() == {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                                     "ssl.truststore.location": str(ca)}
    assert "sasl_mechanism" not in s.python_kwargs()
    # behind the proxy: a bundle of the user's CA and the run's, and a keystore for the proxy
    b = s.behind_proxy()
    assert b.keystore_file and b.ca_file != s.ca_file
    assert Path(b.ca_file).read_bytes().startswith(ca.read_bytes().rstrip(b"\n"))
    assert Path(b.ca_file).read_bytes().count(b"BEGIN CERTIFICATE") == 2


@pytest.mark.parametrize("text,message", [
    ("security.protocol=SASL_SCRAM\n", "security.protocol: expected one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
    ("security.protocol=SASL_SSL\n", "sasl.mechanism: expected one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
    ("security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n", "got 'OAUTHBEARER'"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n", 'sasl.jaas.config: expected a login module'),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=X required username=\"u\";\n",
     "got none of password"),
    ("security.protocol=SSL\nssl.keystore.location=/k.jks\n", "ssl.keystore.location: expected nothing: client certificates"),
    ("security.protocol=SSL\nssl.endpoint.identification.algorithm=\n", "expected https"),
    ("security.protocol=SSL\nssl.truststore.location=/nonexistent.jks\n", "ssl.truststore.location: expected a readable"),
    ("security.protocol=SSL\nssl.truststore.location={self}\nssl.truststore.type=BCFKS\n", "expected PEM, JKS or PKCS12"),
])
def test_a_properties_file_kconform_cannot_follow_names_the_key(tmp_path, text, message):
    f = tmp_path / "bad.properties"
    f.write_text(text.replace("{self}", str(f)))
    with pytest.raises(ValueError) as info:
        Security.from_properties(f)
    assert str(info.value).startswith(f"{f}: ") and message in str(info.value), str(info.value)
