"""SASL and TLS listeners of the embedded broker, end to end: librdkafka producing and consuming
over SASL_PLAINTEXT (PLAIN, SCRAM-SHA-512) and SASL_SSL (a CA made at test time), a wrong
password, and Kafka's rules byte for byte on raw connections.

The raw tests run against Apache Kafka too, to check that they describe Kafka: start a 4.3.1
broker with a SASL_PLAINTEXT listener, users ``alice``/``alice-secret`` and ``bob``/``bob-secret`` for PLAIN (JAAS) and both
SCRAM mechanisms (``kafka-storage format --add-scram``), ``sasl.enabled.mechanisms=PLAIN,
SCRAM-SHA-256,SCRAM-SHA-512`` and ``connections.max.reauth.ms=60000`` (docs/security.md), then
``KCONFORM_SASL_KAFKA=127.0.0.1:PORT pytest tests/integration/broker/test_sasl.py -k raw``.
"""

from __future__ import annotations

import os
import socket
import ssl
import time
import uuid

import pytest

ck = pytest.importorskip("confluent_kafka")
trustme = pytest.importorskip("trustme")

from broker_impl.codec import API, RESPONSE_HEADER  # noqa: E402

from .rawclient import RawConnection  # noqa: E402
from .sasl_raw import ScramClient, authenticate, handshake, login, plain_token, raw_token  # noqa: E402

USERS = "alice:alice-secret,bob:bob-secret"
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
SASL_PLAINTEXT = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": MECHANISMS,
                  "kconform.sasl.users": USERS, "connections.max.reauth.ms": "60000"}
UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED = 33, 34, 58


@pytest.fixture(scope="module")
def ca():
    return trustme.CA()


def _closed(conn: RawConnection, limit_s: float = 10.0) -> bool:
    conn.sock.settimeout(limit_s)
    try:
        return conn.recv_frame() is None
    except socket.timeout:
        return False


def _logged(b, text: str, limit_s: float = 5.0) -> bool:
    deadline = time.monotonic() + limit_s
    while text not in b.log_path.read_text(errors="replace"):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _round_trip(conf: dict, n: int = 20) -> list[bytes]:
    topic = f"sasl-{uuid.uuid4().hex[:8]}"
    p = ck.Producer({**conf, "acks": "all", "linger.ms": 0})
    for i in range(n):
        p.produce(topic, value=b"v%d" % i)
    assert p.flush(30) == 0
    c = ck.Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        c.close()
    return got


def _client_conf(bootstrap: str, protocol: str, mechanism: str, user: str, password: str, **extra) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": protocol, "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password, **extra}


# -- librdkafka ------------------------------------------------------------------------------
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_confluent_round_trip_over_sasl_plaintext(broker_factory, mechanism):
    b = broker_factory(SASL_PLAINTEXT)
    conf = _client_conf(b.bootstrap, "SASL_PLAINTEXT", mechanism, "alice", "alice-secret")
    assert _round_trip(conf) == [b"v%d" % i for i in range(20)]


def test_confluent_transactions_over_sasl(broker_factory):
    """A secured first listener and transactions: the broker's verification of the first batch and
    its markers go to itself (in process: server/connection LocalRequests), a committed
    transaction is read by read_committed and an aborted one is not."""
    b = broker_factory(SASL_PLAINTEXT)
    conf = _client_conf(b.bootstrap, "SASL_PLAINTEXT", "SCRAM-SHA-512", "alice", "alice-secret")
    topic = f"sasl-txn-{uuid.uuid4().hex[:8]}"
    p = ck.Producer({**conf, "transactional.id": f"tx-{topic}", "linger.ms": 0})
    p.init_transactions(30)
    for commit, value in ((True, b"committed"), (False, b"aborted"), (True, b"committed-too")):
        p.begin_transaction()
        p.produce(topic, value=value)
        assert p.flush(30) == 0
        (p.commit_transaction if commit else p.abort_transaction)(30)
    c = ck.Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "isolation.level": "read_committed"})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < 2 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        c.close()
    assert got == [b"committed", b"committed-too"]


def test_confluent_round_trip_over_sasl_ssl(broker_factory, ca, tmp_path):
    cert = ca.issue_cert("127.0.0.1", "localhost")
    keystore = tmp_path / "broker.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(keystore))
    cafile = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(cafile))
    b = broker_factory({**SASL_PLAINTEXT, "listeners": "SASL_SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
                        "ssl.keystore.location": str(keystore)})
    conf = _client_conf(b.bootstrap, "SASL_SSL", "SCRAM-SHA-512", "bob", "bob-secret",
                        **{"ssl.ca.location": str(cafile), "ssl.endpoint.identification.algorithm": "https"})
    assert _round_trip(conf, 10) == [b"v%d" % i for i in range(10)]
    # a client that trusts another CA never gets through the TLS handshake
    other = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    errors: list = []
    p = ck.Producer({**conf, "ssl.ca.location": str(other), "error_cb": errors.append, "log_level": 0})
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        p.poll(0.2)
    assert errors and errors[0].code() in (ck.KafkaError._SSL, ck.KafkaError._TRANSPORT,
                                           ck.KafkaError._ALL_BROKERS_DOWN), errors


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_confluent_wrong_password_is_an_authentication_error(broker_factory, mechanism):
    b = broker_factory(SASL_PLAINTEXT)
    errors: list = []
    p = ck.Producer({**_client_conf(b.bootstrap, "SASL_PLAINTEXT", mechanism, "alice", "wrong"),
                     "error_cb": errors.append, "log_level": 0})
    p.produce("never", value=b"x")
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        p.poll(0.2)
    p.purge()
    p.flush(0)
    assert errors and errors[0].code() == ck.KafkaError._AUTHENTICATION, errors
    expected = ("Authentication failed: Invalid username or password" if mechanism == "PLAIN" else
                "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512")
    assert expected in errors[0].str()
    # logged once the answer is sent, so maybe just after the client read it
    assert _logged(b, "Failed authentication: ")


def test_confluent_round_trip_over_ssl_with_client_certificate(broker_factory, ca, tmp_path):
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "broker.pem"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    client = ca.issue_cert("client@kconform", common_name="client")
    client.private_key_pem.write_to_path(str(tmp_path / "client.key"))
    client.cert_chain_pems[0].write_to_path(str(tmp_path / "client.pem"))
    b = broker_factory({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
                        "ssl.keystore.location": str(tmp_path / "broker.pem"), "ssl.truststore.type": "PEM",
                        "ssl.truststore.location": str(tmp_path / "ca.pem"), "ssl.client.auth": "required"})
    conf = {"bootstrap.servers": b.bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(tmp_path / "ca.pem"),
            "ssl.certificate.location": str(tmp_path / "client.pem"), "ssl.key.location": str(tmp_path / "client.key")}
    assert _round_trip(conf, 10) == [b"v%d" % i for i in range(10)]


def test_tls_client_auth_required_refuses_a_client_without_certificate(broker_factory, ca, tmp_path):
    cert = ca.issue_cert("127.0.0.1")
    keystore = tmp_path / "broker.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(keystore))
    b = broker_factory({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
                        "ssl.keystore.location": str(keystore), "ssl.truststore.type": "PEM",
                        "ssl.truststore.certificates": ca.cert_pem.bytes().decode(), "ssl.client.auth": "required"})
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    # without a certificate: the handshake (TLS 1.3: the first read after it) fails
    with socket.create_connection(("127.0.0.1", b.port), timeout=10) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            with client_ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(API["ApiVersions"].request_frame(0, 1, "t", API["ApiVersions"].Request()))
                if not tls.recv(4):
                    raise ConnectionError("closed")
    # a plaintext client: Kafka 4.3.1's fatal internal_error alert, then the close
    with RawConnection(b.bootstrap) as conn:
        conn.send_raw(conn.encode_request("ApiVersions", 0, API["ApiVersions"].Request()))
        conn.sock.settimeout(10)
        received = b""
        while chunk := conn.sock.recv(100):
            received += chunk
        assert received == bytes.fromhex("15030300020250")
    # with one the CA issued: ApiVersions is answered
    ca.issue_cert("client@kconform").configure_cert(client_ctx)
    with socket.create_connection(("127.0.0.1", b.port), timeout=10) as raw:
        with client_ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(API["ApiVersions"].request_frame(0, 1, "t", API["ApiVersions"].Request()))
            assert len(tls.recv(65536)) > 8


# -- raw connections: Kafka's rules ------------------------------------------------------------
@pytest.fixture(scope="module")
def sasl_bootstrap(tmp_path_factory):
    """An embedded broker with SASL_PLAINTEXT -- or Kafka's, when KCONFORM_SASL_KAFKA names one."""
    if os.environ.get("KCONFORM_SASL_KAFKA"):
        yield os.environ["KCONFORM_SASL_KAFKA"]
        return
    from tests.conftest import BrokerProcess
    b = BrokerProcess(tmp_path_factory.mktemp("sasl") / "broker", SASL_PLAINTEXT).start()
    try:
        yield b.bootstrap
    finally:
        b.stop()


def test_raw_metadata_before_authentication_closes_without_answer(sasl_bootstrap):
    with RawConnection(sasl_bootstrap) as conn:
        conn.send_raw(conn.encode_request("Metadata", 1, API["Metadata"].Request(topics=None)))
        assert _closed(conn)
    with RawConnection(sasl_bootstrap) as conn:   # after ApiVersions too
        assert conn.request("ApiVersions", 3, API["ApiVersions"].Request(
            client_software_name="kconform", client_software_version="1")).error_code == 0
        conn.send_raw(conn.encode_request("Metadata", 1, API["Metadata"].Request(topics=None)))
        assert _closed(conn)


def test_raw_second_api_versions_or_a_frame_that_is_no_request_closes(sasl_bootstrap):
    with RawConnection(sasl_bootstrap) as conn:
        assert conn.request("ApiVersions", 0, API["ApiVersions"].Request()).error_code == 0
        conn.send_raw(conn.encode_request("ApiVersions", 0, API["ApiVersions"].Request()))
        assert _closed(conn)
    with RawConnection(sasl_bootstrap) as conn:
        conn.send_raw(b"\x00\x00\x00\x04abcd")
        assert _closed(conn)


def test_raw_unknown_mechanism(sasl_bootstrap):
    with RawConnection(sasl_bootstrap) as conn:
        resp = handshake(conn, "GSSAPI")
        assert resp.error_code == UNSUPPORTED_SASL_MECHANISM
        # Kafka lists them in its HashSet's order, not the config's (measured on 4.3.1)
        assert resp.mechanisms == ["PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256"]
        assert _closed(conn)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_raw_wrong_password_then_closed(sasl_bootstrap, mechanism):
    with RawConnection(sasl_bootstrap) as conn:
        resp = login(conn, mechanism, "alice", "wrong")
        assert resp.error_code == SASL_AUTHENTICATION_FAILED
        assert resp.error_message == (
            "Authentication failed: Invalid username or password" if mechanism == "PLAIN" else
            f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}")
        assert _closed(conn)
    with RawConnection(sasl_bootstrap) as conn:   # an unknown user: the same answer
        assert login(conn, mechanism, "mallory", "x").error_code == SASL_AUTHENTICATION_FAILED


def test_raw_request_pipelined_after_a_wrong_password_is_never_answered(sasl_bootstrap):
    with RawConnection(sasl_bootstrap) as conn:
        assert handshake(conn, "PLAIN").error_code == 0
        conn.send_raw(conn.encode_request("SaslAuthenticate", 2, API["SaslAuthenticate"].Request(
            auth_bytes=plain_token("alice", "wrong"))) + conn.encode_request(
            "Metadata", 1, API["Metadata"].Request(topics=None)))
        frame = conn.recv_frame()
        assert frame is not None
        _, pos = RESPONSE_HEADER.decode(1, frame, 0)
        assert API["SaslAuthenticate"].response.decode(2, frame, pos)[0].error_code == SASL_AUTHENTICATION_FAILED
        assert _closed(conn)


def test_raw_login_session_lifetime_and_reauthentication(sasl_bootstrap):
    with RawConnection(sasl_bootstrap) as conn:
        resp = login(conn, "SCRAM-SHA-256", "alice", "alice-secret")
        assert (resp.error_code, resp.session_lifetime_ms) == (0, 60000)
        assert conn.request("Metadata", 1, API["Metadata"].Request(topics=None)).brokers
        time.sleep(1.1)   # Kafka re-authenticates a connection at most once a second
        resp = login(conn, "SCRAM-SHA-256", "alice", "alice-secret")
        assert (resp.error_code, resp.session_lifetime_ms) == (0, 60000)
        assert conn.request("Metadata", 1, API["Metadata"].Request(topics=None)).brokers
        # a SaslAuthenticate out of any exchange reaches KafkaApis: ILLEGAL_SASL_STATE
        resp = authenticate(conn, plain_token("alice", "alice-secret"))
        assert resp.error_code == ILLEGAL_SASL_STATE
        assert resp.error_message == "SaslAuthenticate request received after successful authentication"


def test_raw_reauthentication_cannot_change_principal(sasl_bootstrap):
    with RawConnection(sasl_bootstrap) as conn:
        assert login(conn, "PLAIN", "alice", "alice-secret").error_code == 0
        time.sleep(1.1)
        resp = login(conn, "PLAIN", "bob", "bob-secret")
        assert resp.error_code == SASL_AUTHENTICATION_FAILED
        assert resp.error_message == "Cannot change principals during re-authentication from User.alice: User.bob"
        assert _closed(conn)


def test_raw_other_request_during_exchange(sasl_bootstrap):
    """Instead of SaslAuthenticate: that request's error response with ILLEGAL_SASL_STATE, then
    the close (Metadata's naming no topic is empty: Kafka 4.3.1's bytes)."""
    for api_name, body, version in [
            ("SaslHandshake", API["SaslHandshake"].Request(mechanism="SCRAM-SHA-512"), 1),
            ("ApiVersions", API["ApiVersions"].Request(), 0),
            ("Metadata", API["Metadata"].Request(topics=None), 1)]:
        with RawConnection(sasl_bootstrap) as conn:
            assert handshake(conn, "SCRAM-SHA-512").error_code == 0
            resp = conn.request(api_name, version, body)
            if api_name == "Metadata":
                assert (resp.brokers, resp.topics, resp.controller_id) == ([], [], -1)
            else:
                assert resp.error_code == ILLEGAL_SASL_STATE
            assert _closed(conn)


def test_raw_v0_handshake_then_bare_tokens(sasl_bootstrap):
    with RawConnection(sasl_bootstrap) as conn:
        assert handshake(conn, "PLAIN", version=0).error_code == 0
        assert raw_token(conn, plain_token("alice", "alice-secret")) == b""
        assert conn.request("Metadata", 1, API["Metadata"].Request(topics=None)).brokers
    with RawConnection(sasl_bootstrap) as conn:
        assert handshake(conn, "SCRAM-SHA-512", version=0).error_code == 0
        client = ScramClient("SCRAM-SHA-512", "alice", "alice-secret")
        server_first = raw_token(conn, client.first())
        assert server_first.startswith(b"r=" + client.nonce.encode())
        assert raw_token(conn, client.final(server_first)).startswith(b"v=")
        assert conn.request("Metadata", 1, API["Metadata"].Request(topics=None)).brokers
    with RawConnection(sasl_bootstrap) as conn:   # a wrong password: closed, no answer
        assert handshake(conn, "PLAIN", version=0).error_code == 0
        assert raw_token(conn, plain_token("alice", "wrong")) is None


def test_expired_session_closes_and_librdkafka_reauthenticates(broker_factory):
    b = broker_factory({**SASL_PLAINTEXT, "connections.max.reauth.ms": "1500"})
    with RawConnection(b.bootstrap) as conn:   # a client that does not re-authenticate
        assert login(conn, "PLAIN", "alice", "alice-secret").session_lifetime_ms == 1500
        assert conn.request("Metadata", 1, API["Metadata"].Request(topics=None)).brokers
        time.sleep(1.7)
        conn.send_raw(conn.encode_request("Metadata", 1, API["Metadata"].Request(topics=None)))
        assert _closed(conn)
    # librdkafka re-authenticates before the session ends (KIP-368) and goes on producing
    conf = _client_conf(b.bootstrap, "SASL_PLAINTEXT", "SCRAM-SHA-512", "alice", "alice-secret")
    topic = f"reauth-{uuid.uuid4().hex[:8]}"
    p = ck.Producer({**conf, "acks": "all", "linger.ms": 0})
    delivered: list = []
    start = time.monotonic()
    i = 0
    while time.monotonic() - start < 5:
        p.produce(topic, value=b"%d" % i, on_delivery=lambda err, m: delivered.append(err))
        i += 1
        p.poll(0.1)
    assert p.flush(15) == 0
    assert len(delivered) == i and not any(delivered), [e for e in delivered if e][:3]
    # only the raw connection expired: librdkafka's were re-authenticated in time, not dropped
    assert _logged(b, "SASL session expired")
    assert b.log_path.read_text(errors="replace").count("SASL session expired") == 1


def test_sasl_requests_on_a_plaintext_listener_are_illegal_state(broker):
    """KafkaApis' answers (the same bytes from Kafka 4.3.1's PLAINTEXT listener), and ApiVersions
    advertises both APIs as Kafka does."""
    with RawConnection(broker.bootstrap) as conn:
        keys = conn.request("ApiVersions", 0, API["ApiVersions"].Request()).api_keys
        assert [(k.min_version, k.max_version) for k in keys if k.api_key in (17, 36)] == [(0, 1), (0, 2)]
        for version in (0, 1):
            resp = handshake(conn, "PLAIN", version)
            assert (resp.error_code, resp.mechanisms) == (ILLEGAL_SASL_STATE, [])
        for version in (0, 1, 2):
            resp = authenticate(conn, plain_token("alice", "alice-secret"), version)
            assert (resp.error_code, resp.error_message) == (
                ILLEGAL_SASL_STATE, "SaslAuthenticate request received after successful authentication")


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SSL", "PLAINTEXT"])
def test_principal_recorded_on_the_request_context(tmp_path, monkeypatch, ca, listener):
    """What a handler sees: the SASL user, the client certificate's subject, or ANONYMOUS -- an
    in-process broker on a loopback socket, its Metadata handler wrapped to note ctx.principal."""
    import trio

    from broker_impl.config import BrokerConfig
    from broker_impl.handlers import load_all
    from broker_impl.server.broker import Broker

    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "broker.pem"))
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    ca.issue_cert("x@kconform", common_name="carol", organization_name="kconform",
                  organization_unit_name="qa").configure_cert(client_ctx)
    config = BrokerConfig({**SASL_PLAINTEXT, "listeners": f"{listener}://127.0.0.1:0", "ssl.keystore.type": "PEM",
                           "ssl.keystore.location": str(tmp_path / "broker.pem"), "ssl.truststore.type": "PEM",
                           "ssl.truststore.certificates": ca.cert_pem.bytes().decode(), "ssl.client.auth": "required",
                           "offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1"})
    handler = load_all()[API["Metadata"].key]
    seen: list[str] = []
    real = handler.fn

    async def noting(broker, ctx, req):
        seen.append(ctx.principal)
        return await real(broker, ctx, req)

    monkeypatch.setattr(handler, "fn", noting)

    def client(port: int) -> None:
        with RawConnection(f"127.0.0.1:{port}") as conn:
            if listener == "SSL":
                conn.sock = client_ctx.wrap_socket(conn.sock, server_hostname="127.0.0.1")
            if listener == "SASL_PLAINTEXT":
                assert login(conn, "SCRAM-SHA-512", "bob", "bob-secret").error_code == 0
            assert conn.request("Metadata", 1, API["Metadata"].Request(topics=None)).brokers

    async def main():
        broker = Broker(config, tmp_path / "data", port=0)
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                port = await nursery.start(broker.serve)
                await trio.to_thread.run_sync(client, port)
                nursery.cancel_scope.cancel()

    trio.run(main)
    assert seen == [{"SASL_PLAINTEXT": "User:bob", "SSL": "User:CN=carol,OU=qa,O=kconform",
                     "PLAINTEXT": "User:ANONYMOUS"}[listener]]
